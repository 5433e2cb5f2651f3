"""Pydantic descriptions of an inference chip, composed the way the chip is built.

A :class:`Chip` has ``cores`` identical cores; each core has a systolic array, a vector unit,
a PE register file and an SRAM; the cores share an optional SRAM (global buffer / L2), the DRAM
(HBM), and optional host and chip-to-chip links. Every physical field carries its unit in its
name. Models are frozen: a chip is a value, and a variant is made with :meth:`Chip.with_`.
"""

from __future__ import annotations

import hashlib
from functools import cached_property
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from infersim import dtypes
from infersim.arch_models.constants import MAC_ENERGY_PJ, eyeriss_pj_per_byte
from infersim.dtypes import MacClass
from infersim.errors import ConfigError, UnsupportedDtypeError


class Spec(BaseModel):
    """Base for every hardware description: frozen, strict about unknown fields, finite."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)


MIN_MACS_PER_PE_PER_CYCLE = 1e-3
"""Slowest PE rate accepted (a bit-serial PE does about 1/16 MAC per cycle): below it the
peak rate is a denormal and a step's time overflows to infinity."""

MAX_MACS_PER_PE_PER_CYCLE = 1024.0
"""Fastest PE rate accepted."""

MIN_FLOPS_PER_LANE_PER_CYCLE = 1e-3
"""Slowest vector lane accepted (below it a vector op's time overflows to infinity)."""

MIN_EFFICIENCY = 1e-4
"""Smallest achievable fraction of a peak rate accepted (the calibration knobs)."""


DataflowName = Literal["ws", "os", "is", "rs", "nlr", "tc"]
"""The dataflows an array can implement (the mapper's templates:
:mod:`infersim.dataflow.templates`)."""


class SystolicArray(Spec):
    """One core's systolic array of ``rows × cols`` processing elements."""

    rows: int = Field(ge=1, le=65536, description="PE rows (the dim a weight-stationary K maps to)")
    cols: int = Field(ge=1, le=65536, description="PE columns")
    macs_per_pe_per_cycle: dict[MacClass, float] = Field(
        min_length=1,
        description="Multiply-accumulates each PE completes per cycle, per compute class; "
        "a class missing here is a dtype the array cannot compute",
    )
    sparsity_2_4: bool = Field(
        default=False, description="Skips zero operands of 2:4 structured-sparse weights"
    )
    double_buffered: bool = Field(
        default=False,
        description="PEs hold a second register for the stationary operand (TPU: weights): "
        "the next fold's load overlaps the current fold's stream and folds pipeline through "
        "the array, so each SRAM tile exposes one load and one skew and drain",
    )
    supported_dataflows: tuple[DataflowName, ...] | None = Field(
        default=None,
        min_length=1,
        description="The dataflows the array's hardware implements: the mapper's 'best' "
        "searches only these and refuses another (none given: a generic array, any dataflow)",
    )

    @field_validator("macs_per_pe_per_cycle")
    @classmethod
    def _positive_rates(cls, value: dict[str, float]) -> dict[str, float]:
        for dtype, rate in value.items():
            if not MIN_MACS_PER_PE_PER_CYCLE <= rate <= MAX_MACS_PER_PE_PER_CYCLE:
                raise ValueError(
                    f"rate for {dtype} = {rate}: must be >= {MIN_MACS_PER_PE_PER_CYCLE:g} "
                    f"and <= {MAX_MACS_PER_PE_PER_CYCLE:g}"
                )
        return value

    @field_validator("supported_dataflows")
    @classmethod
    def _distinct_dataflows(
        cls, value: tuple[str, ...] | None
    ) -> tuple[str, ...] | None:
        if value is not None and len(set(value)) != len(value):
            raise ValueError(f"{list(value)} names a dataflow twice")
        return value

    def implements(self, dataflow: str) -> bool:
        """Whether the array runs ``dataflow`` (a generic array runs every one)."""
        return self.supported_dataflows is None or dataflow in self.supported_dataflows

    @property
    def pes(self) -> int:
        """Processing elements in the array."""
        return self.rows * self.cols


