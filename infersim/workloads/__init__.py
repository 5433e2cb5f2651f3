"""What runs: operators, model configs, scenarios, operator graphs, user workloads."""

from infersim.workloads.graph import build, decode_step, footprint, prefill
from infersim.workloads.models import ModelConfig, list_models, load_model
from infersim.workloads.ops import (
    Attention,
    Collective,
    Conv2d,
    Elementwise,
    Gemm,
    Norm,
    Op,
    OpBase,
    Softmax,
)
from infersim.workloads.scenario import Precision, Scenario
from infersim.workloads.workload import Workload, load_workload

__all__ = [
    "Attention",
    "Collective",
    "Conv2d",
    "Elementwise",
    "Gemm",
    "ModelConfig",
    "Norm",
    "Op",
    "OpBase",
    "Precision",
    "Scenario",
    "Softmax",
    "Workload",
    "build",
    "decode_step",
    "footprint",
    "list_models",
    "load_model",
    "load_workload",
    "prefill",
]
