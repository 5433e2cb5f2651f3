"""The one reader of user files: bounded, regular files only, UTF-8 with the offset named, YAML
without alias bombs, no unbounded nesting; every failure a ConfigError naming the file."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from infersim.cli import app
from infersim.errors import ConfigError
from infersim.io import MAX_NESTING, read_document, read_text

LEVELS = zip("abcdefgh", "bcdefghi", strict=True)
BOMB = "\n".join(
    ["a: &a [x, x, x, x, x, x, x, x, x]"]
    + [f"{c}: &{c} [{', '.join([f'*{p}'] * 9)}]" for p, c in LEVELS]
)  # nine levels of nine aliases: 9^9 = 387 million leaves if expanded


def test_alias_bomb_is_refused_at_once(tmp_path: Path):
    path = tmp_path / "bomb.yaml"
    path.write_text(BOMB)
    with pytest.raises(ConfigError, match=r"bomb.yaml: malformed YAML.*aliases expand to more"):
        read_document(path)


def test_a_few_aliases_are_fine(tmp_path: Path):
    path = tmp_path / "anchors.yaml"
    path.write_text("base: &b {rows: 8}\none: *b\ntwo: *b\n")
    assert read_document(path)["two"] == {"rows": 8}


def test_not_utf8_names_the_file_and_offset(tmp_path: Path):
    path = tmp_path / "c.yaml"
    path.write_bytes(b"name: caf\xe9\n")
    with pytest.raises(ConfigError, match=r"c.yaml: not UTF-8 text \(byte 0xe9 at offset 9\)"):
        read_document(path, "chip")


@pytest.mark.parametrize("suffix", [".yaml", ".json"])
def test_deep_nesting_is_refused(tmp_path: Path, suffix: str):
    path = tmp_path / f"deep{suffix}"
    depth = 5000
    path.write_text("[" * depth + "]" * depth)
    with pytest.raises(ConfigError, match=f"nested deeper than {MAX_NESTING} levels"):
        read_document(path)


def test_huge_integer_literal_is_a_clear_error(tmp_path: Path):
    path = tmp_path / "big.json"
    path.write_text('{"hidden_size": ' + "9" * 5000 + "}")
    with pytest.raises(ConfigError, match="big.json"):
        read_document(path)


def test_only_regular_files_of_bounded_size(tmp_path: Path):
    with pytest.raises(ConfigError, match="not a regular file"):
        read_text(tmp_path, "chip")
    fifo = tmp_path / "pipe.yaml"
    os.mkfifo(fifo)
    with pytest.raises(ConfigError, match="pipe.yaml: not a regular file"):
        read_text(fifo)  # would block forever if opened
    big = tmp_path / "big.yaml"
    big.write_bytes(b"#" * 2048)
    with pytest.raises(ConfigError, match="2,048 bytes; at most 1,024"):
        read_text(big, max_bytes=1024)
    with pytest.raises(ConfigError, match="cannot read"):
        read_text(tmp_path / "missing.yaml")


def test_cli_exit_2_for_a_non_utf8_chip(tmp_path: Path):
    path = tmp_path / "c.yaml"
    path.write_bytes(b"name: caf\xe9\n")
    result = CliRunner().invoke(app, ["simulate", "--chip", str(path), "--model", "tiny-test"])
    assert result.exit_code == 2
    assert "not UTF-8" in result.output and "Traceback" not in result.output