class VectorUnit(Spec):
    """The per-core SIMD unit that runs softmax, norms, activations and dequantization."""

    lanes: int = Field(ge=1, le=1_000_000, description="Parallel lanes per core")
    flops_per_lane_per_cycle: float = Field(
        default=2.0, ge=MIN_FLOPS_PER_LANE_PER_CYCLE, le=1024,
        description="FLOPs each lane completes per cycle (FMA = 2)",
    )
    special_ops_per_cycle: float | None = Field(
        default=None, ge=MIN_FLOPS_PER_LANE_PER_CYCLE, le=1_000_000,
        description="Transcendental results (exp2, rsqrt, ...) the core's special-function "
        "units return per cycle, beside the lanes (a GPU SM's MUFU); none: exponentials run "
        "on the lanes as ordinary vector FLOPs",
    )


class RegisterFile(Spec):
    """Private storage inside each PE (what row-stationary keeps its filter row in)."""

    bytes_per_pe: int = Field(ge=0, le=1 << 20, description="Register-file bytes per PE")


class SRAM(Spec):
    """An on-chip SRAM level: per core (scratchpad, shared memory) or shared (global buffer, L2)."""

    capacity_bytes: int = Field(ge=1, le=1 << 40, description="Capacity in bytes")
    bandwidth_bytes_per_cycle: float = Field(
        ge=1e-3, le=1 << 24, description="Read+write bandwidth in bytes per core clock cycle"
    )
    fill_bytes_per_cycle: float | None = Field(
        default=None, ge=1e-3, le=1 << 24,
        description="A per-core SRAM: most bytes per cycle one core moves to and from the "
        "levels beyond it (an SM's port to the L2), so a few busy cores cannot draw the "
        "whole L2 or DRAM bandwidth; none: only those levels' bandwidth limits it",
    )
    fill_latency_s: float | None = Field(
        default=None, ge=0, le=1e-3,
        description="A per-core SRAM: latency of one fill from the levels beyond it; a core "
        "keeps its double-buffered tiles' loads in flight, so by Little's law it draws at "
        "most their bytes per this latency (none: the DRAM's latency)",
    )
    multicast_cores: int = Field(
        default=1, ge=1, le=64,
        description="A shared SRAM: cores that one read of a tile serves at once (a Hopper "
        "thread-block cluster's TMA multicast: the CTAs of a cluster load the tile they share "
        "once); 1: each core loads its own copy",
    )


class DRAM(Spec):
    """Off-chip memory (HBM, LPDDR, DDR)."""

    kind: str = Field(default="HBM", max_length=32, description="Technology, e.g. HBM3e")
    capacity_bytes: int = Field(ge=1, le=1 << 50, description="Capacity in bytes")
    bandwidth_bytes_per_s: float = Field(
        ge=1e6, le=1e15, description="Peak bandwidth in bytes per second, all channels"
    )
    latency_s: float = Field(
        default=500e-9, ge=0, le=1e-3, description="Access latency of one request in seconds"
    )
    channels: int = Field(default=1, ge=1, le=4096, description="Independent channels")


class HostLink(Spec):
    """The link to the host (PCIe, C2C): what CPU offload streams over."""

    bandwidth_bytes_per_s: float = Field(
        ge=1e6, le=1e14, description="Bandwidth per direction in bytes per second"
    )
    latency_s: float = Field(default=1e-6, ge=0, le=1e-2, description="Latency in seconds")
    host_capacity_bytes: int = Field(
        default=512 * 1024**3, ge=0, le=1 << 50, description="Host memory available for offload"
    )


class KernelLaunch(Spec):
    """What a kernel costs on the device beyond its work: the gap between back-to-back
    kernels (launch processing, grid ramp-up and tail), launched one by one on a stream or
    replayed from a CUDA graph (the ``cuda-graphs`` technique)."""

    stream_s: float = Field(
        ge=0, le=1e-2, description="Seconds per kernel launched on a stream, beyond its work"
    )
    graph_s: float = Field(
        ge=0, le=1e-2, description="Seconds per kernel replayed from a CUDA graph, beyond its work"
    )
    graphs: bool = Field(
        default=False, description="Kernels replay from a CUDA graph (the cuda-graphs technique)"
    )

    @property
    def overhead_s(self) -> float:
        """Seconds each kernel adds in the current launch mode."""
        return self.graph_s if self.graphs else self.stream_s


