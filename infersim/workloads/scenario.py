"""What is being run: the phase, batch, lengths and number formats of one inference step."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from infersim.workloads.ops import DTypeName

Phase = Literal["prefill", "decode"]


class Precision(BaseModel):
    """Storage dtypes of weights, activations and the KV cache; the array computes at ``act``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    weights: DTypeName = Field(default="bf16", description="Weight dtype")
    act: DTypeName = Field(default="bf16", description="Activation (and compute) dtype")
    kv: DTypeName = Field(default="bf16", description="KV-cache dtype")


class Scenario(BaseModel):
    """One step of inference: a prefill of ``prompt_len`` tokens or a decode step over
    ``context_len`` cached tokens, for ``batch`` sequences."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    phase: Phase = Field(description="prefill (the prompt) or decode (one new token)")
    batch: int = Field(default=1, ge=1, le=1 << 20, description="Sequences in the batch")
    prompt_len: int = Field(default=512, ge=1, le=1 << 24, description="Prefill tokens per seq")
    context_len: int = Field(
        default=512, ge=0, le=1 << 24, description="Tokens already cached per seq (decode)"
    )
    precision: Precision = Field(default_factory=Precision, description="Number formats")

    @property
    def new_tokens(self) -> int:
        """Tokens this step processes over the whole batch."""
        return self.batch * (self.prompt_len if self.phase == "prefill" else 1)

    @property
    def cached_tokens(self) -> int:
        """Tokens per sequence held in the KV cache at the end of the step."""
        return self.prompt_len if self.phase == "prefill" else self.context_len + 1
