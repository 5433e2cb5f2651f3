"""Every dataflow test starts with an empty mapper cache."""

from __future__ import annotations

import pytest

from infersim.dataflow import clear_cache


@pytest.fixture(autouse=True)
def _fresh_mapper_cache() -> None:
    clear_cache()
