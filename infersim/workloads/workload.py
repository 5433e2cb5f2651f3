"""User-defined workloads: a YAML (or JSON) list of operators, for non-LLM networks and custom
experiments.

The file is either a list of operators or ``{name: ..., ops: [...]}``; each operator is a
mapping with ``kind`` (gemm, conv2d, attention, elementwise, norm, softmax, collective) and the
fields of that operator, e.g. ``{kind: gemm, name: fc1, m: 128, k: 4096, n: 4096, count: 2}``.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from infersim.errors import ConfigError
from infersim.io import read_document, validate
from infersim.workloads.ops import Op


class Workload(BaseModel):
    """A named list of operators."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(default="workload", min_length=1, description="Label in reports")
    ops: list[Op] = Field(min_length=1, description="Operators, in order")


def load_workload(path: str | Path) -> Workload:
    """A validated :class:`Workload` from a YAML/JSON file.

    Raises:
        ConfigError: missing or malformed file, or an operator with bad fields (each named by
            its position, e.g. ``ops.2.gemm.m``).
    """
    file = Path(path).expanduser()
    if not file.is_file():
        raise ConfigError(f"workload file {str(path)!r} does not exist")
    data = read_document(file)
    if isinstance(data, list):
        data = {"name": file.stem, "ops": data}
    elif isinstance(data, dict):
        data = {"name": file.stem, **data}
    else:
        raise ConfigError(f"{file.name}: expected a list of operators or {{name, ops}}")
    return validate(Workload, data, file.name)
