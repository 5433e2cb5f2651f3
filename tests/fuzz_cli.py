"""A generator of malformed CLI invocations (every subcommand), shared by the CI sample in
tests/test_fuzz_cli.py and the full run in benchmarks/bench_fuzz.py.

Each invocation mixes valid and hostile values: negative, zero, huge and non-finite numbers,
unknown names, markup and control characters, missing and unreadable files, wrong types. The
contract: exit 0, 1 (a failed check) or 2 (bad input, one message), never a traceback. Valid
invocations with extreme values (:func:`valid_invocation`) add one more: an exit-0 run prints
only finite, non-negative figures, and its JSON is JSON (:func:`figure_problems`).
"""

from __future__ import annotations

import json
import math
import random
import re
from pathlib import Path

BAD_NUMBERS = ["-1", "0", "1e400", "nan", "inf", "-inf", "9" * 60, "1.5", "x", "", "²", "5e-324"]
BAD_NAMES = ["no-such", "[/]", "[bold]x", "\x1b[2J", "../../etc/passwd", "a" * 300, "", " "]
BAD_STACKS = ["tp=0", "tp=-2", "offload=2", "spec:ngram:k=4:k=5", "spec:draft=nope:k=2",
              "sparse:2", "prune:heads=9", "int4-awq+tp=3", "pp=0", "fuse+fuse", "q9_k"]


def files(tmp: Path) -> list[str]:
    """Hostile input files: empty, binary, not UTF-8, YAML alias bomb, deep nesting, a folder."""
    tmp.mkdir(parents=True, exist_ok=True)
    made = {
        "empty.yaml": b"",
        "binary.yaml": bytes(range(256)),
        "latin1.yaml": b"name: caf\xe9\n",
        "bomb.yaml": ("a: &a [x, x, x, x, x, x, x, x, x]\n" + "\n".join(
            f"{c}: &{c} [{', '.join([f'*{p}'] * 9)}]" for p, c in
            zip("abcdefgh", "bcdefghi", strict=True))).encode(),
        "deep.json": b"[" * 3000 + b"]" * 3000,
        "list.yaml": b"- 1\n- 2\n",
        "config.json": b'{"model_type": "llama", "hidden_size": -4}',
        "bad.csv": b"kernel,m\ngemm,-3\n",
    }
    out = []
    for name, data in made.items():
        (tmp / name).write_bytes(data)
        out.append(str(tmp / name))
    out += [str(tmp), str(tmp / "missing.yaml")]
    return out


def invocation(rng: random.Random, tmp: Path) -> list[str]:
    """One malformed invocation of a random subcommand."""
    paths = files(tmp)

    def num() -> str:
        return rng.choice([*BAD_NUMBERS, "1", "8", "128"])

    def name(valid: list[str]) -> str:
        return rng.choice(BAD_NAMES + paths + valid)

    chips, models = ["h100-sxm", "edge-npu", "tpu-v1"], ["tiny-test", "llama-3-8b"]
    command = rng.choice(["simulate", "compare", "map", "serve", "sweep", "pareto", "report",
                          "calibrate", "validate", "chips", "models", "scalesim"])  # fmt: skip
    if command == "simulate":
        args = ["simulate", "--chip", name(chips), "--model", name(models), "--engine", "roofline"]
        options = [["--batch", num()], ["--context", num()], ["--prompt-len", num()],
                   ["--phase", rng.choice(["prefill", "decode", "x"])],
                   ["--weights-dtype", rng.choice(["int4", "fp9", "q4_k_m", ""])],
                   ["--techniques", rng.choice(BAD_STACKS)], ["--json"]]
        args += [a for opt in rng.sample(options, k=3) for a in opt]
    elif command == "compare":
        args = ["compare", "--chip", name(chips), "--model", name(models), "--engine",
                "roofline", "--techniques", ",".join(rng.sample(BAD_STACKS, 2))]  # fmt: skip
    elif command == "map":
        dims = ",".join(num() for _ in range(3))
        args = ["map", "--chip", name(chips), "--gemm", dims, "--dtype",
                rng.choice(["int8", "bf16", "fp9"])]  # fmt: skip
    elif command == "serve":
        args = ["serve", "--chip", name(chips), "--model", name(models), "--requests",
                rng.choice(["-1", "0", "5", "x"]), "--arrivals",
                rng.choice(["poisson:5e-324", "poisson:-1", "trace:" + rng.choice(paths),
                            "burst", "poisson:nan"])]  # fmt: skip
    elif command in ("sweep", "report"):
        args = [command, rng.choice(paths)]
        if command == "sweep":
            args += ["--out", rng.choice(["/etc/hostname", str(tmp / "out"), paths[0]])]
        else:
            args += ["--out", rng.choice(["/etc/hostname/x.html", str(tmp)])]
    elif command == "pareto":
        args = ["pareto", rng.choice(paths), "--objectives",
                rng.choice(["tokens_per_s:max", "x:y", "", "a:min,b:max,c:min,d:max"])]
    elif command == "calibrate":
        args = ["calibrate", rng.choice(paths), "--seed", num(), "--holdout-frac", num()]
    elif command == "validate":
        args = ["validate", "--backend", rng.choice(["cuda", "x", "interpret"]), "--suite",
                rng.choice([*paths, "nope"]), "--rounds", num()]  # fmt: skip
    elif command == "scalesim":
        args = ["scalesim", "--config", rng.choice(paths), "--topology", rng.choice(paths)]
    else:
        args = [command, rng.choice(["--json", "--nope", "x"])]
    return args


