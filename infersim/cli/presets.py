"""The commands that list what ships with infersim: ``chips`` and ``models``.
:func:`register` adds them to the app."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import typer
from rich.table import Table

from infersim.cli.common import JsonOpt, console, print_json
from infersim.units import fmt_area, fmt_bytes, fmt_power, fmt_usd, si

if TYPE_CHECKING:  # imported by the commands that use them (a fast start)
    from infersim.arch_models import Chip


def _chip_summary(chip: Chip) -> dict[str, Any]:
    classes = list(chip.array.macs_per_pe_per_cycle)
    spec = chip.spec
    return {
        "name": chip.name,
        "description": chip.description,
        "cores": chip.cores,
        "freq_hz": chip.freq_hz,
        "array": f"{chip.array.rows}x{chip.array.cols}",
        "peak_flops": {c: chip.peak_flops(c) for c in classes},
        "dram_capacity_bytes": chip.dram.capacity_bytes,
        "dram_bandwidth_bytes_per_s": chip.peak_bandwidth_bytes_per_s,
        "ridge_point_flops_per_byte": {c: chip.ridge_point(c) for c in classes},
        "published": {
            "die_area_mm2": spec.die_area_mm2 if spec else None,
            "tdp_w": spec.tdp_w if spec else None,
            "price_usd": spec.price_usd if spec else None,
            "estimated": list(spec.estimated) if spec else [],
            "sources": dict(spec.sources) if spec else {},
        },
        "source": chip.source,
    }


def _published(value: float | None, field: str, estimated: list[str], write: Any) -> str:
    """A published figure, ``≈`` before it when its source estimates it, ``-`` when none."""
    if value is None:
        return "-"
    return ("≈" if field in estimated else "") + write(value)


def chips(as_json: JsonOpt = False) -> None:
    """List the chip presets with their peak figures and published die area, TDP and price
    (≈: an estimate of the source; -: not published)."""
    from infersim.arch_models import list_chips, load_chip

    rows = [_chip_summary(load_chip(name)) for name in list_chips()]
    if as_json:
        print_json(rows)
        return
    table = Table(title="chip presets", caption="≈: an estimate of the source; -: not "
                  "published (sources: infersim chips --json)")
    for col in ("name", "cores", "array", "clock", "dense peak FLOP/s", "DRAM", "bandwidth",
                "die area", "TDP", "price"):
        table.add_column(col, justify="right" if col in ("cores", "clock", "DRAM", "bandwidth",
                                                          "die area", "TDP", "price")
                         else "left")
    for r in rows:
        peaks = " ".join(f"{c}:{si(f, '').replace(' ', '')}" for c, f in r["peak_flops"].items())
        pub = r["published"]
        est = pub["estimated"]
        table.add_row(
            r["name"],
            str(r["cores"]),
            r["array"],
            si(r["freq_hz"], "Hz"),
            peaks,
            fmt_bytes(r["dram_capacity_bytes"]),
            si(r["dram_bandwidth_bytes_per_s"], "B/s"),
            _published(pub["die_area_mm2"], "die_area_mm2", est, fmt_area),
            _published(pub["tdp_w"], "tdp_w", est, fmt_power),
            _published(pub["price_usd"], "price_usd", est, fmt_usd),
        )
    console.print(table)


def models(as_json: JsonOpt = False) -> None:
    """List the model presets with their parameter counts."""
    from infersim.workloads import list_models, load_model

    rows: list[dict[str, Any]] = []
    for name in list_models():
        m = load_model(name)
        rows.append(
            {
                "name": name,
                "params": m.params(),
                "active_params": m.params(active=True),
                "layers": m.num_hidden_layers,
                "hidden_size": m.hidden_size,
                "heads": m.num_attention_heads,
                "kv_heads": m.kv_heads,
                "attention": "mla"
                if m.is_mla
                else (
                    "mha"
                    if m.kv_heads == m.num_attention_heads
                    else ("mqa" if m.kv_heads == 1 else "gqa")
                ),
                "experts": m.num_experts,
                "vocab_size": m.vocab_size,
                "source": m.source,
            }
        )
    if as_json:
        print_json(rows)
        return
    table = Table(title="model presets")
    for col in ("name", "params", "active", "layers", "hidden", "heads/kv", "attention", "experts"):
        table.add_column(col)
    for r in rows:
        table.add_row(
            r["name"],
            si(r["params"], ""),
            si(r["active_params"], ""),
            str(r["layers"]),
            str(r["hidden_size"]),
            f"{r['heads']}/{r['kv_heads']}",
            r["attention"],
            str(r["experts"] or "-"),
        )
    console.print(table)


def register(app: typer.Typer) -> None:
    """Add ``chips`` and ``models`` to ``app``."""
    app.command(name="chips")(chips)
    app.command(name="models")(models)
