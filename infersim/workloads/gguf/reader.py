"""Reading a GGUF file's header: its metadata and tensor table (never its tensor data), and the
:class:`ModelConfig` fields they imply.

The ``gguf`` package (llama.cpp's own reader; it pulls in ``requests`` and ``tqdm``) is imported
inside :func:`read_gguf` only, so importing infersim never loads it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from infersim import dtypes
from infersim.errors import ConfigError
from infersim.workloads.gguf.presets import PRESET_BY_FTYPE
from infersim.workloads.gguf.tensors import role_mix

ARCHITECTURE_MODEL_TYPES: dict[str, str] = {
    "llama": "llama", "mistral": "mistral", "qwen2": "qwen2", "qwen2moe": "qwen2_moe",
    "qwen3": "qwen3", "qwen3moe": "qwen3_moe", "gemma": "gemma", "gemma2": "gemma2",
    "gemma3": "gemma3_text", "phi3": "phi3", "deepseek2": "deepseek_v2", "gpt-oss": "gpt_oss",
    "gpt2": "gpt2", "gptj": "gptj", "gptneox": "gpt_neox", "bloom": "bloom", "falcon": "falcon",
}  # fmt: skip
"""GGUF ``general.architecture`` -> HF ``model_type`` (llama with experts reads as mixtral)."""


@dataclass(frozen=True, slots=True)
class GgufTensor:
    """One entry of a GGUF tensor table: ``shape`` in ggml order (row length first)."""

    name: str
    ggml_type: str
    shape: tuple[int, ...]
    n_elements: int
    n_bytes: int


@dataclass(frozen=True)
class GgufHeader:
    """A GGUF file's metadata and tensor table. ``fields`` are ModelConfig fields read from the
    metadata; ``header_bytes`` is where tensor data starts (metadata, tensor infos, padding)."""

    path: Path
    architecture: str
    model_type: str
    file_type: int | None
    preset: str | None
    fields: dict[str, Any]
    tensors: tuple[GgufTensor, ...]
    header_bytes: int
    file_bytes: int
    metadata: dict[str, Any] = field(repr=False)

    @property
    def total_bytes(self) -> int:
        """Bytes of all tensor data (alignment padding not included)."""
        return sum(t.n_bytes for t in self.tensors)

    @property
    def n_elements(self) -> int:
        """Elements (parameters) over all tensors."""
        return sum(t.n_elements for t in self.tensors)


_SMALL_ARRAY = 4096
"""Metadata arrays up to this length are kept (per-layer values); longer ones (the tokenizer's
vocabulary and merges) only by length, under ``KEY#len``."""


def _metadata(reader: Any) -> dict[str, Any]:
    import gguf

    meta: dict[str, Any] = {}
    for key, f in reader.fields.items():
        if key.startswith("GGUF."):
            continue
        if f.types and f.types[0] == gguf.GGUFValueType.ARRAY:
            meta[f"{key}#len"] = len(f.data)
            if len(f.data) <= _SMALL_ARRAY:
                meta[key] = tuple(f.contents())
        else:
            meta[key] = f.contents()
    return meta


def _read(path: Path) -> tuple[dict[str, Any], tuple[GgufTensor, ...], list[int], int]:
    """(metadata, tensor table, end offset of each tensor's data, data start) of a GGUF file.
    Only the tensor infos are read (name, type, shape, sizes); the memory map is dropped on
    return."""
    import gguf

    reader = gguf.GGUFReader(path)
    tensors = tuple(
        GgufTensor(t.name, t.tensor_type.name, tuple(int(x) for x in t.shape),
                   int(t.n_elements), int(t.n_bytes))
        for t in reader.tensors
    )  # fmt: skip
    ends = [int(t.data_offset) + int(t.n_bytes) for t in reader.tensors]
    return _metadata(reader), tensors, ends, int(reader.data_offset)


