"""SCALE-Sim inputs and outputs: its config INI, its topology CSVs, and its report files.

A :class:`ScaleSimConfig` holds a SCALE-Sim v2 or v3 config (``[general]``,
``[architecture_presets]``, ``[run_presets]``; v3's ``[layout]`` and ``[sparsity]`` optional) and
turns into a one-core :class:`Chip` that counts what SCALE-Sim counts: one word per MAC operand,
one MAC per PE per cycle. :func:`read_topology` turns a topology CSV into operators, with
SCALE-Sim's output size for convolutions (ceil((H − R + stride) / stride): a stride that does not
divide H − R reads a last, partial window past the edge; the op is given that extent, and
:func:`read_layers` keeps the stated one). :func:`scalesim_report` gives the analytic figures
per layer under SCALE-Sim's COMPUTE_REPORT names; :func:`write_reports` writes SCALE-Sim's three
report files in its exact format from figures computed elsewhere (the simulator's replay).

Stall cycles: SCALE-Sim's USER-bandwidth stalls come from replaying every demand row against
set-based double-buffered SRAMs (with its own counting quirks, e.g. a window that only slides
forward and wraps around); no closed form reproduces them (the event engine's SCALE-Sim replay
does, exactly). :func:`scalesim_report`'s ``Stall Cycles`` is the analytic DRAM model: the best
latency tiling that fits the config's SRAM (double-buffered), its steady-state DRAM cycles
beyond its compute cycles; like SCALE-Sim, the first fill (placed before cycle 0) and the final
drain are left out.

SCALE-Sim's USER mode has three DRAM interfaces: ifmap reads at ``[layout]
IfmapSRAMBankBandwidth``, filter reads at ``FilterSRAMBankBandwidth`` (both default to
``Bandwidth`` when absent, as in v2 configs) and ofmap writes at ``Bandwidth``; the chip's single
DRAM gets their sum.
"""

from __future__ import annotations

import configparser
import csv
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from infersim.arch_models.chip import Chip
from infersim.dataflow.loopnest import analyze, problem_of
from infersim.dataflow.mapper import map_op
from infersim.dataflow.templates import TEMPLATES
from infersim.errors import ConfigError, InfersimError
from infersim.io import read_text
from infersim.workloads.ops import Conv2d, Gemm

ScaleSimDtype = Literal["int8", "int16"]

CALC_BANDWIDTH_BYTES_PER_S = 1e15
"""DRAM bandwidth standing for SCALE-Sim's CALC mode (an interface sized never to stall)."""

DEFAULT_FREQ_HZ = 1e9
"""Clock of a chip made from a SCALE-Sim config (SCALE-Sim counts cycles, not seconds)."""