class ChipLink(Spec):
    """The chip-to-chip interconnect (NVLink, ICI): what tensor/pipeline parallelism uses.

    A collective over it costs, for the best of its algorithms, steps x ``latency_s`` plus the
    bytes on the busiest link over the achievable bus bandwidth, ``bandwidth_bytes_per_s x
    bus_bandwidth_efficiency`` (see :func:`infersim.simulator.engines.roofline.collective_s`).
    """

    bandwidth_bytes_per_s: float = Field(
        ge=1e6, le=1e14, description="Peak bandwidth per direction per chip in bytes per second"
    )
    latency_s: float = Field(
        default=1e-6, ge=0, le=1e-2,
        description="Latency of one step of a collective algorithm (a hop: send, synchronize, "
        "receive) in seconds",
    )
    bus_bandwidth_efficiency: float = Field(
        default=1.0, ge=MIN_EFFICIENCY, le=1,
        description="Achievable fraction of bandwidth_bytes_per_s that a collective library "
        "sustains on large messages (nccl-tests busbw / peak)",
    )
    topology: Literal["switch", "ring", "torus-2d", "torus-3d"] = Field(
        default="switch", description="How chips are connected"
    )
    max_chips: int = Field(default=8, ge=1, le=1 << 20, description="Chips one domain holds")


def _default_mac_pj() -> dict[MacClass, float]:
    return dict(MAC_ENERGY_PJ)  # type: ignore[return-value]


class Energy(Spec):
    """Dynamic energy per operation and per byte moved at each level (defaults: see constants)."""

    mac_pj: dict[MacClass, float] = Field(
        default_factory=_default_mac_pj, description="pJ per multiply-accumulate per class"
    )
    register_file_pj_per_byte: float = Field(
        default=eyeriss_pj_per_byte("register_file"), ge=0, le=1e6, description="pJ per RF byte"
    )
    array_pj_per_byte: float = Field(
        default=eyeriss_pj_per_byte("array"), ge=0, le=1e6, description="pJ per byte PE-to-PE"
    )
    sram_pj_per_byte: float = Field(
        default=eyeriss_pj_per_byte("sram"), ge=0, le=1e6, description="pJ per per-core SRAM byte"
    )
    shared_sram_pj_per_byte: float = Field(
        default=eyeriss_pj_per_byte("shared_sram"), ge=0, le=1e6, description="pJ per L2 byte"
    )
    dram_pj_per_byte: float = Field(
        default=eyeriss_pj_per_byte("dram"), ge=0, le=1e6, description="pJ per DRAM byte"
    )
    vector_pj_per_flop: float = Field(
        default=MAC_ENERGY_PJ["fp32"] / 2, ge=0, le=1e6, description="pJ per vector-unit FLOP"
    )
    static_power_w: float = Field(default=0.0, ge=0, le=1e5, description="Leakage and idle W")
    idle_pe_share: float = Field(
        default=0.0, ge=0, le=1,
        description="Energy a PE a fold leaves idle (a padded partial tile) still spends per "
        "MAC slot, as a share of a MAC's (its clock and pipeline registers; 0: clock-gated)",
    )

    @field_validator("mac_pj")
    @classmethod
    def _non_negative(cls, value: dict[str, float]) -> dict[str, float]:
        for dtype, pj in value.items():
            if not 0 <= pj <= 1e6:
                raise ValueError(f"energy for {dtype} = {pj}: must be >= 0 and <= 1e6")
        return value

    def mac(self, mac_class: str) -> float:
        """pJ per MAC for ``mac_class``; the default table fills classes a preset leaves out."""
        return self.mac_pj.get(mac_class, MAC_ENERGY_PJ[mac_class])  # type: ignore[call-overload]


