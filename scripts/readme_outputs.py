"""The README's pasted command outputs, regenerated from the commands themselves.

A pasted output in README.md is a fenced block right after a marker line naming its commands::

    <!-- output of: infersim compare --chip h100-sxm --model llama-2-70b --context 128 -->
    ```
    $ infersim compare --chip h100-sxm --model llama-2-70b --context 128
    ...what it prints...
    ```

Several commands in one block are separated by `` ;; `` in the marker; a command may start with
``COLUMNS=N`` for a wider table. Each command runs in a fresh process (``python -m infersim``,
the tables :data:`COLUMNS` wide unless it says otherwise, no colours, no cost cache), and the
block holds ``$ COMMAND`` and what it printed (stdout and stderr, trailing spaces removed).
Nothing a command prints may depend on the machine's speed.

    .venv/bin/python scripts/readme_outputs.py           # rewrite README.md's blocks
    .venv/bin/python scripts/readme_outputs.py --check   # exit 1 and show a diff when stale

``tests/test_readme_outputs.py`` runs the check, so the pasted outputs cannot drift from what
the commands print.
"""

from __future__ import annotations

import argparse
import difflib
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
COLUMNS = 120
"""Terminal width the tables are rendered at."""

MARKER = re.compile(r"^<!-- output of: (?P<commands>.+?) -->\n```[a-z]*\n(?P<body>.*?)^```$",
                    re.M | re.S)
SEPARATOR = " ;; "
TIMEOUT_S = 600


@dataclass(frozen=True)
class Block:
    """One pasted output: its commands, its current text and where it sits in the README."""

    commands: tuple[str, ...]
    body: str
    start: int
    end: int


def blocks(text: str) -> list[Block]:
    """The marked output blocks of ``text`` (the README), in order."""
    return [Block(tuple(c.strip() for c in m["commands"].split(SEPARATOR)), m["body"],
                  m.start("body"), m.end("body")) for m in MARKER.finditer(text)]


def run(command: str) -> str:
    """What ``command`` (``infersim ...``) prints, stdout then stderr, as the README shows it.

    Raises:
        ValueError: the command does not start with ``infersim``.
    """
    argv = shlex.split(command)
    columns = COLUMNS
    if argv and argv[0].startswith("COLUMNS="):
        columns = int(argv.pop(0).removeprefix("COLUMNS="))
    if not argv or argv[0] != "infersim":
        raise ValueError(f"README command {command!r}: must start with 'infersim'")
    env = {**os.environ, "COLUMNS": str(columns), "LINES": "200", "NO_COLOR": "1",
           "TERM": "dumb", "INFERSIM_CACHE": "off"}
    env.pop("FORCE_COLOR", None)
    done = subprocess.run([sys.executable, "-m", "infersim", *argv[1:]], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=TIMEOUT_S, check=False)
    text = done.stdout + done.stderr
    return "\n".join(line.rstrip() for line in text.rstrip("\n").splitlines())


def render(block: Block) -> str:
    """The block's text regenerated: ``$ COMMAND`` and its output, for each command."""
    return "".join(f"$ {_shown(c)}\n{run(c)}\n" for c in block.commands)


def _shown(command: str) -> str:
    """The command as a reader types it (without a ``COLUMNS=N`` prefix)."""
    return re.sub(r"^COLUMNS=\d+\s+", "", command)


def regenerate(text: str) -> str:
    """``text`` with every marked block regenerated."""
    out, last = [], 0
    for block in blocks(text):
        out += [text[last:block.start], render(block)]
        last = block.end
    return "".join(out) + text[last:]


def main() -> int:
    """Rewrite README.md's blocks (or, with --check, report the stale ones and exit 1)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="only compare; exit 1 if stale")
    args = parser.parse_args()
    current = README.read_text(encoding="utf-8")
    fresh = regenerate(current)
    if args.check:
        if fresh != current:
            sys.stdout.writelines(difflib.unified_diff(
                current.splitlines(keepends=True), fresh.splitlines(keepends=True),
                "README.md", "regenerated"))
            return 1
        return 0
    if fresh != current:
        README.write_text(fresh, encoding="utf-8")
        print(f"rewrote {len(blocks(fresh))} output blocks of {README.name}")
    else:
        print(f"{README.name}: {len(blocks(fresh))} output blocks up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main())
