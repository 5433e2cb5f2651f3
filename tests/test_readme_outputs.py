"""The README's pasted command outputs equal what the commands print now (regenerated here by
``scripts/readme_outputs.py``), so they cannot drift from the code."""

from __future__ import annotations

import difflib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]
REFRESH = ".venv/bin/python scripts/readme_outputs.py"


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("readme_outputs",
                                                  ROOT / "scripts" / "readme_outputs.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_every_pasted_output_is_what_its_command_prints():
    script = _script()
    readme = script.README.read_text(encoding="utf-8")
    blocks = script.blocks(readme)
    commands = [c for b in blocks for c in b.commands]
    # the outputs the README quotes: a way-out table, two refusals, compare, chips, map
    assert len(blocks) >= 5 and any(" compare " in c for c in commands)
    assert any(" map " in c and "--objective energy" in c for c in commands)
    for block in blocks:
        fresh = script.render(block)
        if fresh != block.body:
            diff = "".join(difflib.unified_diff(block.body.splitlines(keepends=True),
                                                fresh.splitlines(keepends=True),
                                                "README.md", "regenerated"))
            raise AssertionError(f"README output of {block.commands} is stale; refresh with "
                                 f"`{REFRESH}`:\n{diff}")


def test_the_tour_map_command_asks_for_the_energy_it_quotes():
    """The tour's `infersim map` line carries --objective energy: the README quotes the
    least-energy mapping's figure, which the default (latency) objective does not give."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    tour = readme[readme.index("## A tour of the CLI"):]
    tour = tour[:tour.index("```", tour.index("```sh") + 5)]
    line = next(i for i, text in enumerate(tour.splitlines()) if text.startswith("infersim map"))
    command = " ".join(tour.splitlines()[line:line + 2])
    assert "--objective energy" in command, command


def test_blocks_are_found_and_replaced_in_place():
    script = _script()
    text = ("intro\n<!-- output of: infersim a ;; COLUMNS=150 infersim b -->\n```\nold\n```\n"
            "tail\n")
    (block,) = script.blocks(text)
    assert block.commands == ("infersim a", "COLUMNS=150 infersim b") and block.body == "old\n"
    script.run = lambda command: f"out of {command}"
    assert script.regenerate(text) == (
        "intro\n<!-- output of: infersim a ;; COLUMNS=150 infersim b -->\n```\n"
        "$ infersim a\nout of infersim a\n$ infersim b\nout of COLUMNS=150 infersim b\n```\n"
        "tail\n")
