"""A generator of malformed CLI invocations (every subcommand), shared by the CI sample in
tests/test_fuzz_cli.py and the full run in benchmarks/bench_fuzz.py.

Each invocation mixes valid and hostile values: negative, zero, huge and non-finite numbers,
unknown names, markup and control characters, missing and unreadable files, wrong types. The
contract: exit 0, 1 (a failed check) or 2 (bad input, one message), never a traceback.
"""

from __future__ import annotations

import random
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