class Calibration(Spec):
    """Efficiency knobs fitted to measurements; the defaults describe the ideal machine."""

    dram_bandwidth_efficiency: float = Field(
        default=1.0, ge=MIN_EFFICIENCY, le=1,
        description="Achievable fraction of peak DRAM bandwidth",
    )
    compute_efficiency: float = Field(
        default=1.0, ge=MIN_EFFICIENCY, le=1,
        description="Achievable fraction of peak array MAC rate",
    )
    compute_efficiency_by_dtype: dict[MacClass, float] = Field(
        default_factory=dict, description="Per-class override of compute_efficiency"
    )
    shared_sram_bandwidth_efficiency: float = Field(
        default=1.0, ge=MIN_EFFICIENCY, le=1,
        description="Achievable fraction of the shared SRAM's (L2's) bandwidth",
    )
    vector_efficiency: float = Field(
        default=1.0, ge=MIN_EFFICIENCY, le=1,
        description="Achievable fraction of peak vector FLOP/s",
    )
    attention_efficiency: float = Field(
        default=1.0, ge=MIN_EFFICIENCY, le=1,
        description="Achievable fraction of a fused attention kernel's modeled compute rate "
        "(its MMAs and softmax per CTA) on a GPU's tensor cores",
    )
    link_efficiency: float = Field(
        default=1.0, ge=MIN_EFFICIENCY, le=1,
        description="Achievable fraction of chip-link bandwidth",
    )
    link_latency_factor: float = Field(
        default=1.0, ge=0.01, le=100,
        description="Multiplies the chip link's per-step latency of every collective",
    )
    kernel_overhead_s: float = Field(
        default=0.0, ge=0, le=1, description="Fixed time added to every kernel launch in seconds"
    )

    @field_validator("compute_efficiency_by_dtype")
    @classmethod
    def _fractions(cls, value: dict[str, float]) -> dict[str, float]:
        for dtype, eff in value.items():
            if not MIN_EFFICIENCY <= eff <= 1:
                raise ValueError(
                    f"efficiency for {dtype} = {eff}: must be >= {MIN_EFFICIENCY:g} and <= 1"
                )
        return value

    def compute(self, mac_class: str) -> float:
        """Achievable fraction of peak for ``mac_class``."""
        return self.compute_efficiency_by_dtype.get(mac_class, self.compute_efficiency)  # type: ignore[call-overload]


class PublishedSpec(Spec):
    """The vendor's published figures, kept beside the model so tests can check the model."""

    dense_flops: dict[MacClass, float] = Field(
        default_factory=dict, description="Published dense peak FLOP/s (or OP/s) per class"
    )
    dram_bandwidth_bytes_per_s: float | None = Field(
        default=None, gt=0, description="Published DRAM bandwidth in bytes per second"
    )
    die_area_mm2: float | None = Field(
        default=None, gt=0, le=1e5, description="Published die area in mm² (all dies)"
    )
    tdp_w: float | None = Field(
        default=None, gt=0, le=1e5, description="Published thermal design power in watts"
    )
    price_usd: float | None = Field(
        default=None, gt=0, le=1e9, description="Price in US dollars, where one is known"
    )
    estimated: tuple[str, ...] = Field(
        default=(), description="Which of these figures are estimates, not published"
    )
    sources: dict[str, str] = Field(
        default_factory=dict, description="Where each figure comes from, by field name"
    )


class Schedule(Spec):
    """How the chip runs a network operator after operator (an accelerator's execution model;
    a chip without one runs each operator standalone, from DRAM to DRAM, as a GPU runs kernels).
    """

    activation_share: float = Field(
        ge=0, le=1,
        description="Share of the on-chip SRAM (every core's and the shared SRAM) that holds "
        "activations between operators: an operator's output stays there for the next one "
        "when it fits beside the operator's own resident input (TPU v1: 1, its unified buffer; "
        "0: every activation round-trips DRAM)",
    )
    prefetch_weights: bool = Field(
        default=False,
        description="The next operator's first weight tile loads from DRAM while the current "
        "one computes, in the DRAM's idle time (TPU v1: the weight FIFO)",
    )
    fuse_vector: bool = Field(
        default=False,
        description="Vector work (activations, norms, pooling, elementwise) runs in a pipeline "
        "behind the array on its outputs: no kernel of its own, overlapped with the array",
    )


_MAPPING_FIELDS = {"macs_per_pe_per_cycle", "mac_pj", "compute_efficiency_by_dtype", "dense_flops"}
"""Dict-valued fields, whose keys (dtypes) ``Chip.with_`` may add."""


