"""Validation tests: Triton kernels run on the GPU when there is one, else on the interpreter.

``TRITON_INTERPRET=1`` must be set before the kernels are imported (Triton reads it when it
decorates them), so it is set here, at collection, when no CUDA device is present. Tests that
need a GPU carry the ``gpu`` marker and are skipped without one.
"""

from __future__ import annotations

import os

import pytest

try:
    import torch

    HAS_CUDA = bool(torch.cuda.is_available())
except ImportError:  # the validate extra is not installed: the tests that need torch skip
    HAS_CUDA = False

if not HAS_CUDA:
    os.environ["TRITON_INTERPRET"] = "1"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "gpu: needs an NVIDIA GPU (skipped without CUDA)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if HAS_CUDA:
        return
    skip = pytest.mark.skip(reason="no CUDA device")
    for item in items:
        if item.get_closest_marker("gpu") is not None:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def device() -> str:
    """Where Triton kernels run in this session: "cuda", or "cpu" under the interpreter."""
    return "cuda" if HAS_CUDA else "cpu"
