"""infersim: a cycle-approximate simulator and design-space explorer for LLM inference.

Public API::

    from infersim import load_chip, load_model, Scenario, simulate
    chip = load_chip("h100-sxm")
    cost = simulate(chip, load_model("llama-3-8b"), Scenario(phase="decode", context_len=1024))
    cost.tpot_s, cost.memory.fits
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from infersim import lazy

if TYPE_CHECKING:
    from infersim.arch_models import Chip, list_chips, load_chip
    from infersim.errors import ConfigError, InfersimError, UnsupportedDtypeError
    from infersim.simulator import PhaseCost, simulate, simulate_ops
    from infersim.workloads import ModelConfig, Precision, Scenario, list_models, load_model

__version__ = "0.1.0"

_PUBLIC: dict[str, str] = {
    "Chip": "infersim.arch_models",
    "list_chips": "infersim.arch_models",
    "load_chip": "infersim.arch_models",
    "ConfigError": "infersim.errors",
    "InfersimError": "infersim.errors",
    "UnsupportedDtypeError": "infersim.errors",
    "PhaseCost": "infersim.simulator",
    "simulate": "infersim.simulator",
    "simulate_ops": "infersim.simulator",
    "ModelConfig": "infersim.workloads",
    "Precision": "infersim.workloads",
    "Scenario": "infersim.workloads",
    "list_models": "infersim.workloads",
    "load_model": "infersim.workloads",
}
"""Public name -> the module that defines it. Imported on first use (PEP 562), so that
``import infersim.<layer>`` (and the CLI's start) pays only for what it uses."""


__getattr__ = lazy.attributes("infersim", globals(), _PUBLIC)


def __dir__() -> list[str]:
    return sorted([*globals(), *_PUBLIC])


__all__ = [
    "Chip",
    "ConfigError",
    "InfersimError",
    "ModelConfig",
    "PhaseCost",
    "Precision",
    "Scenario",
    "UnsupportedDtypeError",
    "__version__",
    "list_chips",
    "list_models",
    "load_chip",
    "load_model",
    "simulate",
    "simulate_ops",
]