class Chip(Spec):
    """An inference accelerator: ``cores`` identical cores sharing DRAM and an optional L2."""

    name: str = Field(min_length=1, max_length=64, description="Short identifier")
    description: str = Field(default="", description="One line for listings")
    source: str = Field(default="", description="Public spec the figures come from")
    cores: int = Field(ge=1, le=1_000_000, description="Identical compute cores (SMs, TensorCores)")
    freq_hz: float = Field(ge=1e6, le=1e11, description="Core clock in hertz")
    array: SystolicArray = Field(description="Each core's systolic array")
    vector: VectorUnit = Field(description="Each core's vector unit")
    register_file: RegisterFile = Field(
        default_factory=lambda: RegisterFile(bytes_per_pe=0), description="Each PE's storage"
    )
    sram: SRAM = Field(description="Each core's SRAM (scratchpad / shared memory)")
    shared_sram: SRAM | None = Field(default=None, description="SRAM shared by all cores (L2)")
    dram: DRAM = Field(description="Off-chip memory")
    host_link: HostLink | None = Field(default=None, description="Link to host memory")
    chip_link: ChipLink | None = Field(default=None, description="Chip-to-chip interconnect")
    energy: Energy = Field(default_factory=Energy, description="Energy per op and per byte")
    calibration: Calibration = Field(
        default_factory=Calibration, description="Fitted efficiency knobs (ideal by default)"
    )
    spec: PublishedSpec | None = Field(default=None, description="Vendor's published figures")
    schedule: Schedule | None = Field(
        default=None,
        description="How operators follow one another on chip (none: each runs standalone)",
    )
    launch: KernelLaunch | None = Field(
        default=None,
        description="Per-kernel launch overhead of a chip that runs operators as kernels "
        "(a GPU; none: no fixed cost beyond calibration.kernel_overhead_s)",
    )

    # --- derived figures -------------------------------------------------------------------

    @property
    def activation_buffer_bytes(self) -> float:
        """On-chip bytes the schedule keeps activations in (0 without a schedule)."""
        if self.schedule is None:
            return 0.0
        shared = self.shared_sram.capacity_bytes if self.shared_sram is not None else 0
        return self.schedule.activation_share * (self.cores * self.sram.capacity_bytes + shared)

    @property
    def kernel_overhead_s(self) -> float:
        """Fixed seconds every kernel adds: the launch overhead of the chip's launch mode plus
        the calibrated ``calibration.kernel_overhead_s``."""
        launch = self.launch.overhead_s if self.launch is not None else 0.0
        return launch + self.calibration.kernel_overhead_s

    def macs_per_cycle(self, dtype: str) -> float:
        """Array MACs per cycle over all cores for ``dtype`` (storage name or compute class).

        Raises:
            UnsupportedDtypeError: the array has no rate for the dtype's compute class.
        """
        mac_class = dtypes.mac_class(dtype)
        rate = self.array.macs_per_pe_per_cycle.get(mac_class)  # type: ignore[call-overload]
        if rate is None:
            supported = ", ".join(self.array.macs_per_pe_per_cycle)
            raise UnsupportedDtypeError(
                f"chip {self.name!r} cannot compute {dtype} on its systolic array; "
                f"supported: {supported}"
            )
        return float(rate) * self.array.pes * self.cores

    def supports(self, dtype: str) -> bool:
        """Whether the array computes ``dtype`` natively."""
        cls = dtype if dtype in dtypes.MAC_CLASSES else dtypes.info(dtype).mac_class
        return cls in self.array.macs_per_pe_per_cycle

    def peak_flops(self, dtype: str) -> float:
        """Dense peak FLOP/s of the arrays for ``dtype`` (2 FLOPs per MAC)."""
        return 2.0 * self.macs_per_cycle(dtype) * self.freq_hz

    @property
    def peak_bandwidth_bytes_per_s(self) -> float:
        """Peak DRAM bandwidth in bytes per second."""
        return self.dram.bandwidth_bytes_per_s

    def ridge_point(self, dtype: str) -> float:
        """Operational intensity (FLOP/byte) where the roofline turns from memory to compute."""
        return self.peak_flops(dtype) / self.peak_bandwidth_bytes_per_s

    @property
    def vector_flops(self) -> float:
        """Peak vector-unit FLOP/s over all cores."""
        return self.vector.lanes * self.vector.flops_per_lane_per_cycle * self.cores * self.freq_hz

    @cached_property
    def key(self) -> str:
        """A stable hash of every field: the memoization key for anything costed on this chip
        (a :meth:`view`'s: its chip's key and its role, joined by a slash)."""
        return hashlib.sha256(self.model_dump_json().encode()).hexdigest()[:16]

    def with_(self, **changes: Any) -> Chip:
        """A validated copy with dotted-path changes: ``chip.with_(**{"array.rows": 64})``.

        Only the parts a change reaches are validated again (:func:`_changed`); the others are
        this chip's, already valid and frozen, and no validator of a part reads another. Where
        that fails, the whole description is validated, for the error that names every field.

        Raises:
            ConfigError: a path that names no field, or a value outside the field's range.
        """
        try:
            return _changed(self, _change_tree(changes))
        except (ValidationError, _UnchangedError):
            return self._with_validated(changes)

    def view(self, role: str, **changes: Any) -> Chip:
        """:meth:`with_` for a chip the engines derive from this one (the levels of a
        two-level chip): keyed by this chip's key and ``role``, not by a hash of every field.
        The changes must be a function of this chip and ``role`` alone, so that equal keys
        still mean equal chips (two chips' views of equal fields get different keys: what is
        memoized on them is made once per chip). They are the engines' own, derived from this
        chip's valid fields: the changed parts are copied with them, not validated again (a
        view is made on every cold point of a two-level chip; a test holds the views of every
        preset to :meth:`with_`'s).

        Raises:
            ConfigError: as :meth:`with_`.
        """
        try:
            made = _changed(self, _change_tree(changes), validate=False)
        except _UnchangedError:
            made = self.with_(**changes)  # the error that names the path
        # the two names themselves, not their hash: a view is made on every cold point of a
        # two-level chip, and a hash there loads the digest's code for this alone
        made.__dict__["key"] = f"{self.key}/{role}"
        return made

    def _with_validated(self, changes: dict[str, Any]) -> Chip:
        """:meth:`with_` by validating the whole changed description."""
        from infersim.io import validate

        data = self.model_dump()
        for path, value in changes.items():
            node = data
            *parents, leaf = path.split(".")
            for part in parents:
                if not isinstance(node.get(part), dict):
                    raise ConfigError(f"chip has no field {path!r}")
                node = node[part]
            if leaf not in node and not set(parents[-1:]) & _MAPPING_FIELDS:
                raise ConfigError(f"chip has no field {path!r}")
            node[leaf] = value
        return validate(Chip, data, f"{self.name} with {changes}")