class ScaleSimConfig(BaseModel):
    """A SCALE-Sim architecture config (sizes in SCALE-Sim's kB of one-byte words)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    run_name: str = Field(min_length=1, description="[general] run_name")
    array_rows: int = Field(ge=1, le=65536, description="ArrayHeight: PE rows")
    array_cols: int = Field(ge=1, le=65536, description="ArrayWidth: PE columns")
    ifmap_sram_kb: float = Field(gt=0, le=1 << 30, description="IfmapSramSzkB")
    filter_sram_kb: float = Field(gt=0, le=1 << 30, description="FilterSramSzkB")
    ofmap_sram_kb: float = Field(gt=0, le=1 << 30, description="OfmapSramSzkB")
    ifmap_offset: int = Field(default=0, ge=0, description="IfmapOffset (trace addresses)")
    filter_offset: int = Field(default=10_000_000, ge=0, description="FilterOffset")
    ofmap_offset: int = Field(default=20_000_000, ge=0, description="OfmapOffset")
    dataflow: Literal["ws", "os", "is"] = Field(description="Dataflow")
    interface_bandwidth: Literal["CALC", "USER"] = Field(
        description="[run_presets] InterfaceBandwidth: CALC sizes DRAM never to stall"
    )
    bandwidth_words_per_cycle: float | None = Field(
        default=None, gt=0, le=1 << 20, description="Bandwidth: DRAM words per cycle (USER)"
    )
    memory_banks: int = Field(default=1, ge=1, le=1 << 16, description="MemoryBanks")
    read_request_buffer: int | None = Field(default=None, ge=1, description="ReadRequestBuffer")
    write_request_buffer: int | None = Field(default=None, ge=1, description="WriteRequestBuffer")
    ifmap_bank_bandwidth_words: float | None = Field(
        default=None, gt=0, description="[layout] IfmapSRAMBankBandwidth"
    )
    filter_bank_bandwidth_words: float | None = Field(
        default=None, gt=0, description="[layout] FilterSRAMBankBandwidth"
    )
    ifmap_bank_num: int = Field(default=1, ge=1, description="[layout] IfmapSRAMBankNum")
    filter_bank_num: int = Field(default=1, ge=1, description="[layout] FilterSRAMBankNum")
    ifmap_custom_layout: bool = Field(default=False, description="[layout] IfmapCustomLayout")
    filter_custom_layout: bool = Field(default=False, description="[layout] FilterCustomLayout")
    sparsity_support: bool = Field(default=False, description="[sparsity] SparsitySupport")
    use_ramulator_trace: bool = Field(
        default=False, description="[run_presets] UseRamulatorTrace"
    )

    @property
    def sram_words(self) -> int:
        """Words in the three SRAMs together."""
        return round((self.ifmap_sram_kb + self.filter_sram_kb + self.ofmap_sram_kb) * 1024)

    @property
    def dram_words_per_cycle(self) -> float | None:
        """USER mode: the three interfaces together (ifmap + filter reads, ofmap writes) in
        words per cycle; None in CALC."""
        if self.interface_bandwidth != "USER" or self.bandwidth_words_per_cycle is None:
            return None
        ofmap = self.bandwidth_words_per_cycle
        return (
            (self.ifmap_bank_bandwidth_words or ofmap)
            + (self.filter_bank_bandwidth_words or ofmap)
            + ofmap
        )

    def to_chip(self, dtype: ScaleSimDtype = "int8", freq_hz: float = DEFAULT_FREQ_HZ) -> Chip:
        """A one-core chip: ``rows × cols`` PEs doing one ``dtype`` MAC per cycle, one SRAM as
        large as the three (in words of ``dtype``), DRAM at :attr:`dram_words_per_cycle` words
        per cycle (USER) or never stalling (CALC); energies are the defaults."""
        word = 1 if dtype == "int8" else 2
        words = self.dram_words_per_cycle
        bandwidth = CALC_BANDWIDTH_BYTES_PER_S if words is None else words * word * freq_hz
        return Chip.model_validate(
            {
                "name": self.run_name[:64],
                "description": f"SCALE-Sim config {self.run_name}",
                "source": "SCALE-Sim config",
                "cores": 1,
                "freq_hz": freq_hz,
                "array": {
                    "rows": self.array_rows,
                    "cols": self.array_cols,
                    "macs_per_pe_per_cycle": {dtype: 1},
                },
                "vector": {"lanes": self.array_cols},
                "sram": {
                    "capacity_bytes": self.sram_words * word,
                    "bandwidth_bytes_per_cycle": float(2 * self.array_rows + self.array_cols)
                    * word,
                },
                "dram": {
                    "kind": "DRAM",
                    "capacity_bytes": 1 << 40,
                    "bandwidth_bytes_per_s": min(bandwidth, CALC_BANDWIDTH_BYTES_PER_S),
                    "latency_s": 0.0,
                },
            }
        )

    def to_ini(self) -> str:
        """This config as a SCALE-Sim v3 INI text (sparsity's own settings at their defaults)."""
        bandwidth = self.bandwidth_words_per_cycle
        ifmap_bank = self.ifmap_bank_bandwidth_words or bandwidth or 10
        filter_bank = self.filter_bank_bandwidth_words or bandwidth or 10
        lines = [
            "[general]",
            f"run_name = {self.run_name}",
            "",
            "[architecture_presets]",
            f"ArrayHeight = {self.array_rows}",
            f"ArrayWidth = {self.array_cols}",
            f"IfmapSramSzkB = {self.ifmap_sram_kb:g}",
            f"FilterSramSzkB = {self.filter_sram_kb:g}",
            f"OfmapSramSzkB = {self.ofmap_sram_kb:g}",
            f"IfmapOffset = {self.ifmap_offset}",
            f"FilterOffset = {self.filter_offset}",
            f"OfmapOffset = {self.ofmap_offset}",
            f"Dataflow = {self.dataflow}",
            *([f"Bandwidth = {bandwidth:g}"] if bandwidth is not None else []),
            f"ReadRequestBuffer = {self.read_request_buffer or 32}",
            f"WriteRequestBuffer = {self.write_request_buffer or 32}",
            "",
            "[layout]",
            f"IfmapCustomLayout = {self.ifmap_custom_layout}",
            f"IfmapSRAMBankBandwidth = {ifmap_bank:g}",
            f"IfmapSRAMBankNum = {self.ifmap_bank_num}",
            "IfmapSRAMBankPort = 2",
            f"FilterCustomLayout = {self.filter_custom_layout}",
            f"FilterSRAMBankBandwidth = {filter_bank:g}",
            f"FilterSRAMBankNum = {self.filter_bank_num}",
            "FilterSRAMBankPort = 2",
            "",
            "[sparsity]",
            f"SparsitySupport = {str(self.sparsity_support).lower()}",
            "SparseRep = ellpack_block",
            "OptimizedMapping = false",
            "BlockSize = 8",
            "RandomNumberGeneratorSeed = 40",
            "",
            "[run_presets]",
            f"InterfaceBandwidth = {self.interface_bandwidth}",
            f"UseRamulatorTrace = {self.use_ramulator_trace}",
        ]
        return "\n".join(lines) + "\n"


# --- config ---------------------------------------------------------------------------------

_FIELDS: tuple[tuple[str, str, str, bool], ...] = (
    # (section, key, field, required)
    ("general", "run_name", "run_name", True),
    ("architecture_presets", "ArrayHeight", "array_rows", True),
    ("architecture_presets", "ArrayWidth", "array_cols", True),
    ("architecture_presets", "IfmapSramSzkB", "ifmap_sram_kb", True),
    ("architecture_presets", "FilterSramSzkB", "filter_sram_kb", True),
    ("architecture_presets", "OfmapSramSzkB", "ofmap_sram_kb", True),
    ("architecture_presets", "IfmapOffset", "ifmap_offset", False),
    ("architecture_presets", "FilterOffset", "filter_offset", False),
    ("architecture_presets", "OfmapOffset", "ofmap_offset", False),
    ("architecture_presets", "Dataflow", "dataflow", True),
    ("architecture_presets", "Bandwidth", "bandwidth_words_per_cycle", False),
    ("architecture_presets", "MemoryBanks", "memory_banks", False),
    ("architecture_presets", "ReadRequestBuffer", "read_request_buffer", False),
    ("architecture_presets", "WriteRequestBuffer", "write_request_buffer", False),
    ("layout", "IfmapSRAMBankBandwidth", "ifmap_bank_bandwidth_words", False),
    ("layout", "FilterSRAMBankBandwidth", "filter_bank_bandwidth_words", False),
    ("layout", "IfmapSRAMBankNum", "ifmap_bank_num", False),
    ("layout", "FilterSRAMBankNum", "filter_bank_num", False),
    ("layout", "IfmapCustomLayout", "ifmap_custom_layout", False),
    ("layout", "FilterCustomLayout", "filter_custom_layout", False),
    ("sparsity", "SparsitySupport", "sparsity_support", False),
    ("run_presets", "UseRamulatorTrace", "use_ramulator_trace", False),
    ("run_presets", "InterfaceBandwidth", "interface_bandwidth", True),
)


def _line_of(text: str, section: str, key: str) -> int:
    """1-based line of ``key`` in ``[section]`` (of the section header if the key is absent)."""
    current, header = "", 0
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if line.startswith("[") and line.endswith("]"):
            current = line[1:-1].strip().lower()
            if current == section.lower():
                header = number
            continue
        name = line.split("=", 1)[0].split(":", 1)[0].strip().lower()
        if current == section.lower() and name == key.lower():
            return number
    return header


def read_config(path: str | Path) -> ScaleSimConfig:
    """A SCALE-Sim config INI (v2 or v3) as a :class:`ScaleSimConfig`.

    Raises:
        ConfigError: unreadable or malformed file, a missing or invalid field (the message names
            the file, the line and the field), or USER bandwidth without ``Bandwidth``.
    """
    path = Path(path)
    text = read_text(path, "SCALE-Sim config")
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read_string(text, source=str(path))
    except configparser.Error as exc:
        lineno = getattr(exc, "lineno", None)
        at = f":{lineno}" if lineno else ""
        raise ConfigError(f"{path}{at}: malformed INI: {exc.message}") from None
    data: dict[str, Any] = {}
    where: dict[str, tuple[str, str]] = {}
    for section, key, name, required in _FIELDS:
        where[name] = (section, key)
        if parser.has_option(section, key):
            value = parser.get(section, key).strip()
            if name == "bandwidth_words_per_cycle":
                value = value.split(",")[0].strip()
            elif name == "dataflow":
                value = value.lower()
            elif name == "interface_bandwidth":
                value = value.upper()
            data[name] = value
        elif required:
            line = _line_of(text, section, key)
            raise ConfigError(f"{path}:{line}: [{section}] {key}: required field is missing")
    try:
        config = ScaleSimConfig.model_validate(data)
    except ValidationError as exc:
        err = exc.errors(include_url=False)[0]
        name = str(err["loc"][0]) if err["loc"] else ""
        section, key = where.get(name, ("", name))
        line = _line_of(text, section, key)
        raise ConfigError(
            f"{path}:{line}: [{section}] {key} = {err.get('input')!r}: {err['msg']}"
        ) from None
    if config.interface_bandwidth == "USER" and config.bandwidth_words_per_cycle is None:
        line = _line_of(text, "run_presets", "InterfaceBandwidth")
        raise ConfigError(
            f"{path}:{line}: [architecture_presets] Bandwidth: required with USER bandwidth"
        )
    return config


# --- topology -------------------------------------------------------------------------------

_GEMM_COLUMNS = ("M", "N", "K")
_CONV_COLUMNS = (
    "IFMAP Height",
    "IFMAP Width",
    "Filter Height",
    "Filter Width",
    "Channels",
    "Num Filter",
    "Strides",
)


def scalesim_out_size(in_size: int, kernel: int, stride: int) -> int:
    """SCALE-Sim's convolution output size: ceil((in − kernel + stride) / stride)."""
    return math.ceil((in_size - kernel + stride) / stride)


def _cells(row: list[str]) -> list[str]:
    cells = [c.strip() for c in row]
    while cells and cells[-1] == "":
        cells.pop()
    return cells


@dataclass(frozen=True)
class ScaleSimLayer:
    """One topology layer: its operator, and for a convolution the ifmap (height, width) the
    topology states (the op reads ``kernel + (out − 1)·stride``, which is more when the stride
    does not divide H − R: SCALE-Sim's addresses keep the stated width)."""

    op: Gemm | Conv2d
    ifmap_extent: tuple[int, int] | None = None


def read_topology(
    path: str | Path, dtype: ScaleSimDtype = "int8", gemm: bool | None = None
) -> list[Gemm | Conv2d]:
    """The operators of :func:`read_layers` (see there)."""
    return [layer.op for layer in read_layers(path, dtype, gemm)]


def read_layers(
    path: str | Path, dtype: ScaleSimDtype = "int8", gemm: bool | None = None
) -> list[ScaleSimLayer]:
    """The layers of a SCALE-Sim topology CSV as named operators of ``dtype``.

    GEMM files have the columns ``Layer, M, N, K`` (C[M,N] = A[M,K]·B[K,N]); convolution files
    ``Layer name, IFMAP Height, IFMAP Width, Filter Height, Filter Width, Channels, Num Filter,
    Strides`` (a layer name containing ``DP`` is depth-wise: one layer per channel, as SCALE-Sim
    does). An optional last ``N:M`` sparsity column must be dense (``1:1``). ``gemm`` forces the
    kind; by default the header decides.

    Raises:
        ConfigError: unreadable file, unknown header, or a bad row (file, line and field named).
    """
    path = Path(path)
    lines = read_text(path, "SCALE-Sim topology").splitlines()
    try:
        rows = [(n, _cells(r)) for n, r in enumerate(csv.reader(lines), start=1)]
    except csv.Error as exc:
        raise ConfigError(f"{path}: malformed CSV ({exc})") from None
    rows = [(n, r) for n, r in rows if r]
    if not rows:
        raise ConfigError(f"{path}: empty topology file")
    header_line, header = rows[0]
    is_gemm = len(header) - 1 in (3, 4) if gemm is None else gemm
    columns = _GEMM_COLUMNS if is_gemm else _CONV_COLUMNS
    if len(header) - 1 not in (len(columns), len(columns) + 1):
        raise ConfigError(
            f"{path}:{header_line}: header has {len(header)} columns; expected "
            f"'Layer, {', '.join(columns)}' (and an optional sparsity ratio)"
        )
    ops: list[ScaleSimLayer] = []
    for number, cells in rows[1:]:
        name = cells[0]
        if len(cells) - 1 not in (len(columns), len(columns) + 1):
            raise ConfigError(
                f"{path}:{number}: layer {name!r}: {len(cells) - 1} values; expected "
                f"{len(columns)} ({', '.join(columns)})"
            )
        values: dict[str, int] = {}
        for column, cell in zip(columns, cells[1:], strict=False):
            try:
                values[column] = int(cell)
            except ValueError:
                raise ConfigError(
                    f"{path}:{number}: layer {name!r}: {column} = {cell!r}: not an integer"
                ) from None
            if values[column] < 1:
                raise ConfigError(
                    f"{path}:{number}: layer {name!r}: {column} = {cell}: must be >= 1"
                )
        if len(cells) - 1 == len(columns) + 1 and cells[-1].replace(" ", "") != "1:1":
            raise ConfigError(
                f"{path}:{number}: layer {name!r}: sparsity ratio {cells[-1]!r}: only dense "
                "(1:1) layers are modeled"
            )
        try:
            ops.extend(_layer_ops(name, values, is_gemm, dtype))
        except (InfersimError, ValueError) as exc:
            raise ConfigError(f"{path}:{number}: layer {name!r}: {exc}") from None
    return ops


def _layer_ops(
    name: str, v: dict[str, int], is_gemm: bool, dtype: ScaleSimDtype
) -> list[ScaleSimLayer]:
    if is_gemm:
        gemm = Gemm(
            name=name, m=v["M"], n=v["N"], k=v["K"], a_dtype=dtype, b_dtype=dtype, out_dtype=dtype
        )
        return [ScaleSimLayer(gemm)]
    h, w, r, s, stride = (
        v["IFMAP Height"],
        v["IFMAP Width"],
        v["Filter Height"],
        v["Filter Width"],
        v["Strides"],
    )
    out_h, out_w = scalesim_out_size(h, r, stride), scalesim_out_size(w, s, stride)
    if out_h < 1 or out_w < 1:
        raise InfersimError(f"filter {r}x{s} larger than the ifmap {h}x{w}")
    depthwise = "DP" in name
    channels = 1 if depthwise else v["Channels"]
    conv = {
        "in_h": r + (out_h - 1) * stride,
        "in_w": s + (out_w - 1) * stride,
        "kernel_h": r,
        "kernel_w": s,
        "in_channels": channels,
        "out_channels": v["Num Filter"],
        "stride": stride,
        "dtype": dtype,
        "weight_dtype": dtype,
        "out_dtype": dtype,
    }
    if not depthwise:
        return [ScaleSimLayer(Conv2d(name=name, **conv), (h, w))]
    return [
        ScaleSimLayer(Conv2d(name=f"{name}Channel_{i}", **conv), (h, w))
        for i in range(v["Channels"])
    ]


def topology_csv(layers: list[Gemm | Conv2d]) -> str:
    """SCALE-Sim topology CSV text for ``layers`` (all GEMMs or all unpadded convolutions)."""
    if all(isinstance(op, Gemm) for op in layers):
        rows = [
            f"{op.name or f'layer{i}'}, {op.m}, {op.n}, {op.k},"
            for i, op in enumerate(layers)
            if isinstance(op, Gemm)
        ]
        return "Layer, M, N, K,\n" + "\n".join(rows) + "\n"
    rows = []
    for i, op in enumerate(layers):
        if not isinstance(op, Conv2d) or op.padding or op.batch != 1:
            raise InfersimError(
                f"layer {i}: SCALE-Sim topologies hold GEMMs or unpadded batch-1 convolutions"
            )
        rows.append(
            f"{op.name or f'layer{i}'}, {op.in_h}, {op.in_w}, {op.kernel_h}, {op.kernel_w}, "
            f"{op.in_channels}, {op.out_channels}, {op.stride},"
        )
    header = "Layer name, " + ", ".join(_CONV_COLUMNS) + ","
    return header + "\n" + "\n".join(rows) + "\n"


_LAYOUT_HEADER = (
    "Layer name, IFMAP Height Intraline Factor, IFMAP Width Intraline Factor, Filter Height "
    "Intraline Factor, Filter Width Intraline Factor, Channel Intraline Factor, Num Filter "
    "Intraline Factor, IFMAP Height Intraline Order, IFMAP Width Intraline Order, Channel "
    "Intraline Order, IFMAP Height Interline Order, IFMAP Width Interline Order, Channel "
    "Interline Order, Num Filter Intraline Order, Channel Intraline Order, Filter Height "
    "Intraline Order, Filter Width Intraline Order, Num Filter Interline Order, Channel Interline "
    "Order, Filter Height Interline Order, Filter Width Interline Order,"
)


def layout_csv(layers: list[Gemm | Conv2d]) -> str:
    """SCALE-Sim v3 layout CSV text (identity layout; parsed by SCALE-Sim, used only when a
    custom layout is switched on)."""
    rows = [
        f"{op.name or f'layer{i}'},1,1,1,1,1,1,3,4,5,0,1,2,4,5,6,7,0,1,2,3,"
        for i, op in enumerate(layers)
    ]
    return _LAYOUT_HEADER + "\n" + "\n".join(rows) + "\n"


# --- report ---------------------------------------------------------------------------------

REPORT_COLUMNS: tuple[str, ...] = (
    "LayerID",
    "Total Cycles",
    "Stall Cycles",
    "Overall Util %",
    "Mapping Efficiency %",
    "Compute Util %",
)
"""SCALE-Sim COMPUTE_REPORT.csv columns that :func:`scalesim_report` fills."""


def scalesim_report(cfg: ScaleSimConfig, ops: list[Gemm | Conv2d]) -> list[dict[str, Any]]:
    """Per layer, our figures under SCALE-Sim COMPUTE_REPORT column names (:data:`REPORT_COLUMNS`).

    Compute cycles, mapping efficiency and compute utilization are SCALE-Sim's (the whole layer
    streamed through the array, its fold formulas); ``Stall Cycles`` is 0 for CALC and our
    analytic DRAM model for USER (see the module docstring). Percentages are 0..100.

    Raises:
        UnsupportedDtypeError: an op in a dtype other than int8/int16.
    """
    template = TEMPLATES[cfg.dataflow]
    chips: dict[str, Chip] = {}
    out = []
    for layer_id, op in enumerate(ops):
        mac_class = problem_of(op).mac_class
        if mac_class not in chips:
            chips[mac_class] = cfg.to_chip("int16" if mac_class == "int16" else "int8")
        chip = chips[mac_class]
        streamed = analyze(op, chip, template)
        stall = 0
        if cfg.interface_bandwidth == "USER":
            try:
                tiled = map_op(op, chip, cfg.dataflow, "latency")
            except InfersimError:
                tiled = streamed
            steady = (
                tiled.total_cycles
                - tiled.first_load_cycles
                - tiled.last_store_cycles
                - chip.dram.latency_s * chip.freq_hz
            )
            stall = max(0, math.ceil(steady - tiled.compute_cycles - 1e-9))
        total = streamed.compute_cycles + stall
        pes = chip.array.rows * chip.array.cols
        out.append(
            {
                "LayerID": layer_id,
                "Total Cycles": total,
                "Stall Cycles": stall,
                "Overall Util %": 100.0 * streamed.macs / (total * pes),
                "Mapping Efficiency %": 100.0 * streamed.mapping_efficiency,
                "Compute Util %": 100.0 * streamed.compute_utilization,
            }
        )
    return out


# --- SCALE-Sim's own report files -------------------------------------------------------------

COMPUTE_REPORT_COLUMNS: tuple[str, ...] = (
    "Total Cycles (incl. prefetch)",
    "Total Cycles",
    "Stall Cycles",
    "Overall Util %",
    "Mapping Efficiency %",
    "Compute Util %",
)
BANDWIDTH_REPORT_COLUMNS: tuple[str, ...] = tuple(
    f"Avg {operand} {level} BW" for level in ("SRAM", "DRAM") for operand in ("IFMAP", "FILTER",
                                                                               "OFMAP")
)
DETAILED_ACCESS_REPORT_COLUMNS: tuple[str, ...] = tuple(
    f"{level} {operand} {what}"
    for level in ("SRAM", "DRAM")
    for operand, count in (("IFMAP", "Reads"), ("Filter", "Reads"), ("OFMAP", "Writes"))
    for what in ("Start Cycle", "Stop Cycle", count)
)
REPORT_FILES: dict[str, tuple[str, ...]] = {
    "COMPUTE_REPORT.csv": COMPUTE_REPORT_COLUMNS,
    "BANDWIDTH_REPORT.csv": BANDWIDTH_REPORT_COLUMNS,
    "DETAILED_ACCESS_REPORT.csv": DETAILED_ACCESS_REPORT_COLUMNS,
}
"""SCALE-Sim 3.0.0's report files (dense layers) and their columns after ``LayerID``."""


def report_text(columns: tuple[str, ...], rows: list[dict[str, Any]]) -> str:
    """A report file's text exactly as SCALE-Sim writes it (``simulator.generate_reports``):
    ``, ``-separated cells, each line ending in ``,``; values printed with ``str`` (ints as
    ints, cycles SCALE-Sim keeps as floats given as floats)."""
    lines = [", ".join(("LayerID", *columns)) + ","]
    lines += [", ".join([str(i), *(str(row[c]) for c in columns)]) + "," for i, row in
              enumerate(rows)]
    return "\n".join(lines) + "\n"


def write_reports(folder: str | Path, rows: list[dict[str, Any]]) -> list[Path]:
    """Write COMPUTE_REPORT.csv, BANDWIDTH_REPORT.csv and DETAILED_ACCESS_REPORT.csv into
    ``folder`` (created), one line per layer from ``rows`` (dicts holding every column of
    :data:`REPORT_FILES`); the paths written."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, columns in REPORT_FILES.items():
        path = folder / name
        path.write_text(report_text(columns, rows))
        paths.append(path)
    return paths
