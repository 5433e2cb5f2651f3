"""infersim: a cycle-approximate simulator and design-space explorer for LLM inference.

Public API::

    from infersim import load_chip, load_model, Scenario, simulate
    chip = load_chip("h100-sxm")
    cost = simulate(chip, load_model("llama-3-8b"), Scenario(phase="decode", context_len=1024))
    cost.tpot_s, cost.memory.fits
"""

from infersim.arch_models import Chip, list_chips, load_chip
from infersim.errors import ConfigError, InfersimError, UnsupportedDtypeError
from infersim.simulator import PhaseCost, simulate, simulate_ops
from infersim.workloads import ModelConfig, Precision, Scenario, list_models, load_model

__version__ = "0.1.0"

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