class _UnchangedError(Exception):
    """A change :func:`_changed` leaves to :meth:`Chip._with_validated` (which then raises
    the error that names it, or makes the change)."""


_LEAF = object()
"""Where :func:`_change_tree` keeps the new value of a path that ends at a node."""


def _change_tree(changes: dict[str, Any]) -> dict[Any, Any]:
    """The dotted-path ``changes`` as a tree of their parts (a path's value under
    :data:`_LEAF`)."""
    tree: dict[Any, Any] = {}
    for path, value in changes.items():
        node = tree
        for part in path.split("."):
            node = node.setdefault(part, {})
        node[_LEAF] = value
    return tree


def _changed(model: BaseModel, tree: dict[Any, Any], validate: bool = True) -> Any:
    """A copy of ``model`` with the changes ``tree`` (:func:`_change_tree`): a changed part
    validated again from its fields (without ``validate``: copied with its new values, less
    the original's cached properties, for :meth:`Chip.view`), an unchanged one kept as it is
    (pydantic takes an instance of the field's model without validating it again).

    Raises:
        ValidationError: a new value outside its field's range.
        _UnchangedError: a path through no part, or a part replaced and changed at once.
    """
    values = model.__dict__  # a model's field values (and its cached properties)
    fields = type(model).__pydantic_fields__
    changed: dict[str, Any] = {}
    for name, sub in tree.items():
        if name not in fields:
            raise _UnchangedError(name)
        if _LEAF in sub:
            if len(sub) > 1:
                raise _UnchangedError(name)
            changed[name] = sub[_LEAF]
        elif isinstance(values[name], BaseModel):
            changed[name] = _changed(values[name], sub, validate)
        elif name in _MAPPING_FIELDS and isinstance(values[name], dict):
            entries = dict(values[name])
            for key, leaf in sub.items():
                if len(leaf) != 1 or _LEAF not in leaf:
                    raise _UnchangedError(name)
                entries[key] = leaf[_LEAF]
            changed[name] = entries
        else:
            raise _UnchangedError(name)
    if validate:
        return type(model).model_validate({**{name: values[name] for name in fields}, **changed})
    made = model.model_copy(update=changed)
    for name in values.keys() - fields.keys():  # cached on the original, of its own fields
        del made.__dict__[name]
    return made
