"""On a machine with an NVIDIA GPU: the cuda backend checks and times Triton kernels, and the
predictions come from the preset matching the device. Skipped without CUDA."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.gpu

torch = pytest.importorskip("torch")
pytest.importorskip("triton")


def test_cuda_backend_checks_and_times_a_few_kernels():
    from infersim.arch_models import load_chip
    from infersim.cli.validate import preset_for_device
    from infersim.validation.backends import CudaBackend
    from infersim.validation.harness import run_suite
    from infersim.validation.suite import Suite, load_suite

    backend = CudaBackend(warmup_ms=5, rep_ms=20)
    kinds_seen: set[str] = set()
    picked = []
    for kernel in load_suite("gpu").kernels:
        key = f"{kernel.kind}-{getattr(kernel, 'fused', '')}"
        if key not in kinds_seen:
            kinds_seen.add(key)
            picked.append(kernel)
    chip = load_chip(preset_for_device(backend.device().name))
    results = run_suite(backend, Suite(name="gpu-smoke", kernels=picked), chip)
    assert results["summary"]["checks_failed"] == 0
    for row in results["rows"]:
        assert row["measured_s"] > 0
        assert row["predicted_s"] > 0
        print(f"{row['label']:60s} {row['measured_s'] * 1e6:9.1f} us  error {row['error']:+.0%}")
