"""GGUF weights: ggml block types, llama-quantize's per-tensor mixes, and GGUF headers.

* :mod:`~infersim.workloads.gguf.blocks` — every ggml tensor type: weights and bytes per
  block, hence bits per weight, its block struct and an estimated dequantization cost.
* :mod:`~infersim.workloads.gguf.tensors` — the tensors a :class:`ModelConfig`'s GGUF holds and
  the engine weight role of each (``attn_qkv``, ``attn_output``, ``ffn_up`` = gate + up and the
  shared experts', ``ffn_down``, ``experts_up``, ``experts_down``, ``router``, ``lm_head``,
  ``embedding``).
* :mod:`~infersim.workloads.gguf.presets` — the ``llama-quantize`` file types (``Q4_K_M``...)
  as the ggml type each tensor gets, and per-role summaries of a mix.
* :mod:`~infersim.workloads.gguf.reader` — a GGUF file's metadata and tensor table, and the
  :class:`ModelConfig` fields they imply (the only module that uses the ``gguf`` package, and
  only inside its functions).
"""

from infersim.workloads.gguf.blocks import (
    BLOCK_LAYOUTS,
    BLOCK_TYPES,
    DEQUANT_OPS_PER_WEIGHT,
    GGML_TYPE_SIZES,
    BlockType,
    Family,
)
from infersim.workloads.gguf.presets import (
    PRESET_BY_FTYPE,
    PRESETS,
    RULES,
    Category,
    Cond,
    Layers,
    Preset,
    Rule,
    preset,
    role_bits,
    role_dequant_ops,
    tensor_types,
    weights_bytes,
)
from infersim.workloads.gguf.reader import (
    ARCHITECTURE_MODEL_TYPES,
    GgufHeader,
    GgufTensor,
    model_fields,
    read_gguf,
)
from infersim.workloads.gguf.tensors import (
    ENGINE_ROLES,
    RoleMix,
    TensorPlan,
    role_mix,
    tensor_role,
    tensor_shapes,
)

__all__ = [
    "ARCHITECTURE_MODEL_TYPES",
    "BLOCK_LAYOUTS",
    "BLOCK_TYPES",
    "DEQUANT_OPS_PER_WEIGHT",
    "ENGINE_ROLES",
    "GGML_TYPE_SIZES",
    "PRESETS",
    "PRESET_BY_FTYPE",
    "RULES",
    "BlockType",
    "Category",
    "Cond",
    "Family",
    "GgufHeader",
    "GgufTensor",
    "Layers",
    "Preset",
    "RoleMix",
    "Rule",
    "TensorPlan",
    "model_fields",
    "preset",
    "read_gguf",
    "role_bits",
    "role_dequant_ops",
    "role_mix",
    "tensor_role",
    "tensor_shapes",
    "tensor_types",
    "weights_bytes",
]
