"""The CLI starts at once: --help, chips, models and a roofline simulate import none of the
heavy packages (pandas, plotly, SimPy, SciPy, torch, Triton, Ray, gguf); the commands that need
them import them themselves. Start time is a benchmark figure (benchmarks/bench_engines.py)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

HEAVY = ("pandas", "plotly", "simpy", "scipy", "torch", "triton", "ray", "gguf")
PROBE = """
import json, sys
from typer.testing import CliRunner
from infersim.cli import app
result = CliRunner().invoke(app, json.loads(sys.argv[1]))
print(json.dumps({"code": result.exit_code,
                  "heavy": [m for m in json.loads(sys.argv[2]) if m in sys.modules]}))
"""


@pytest.mark.parametrize(
    "args",
    [
        ["--help"],
        ["chips"],
        ["models"],
        ["simulate", "--chip", "h100-sxm", "--model", "llama-3-8b", "--engine", "roofline"],
    ],
)
def test_light_commands_import_no_heavy_package(args: list[str]):
    out = subprocess.run([sys.executable, "-c", PROBE, json.dumps(args), json.dumps(HEAVY)],
                         capture_output=True, text=True, check=True)  # fmt: skip
    found = json.loads(out.stdout.strip().splitlines()[-1])
    assert found["code"] == 0
    assert found["heavy"] == []