def read_gguf(path: str | Path) -> GgufHeader:
    """The metadata and tensor table of the GGUF file at ``path``, read through
    ``gguf.GGUFReader``, which memory-maps the file: no tensor data is read. The reader parses
    every metadata entry into numpy views, which for a Llama-3 tokenizer (128k tokens, 280k
    merges) takes about 6 s and 0.5 GB of transient memory (measured; tensor data untouched):
    read a file once per process.

    Raises:
        ConfigError: missing or unreadable file, not a GGUF file, truncated or corrupt header or
            tensor table, data past the end of the file, or an architecture infersim does not
            know (the message names the path and the reason).
    """
    p = Path(path).expanduser()
    try:
        with p.open("rb") as fh:
            magic = fh.read(4)
        size = p.stat().st_size
    except OSError as exc:
        raise ConfigError(f"{p}: cannot read ({exc.strerror or exc})") from None
    if magic != b"GGUF":
        raise ConfigError(f"{p}: not a GGUF file (starts with {magic!r}, expected b'GGUF')")
    try:
        meta, tensors, ends, header = _read(p)
    except (ValueError, TypeError, IndexError, KeyError, OverflowError, UnicodeDecodeError) as exc:
        raise ConfigError(
            f"{p}: truncated or corrupt GGUF file ({size} bytes; the header or tensor table "
            f"does not parse: {exc})"
        ) from None
    if ends and max(ends) > size:
        raise ConfigError(f"{p}: truncated GGUF file: tensor data ends at byte {max(ends)}, "
                          f"the file has {size}")  # fmt: skip
    arch = str(meta.get("general.architecture", ""))
    if arch not in ARCHITECTURE_MODEL_TYPES:
        raise ConfigError(
            f"{p}: GGUF architecture {arch!r} is not supported; supported: "
            f"{', '.join(sorted(ARCHITECTURE_MODEL_TYPES))}"
        )
    ftype = meta.get("general.file_type")
    fields, model_type = _fields(arch, meta, {t.name: t for t in tensors})
    missing = [f"{arch}.{key}" for key, name in _REQUIRED.items() if name not in fields]
    if "vocab_size" not in fields:
        missing.append("token_embd.weight or tokenizer.ggml.tokens")
    if missing:
        raise ConfigError(f"{p}: GGUF metadata lacks {', '.join(missing)}")
    return GgufHeader(
        path=p, architecture=arch, model_type=model_type,
        file_type=int(ftype) if ftype is not None else None,
        preset=PRESET_BY_FTYPE.get(int(ftype)) if ftype is not None else None,
        fields=fields, tensors=tensors, header_bytes=header, file_bytes=size, metadata=meta,
    )  # fmt: skip


_REQUIRED = {
    "embedding_length": "hidden_size", "feed_forward_length": "intermediate_size",
    "block_count": "num_hidden_layers", "attention.head_count": "num_attention_heads",
}  # fmt: skip
"""Metadata a model cannot be costed without (``vocab_size`` also needs token_embd or the
tokenizer's token list)."""


def _first(value: Any) -> Any:
    """A per-layer array's largest entry (GGUF may store head counts and widths per layer)."""
    if isinstance(value, tuple):
        return max(value) if value else None
    return value