# --- valid invocations with extreme values: what an exit-0 run may print ----------------------

EXTREME_INTS = ["1", "2", "7", "128", "4096", "65536", "1048576", "16777216"]
EXTREME_DIMS = ["1", "3", "17", "1024", "16384", "65536", "1048576"]


def valid_invocation(rng: random.Random) -> list[str]:
    """One well-formed invocation of a costing command with in-range but extreme values (tiny
    and huge batches, lengths and GEMMs, every engine): it should exit 0 or 2, and an exit-0
    run must print only finite, non-negative figures (:func:`figure_problems`)."""
    chip = rng.choice(["h100-sxm", "edge-npu", "tpu-v1", "tpu-v4", "eyeriss-v1", "b200"])
    model = rng.choice(["tiny-test", "llama-3-8b", "mixtral-8x7b", "deepseek-v2-lite",
                        "opt-1.3b"])  # fmt: skip
    engine = rng.choice(["roofline", "roofline", "analytic", "events"])
    json_flag = ["--json"] if rng.random() < 0.5 else []
    command = rng.choice(["simulate", "simulate", "compare", "map", "serve"])
    if command == "simulate":
        phase = rng.choice(["prefill", "decode"])
        length = rng.choice(EXTREME_INTS[:6] if engine == "events" else EXTREME_INTS)
        args = ["simulate", "--chip", chip, "--model", model, "--engine", engine,
                "--phase", phase, "--batch", rng.choice(EXTREME_INTS[:5]),
                "--prompt-len" if phase == "prefill" else "--context", length,
                "--techniques", rng.choice(["baseline", "int4-awq", "fp8+kv-fp8", "emulate",
                                            "w8a8-int8", "tp=8", "pp=4:mb=8", "offload=0.5",
                                            "spec:ngram:k=4:alpha=0.6", "flash+fuse",
                                            "sparse:0.999:eff=1", "prune:heads=0.9"])]
        if engine != "roofline":
            args += ["--dataflow", rng.choice(["best", "ws", "os", "is", "rs"])]
    elif command == "compare":
        args = ["compare", "--chip", chip, "--model", model, "--engine",
                "roofline" if engine == "events" else engine, "--batch",
                rng.choice(EXTREME_INTS[:5]), "--techniques",
                ",".join(rng.sample(["baseline", "int4-awq", "fp8", "kv-int4", "emulate",
                                     "tp=2", "q4_k_m"], 3))]  # fmt: skip
    elif command == "map":
        dims = [rng.choice(EXTREME_DIMS) for _ in range(3)]
        while int(dims[0]) * int(dims[1]) * int(dims[2]) > 1 << 42:
            dims = [rng.choice(EXTREME_DIMS) for _ in range(3)]
        args = ["map", "--chip", chip, "--gemm", ",".join(dims), "--dtype",
                rng.choice(["int8", "bf16"]), "--dataflow",
                rng.choice(["best", "ws", "os", "is", "rs"]), "--engine",
                rng.choice(["analytic", "events"]), "--top-k", rng.choice(["1", "3"])]
    else:
        args = ["serve", "--chip", chip, "--model", rng.choice(["tiny-test", "opt-1.3b"]),
                "--engine", "roofline", "--requests", rng.choice(["1", "5", "20"]),
                "--arrivals", rng.choice(["poisson:1e-6", "poisson:1e7", "burst",
                                          "fixed:0.001", "fixed:100"]),
                "--prompt-len", rng.choice(["1", "512", "uniform:1:4096", "lognormal:64:4"]),
                "--output-len", rng.choice(["1", "2", "64"]),
                "--scheduler", rng.choice(["static", "continuous", "chunked-prefill"])]
    integer_only = chip in ("tpu-v1", "eyeriss-v1", "edge-npu")
    if command in ("simulate", "compare") and integer_only and rng.random() < 0.7:
        args.append("--allow-emulation")  # integer-only arrays: bf16 costed emulated
    return args + json_flag