def _fields(arch: str, meta: dict[str, Any],
            tensors: dict[str, GgufTensor]) -> tuple[dict[str, Any], str]:  # fmt: skip
    def get(key: str) -> Any:
        return _first(meta.get(f"{arch}.{key}"))

    out: dict[str, Any] = {
        "hidden_size": get("embedding_length"),
        "intermediate_size": get("feed_forward_length"),
        "num_hidden_layers": get("block_count"),
        "num_attention_heads": get("attention.head_count"),
        "num_key_value_heads": get("attention.head_count_kv"),
        "max_position_embeddings": get("context_length"),
    }
    embd = tensors.get("token_embd.weight")
    tokens = meta.get("tokenizer.ggml.tokens#len")
    out["vocab_size"] = embd.shape[1] if embd else tokens or get("vocab_size")
    out["tie_word_embeddings"] = "output.weight" not in tensors
    experts = get("expert_count") or 0
    model_type = ARCHITECTURE_MODEL_TYPES[arch]
    if experts:
        model_type = "mixtral" if arch == "llama" else model_type
        out["num_experts"] = experts
        out["num_experts_per_tok"] = get("expert_used_count")
        for key, name in (("expert_feed_forward_length", "moe_intermediate_size"),
                          ("expert_shared_count", "num_shared_experts"),
                          ("expert_shared_feed_forward_length", "shared_expert_intermediate_size"),
                          ("leading_dense_block_count", "first_k_dense_replace")):  # fmt: skip
            if get(key):
                out[name] = get(key)
    if out["intermediate_size"] is None:  # MoE files may give only the expert width
        out["intermediate_size"] = get("expert_feed_forward_length")
    heads, hidden = out["num_attention_heads"], out["hidden_size"]
    key_len, rank = get("attention.key_length"), get("attention.kv_lora_rank")
    if rank:  # MLA: key_length(_mla) = nope + rope, value_length(_mla) = v
        rope = get("rope.dimension_count") or 0
        key_len = get("attention.key_length_mla") or key_len
        out.update(kv_lora_rank=rank, q_lora_rank=get("attention.q_lora_rank") or None,
                   qk_rope_head_dim=rope, qk_nope_head_dim=(key_len or 0) - rope,
                   v_head_dim=get("attention.value_length_mla") or get("attention.value_length"),
                   num_key_value_heads=None)  # fmt: skip
    elif key_len and heads and hidden and key_len != hidden // heads:
        out["head_dim"] = key_len
    window = get("attention.sliding_window")
    if window:
        out["sliding_window"] = window
        if model_type == "gpt_oss":  # even layers sliding (llama.cpp: swa pattern 2)
            out["layer_types"] = tuple("sliding_attention" if i % 2 == 0 else "full_attention"
                                       for i in range(out["num_hidden_layers"] or 0))  # fmt: skip
    first = "blk.0."
    if any(f"{first}{t}.bias" in tensors for t in ("attn_q", "attn_qkv")):
        out["attention_bias"] = True
    elif f"{first}attn_output.weight" in tensors:
        out["attention_bias"] = False
    if any(f"{first}{t}.bias" in tensors for t in ("ffn_up", "ffn_down", "ffn_up_exps")):
        out["mlp_bias"] = True
    elif f"{first}ffn_down.weight" in tensors or f"{first}ffn_down_exps.weight" in tensors:
        out["mlp_bias"] = False
    return {k: v for k, v in out.items() if v is not None}, model_type


def model_fields(header: GgufHeader) -> dict[str, Any]:
    """Keyword arguments for ``ModelConfig(**fields)``: the header's fields plus ``model_type``,
    ``name`` (``general.name`` or the file's stem), ``source``, ``published_params`` (the
    file's element count), and when infersim knows the file type as a dtype,
    ``quantized_weights`` (that type) and ``weight_bits_by_role`` (the file's own stored bits
    per weight of each engine role, :func:`role_mix` of its tensors)."""
    name = str(header.metadata.get("general.name") or header.path.stem)
    ftype = header.preset.upper() if header.preset else f"file_type {header.file_type}"
    out: dict[str, Any] = {
        "name": name,
        "source": f"GGUF header of {header.path.name} ({header.architecture}, {ftype}, "
        f"{header.total_bytes / 2**30:.2f} GiB of tensors)",
        "model_type": header.model_type,
        **header.fields,
        "published_params": float(header.n_elements),
    }
    if header.preset and header.preset in dtypes.GGUF_FORMATS:
        out["quantized_weights"] = header.preset
        mix = role_mix(header.tensors)
        out["weight_bits_by_role"] = {role: m.bits_per_weight for role, m in mix.items()}
    return out