_WORD = re.compile(r"(?<![\w.])-?(?:inf(?:inity)?|nan)(?![\w])", re.IGNORECASE)
_NEGATIVE = re.compile(r"(?<![\w.:/+\-–])-\d[\d,]*(?:\.\d+)?(?:e[-+]?\d+)?(?![\w.:/-])")
MAY_BE_NEGATIVE = ("delta", "change", "vs_", "saving", "gain", "speedup", "difference")
"""JSON keys whose figures may legitimately be negative (a change against a baseline)."""


def _json_problems(data: object, path: str = "") -> list[str]:
    out: list[str] = []
    if isinstance(data, bool) or data is None or isinstance(data, str):
        return out
    if isinstance(data, int | float):
        signed = any(k in path.lower() for k in MAY_BE_NEGATIVE)
        if not math.isfinite(data) or (data < 0 and not signed):
            out.append(f"{path} = {data}")
    elif isinstance(data, dict):
        for key, value in data.items():
            out += _json_problems(value, f"{path}.{key}" if path else str(key))
    elif isinstance(data, list):
        for i, value in enumerate(data):
            out += _json_problems(value, f"{path}[{i}]")
    return out


def _internal_names() -> re.Pattern[str]:
    from infersim.workloads import ops

    names = sorted(c.__name__ for c in vars(ops).values()
                   if isinstance(c, type) and issubclass(c, ops.OpBase))  # fmt: skip
    return re.compile(rf"validation errors? for ({'|'.join(names)})\b|\b({'|'.join(names)})\(")


_INTERNAL = _internal_names()


def internal_names(output: str) -> list[str]:
    """What an error message must not name: an operator model the user never wrote (a
    pydantic error of an internal op, or an op's repr); the message must name the user's
    input instead."""
    return [m.group(0) for m in _INTERNAL.finditer(output)]


def figure_problems(args: list[str], stdout: str) -> list[str]:
    """What an exit-0 run printed that it must not: in JSON, ``NaN``/``Infinity`` tokens (not
    JSON) and non-finite or negative figures (outside :data:`MAY_BE_NEGATIVE` keys); in text,
    ``inf``/``nan`` words and negative numbers."""
    if "--json" in args:
        def refuse(token: str) -> float:
            raise ValueError(f"{token} is not JSON")

        try:
            data = json.loads(stdout, parse_constant=refuse)
        except ValueError as exc:
            return [f"not valid JSON: {exc}"]
        return _json_problems(data)
    found = [f"'{m.group(0)}' in {line.strip()[:120]!r}" for line in stdout.splitlines()
             for m in _WORD.finditer(line)]
    found += [f"'{m.group(0)}' in {line.strip()[:120]!r}" for line in stdout.splitlines()
              for m in _NEGATIVE.finditer(line)]
    return found
