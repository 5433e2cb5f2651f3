"""SCALE-Sim golden rows as replay inputs, and live SCALE-Sim runs, for the replay's tests
(imported by name: pytest puts this folder on sys.path)."""

from __future__ import annotations

import contextlib
import csv
import io
from pathlib import Path

from infersim.dataflow.scalesim_io import (
    REPORT_FILES,
    ScaleSimConfig,
    ScaleSimLayer,
    layout_csv,
    read_layers,
)

GOLDEN = Path(__file__).parents[1] / "dataflow" / "golden"


def golden_rows(name: str) -> list[dict[str, str]]:
    """The rows of ``tests/dataflow/golden/<name>`` (comment lines skipped)."""
    with (GOLDEN / name).open(newline="") as f:
        return list(csv.DictReader(line for line in f if not line.startswith("#")))


def row_config(row: dict[str, str]) -> ScaleSimConfig:
    """The SCALE-Sim config of a golden row."""

    def words(key: str) -> float | None:
        return float(row[key]) if row.get(key) else None

    return ScaleSimConfig.model_validate({
        "run_name": "golden",
        "array_rows": int(row["array_rows"]),
        "array_cols": int(row["array_cols"]),
        "ifmap_sram_kb": float(row["ifmap_sram_kb"]),
        "filter_sram_kb": float(row["filter_sram_kb"]),
        "ofmap_sram_kb": float(row["ofmap_sram_kb"]),
        "dataflow": row["dataflow"],
        "interface_bandwidth": row["bandwidth_mode"],
        "bandwidth_words_per_cycle": words("bandwidth_words_per_cycle"),
        "ifmap_bank_bandwidth_words": words("ifmap_dram_bw_words"),
        "filter_bank_bandwidth_words": words("filter_dram_bw_words"),
        "ifmap_bank_num": int(row.get("bank_num") or 1),
        "filter_bank_num": int(row.get("bank_num") or 1),
    })


def row_topology(row: dict[str, str]) -> str:
    """The topology CSV text of a golden row (a convolution's ifmap as stated)."""
    if row["kind"] == "gemm":
        return f"Layer, M, N, K,\nl0, {row['M']}, {row['N']}, {row['K']},\n"
    cells = [row[k] for k in ("ifmap_h", "ifmap_w", "filter_h", "filter_w", "channels",
                              "num_filter", "stride")]
    return ("Layer name, IFMAP Height, IFMAP Width, Filter Height, Filter Width, Channels, "
            f"Num Filter, Strides,\n{row['layer_name'] or 'c0'}, {', '.join(cells)},\n")


def row_layer(row: dict[str, str], folder: Path) -> ScaleSimLayer:
    """The layer of a golden row, read back through ``read_layers``."""
    path = folder / "topo.csv"
    path.write_text(row_topology(row))
    [layer] = read_layers(path)
    return layer


def run_scalesim(cfg: ScaleSimConfig, topology: str, folder: Path) -> dict[str, str]:
    """Run the installed SCALE-Sim on ``cfg`` and a topology text in ``folder``; the text of
    its report files by name. Raises ImportError without the ``scalesim`` package."""
    from scalesim.scale_sim import scalesim  # type: ignore[import-not-found]

    (folder / "scale.cfg").write_text(cfg.to_ini())
    (folder / "topo.csv").write_text(topology)
    layers = read_layers(folder / "topo.csv")
    (folder / "layout.csv").write_text(layout_csv([layer.op for layer in layers]))
    sim = scalesim(save_disk_space=True, verbose=False, config=str(folder / "scale.cfg"),
                   topology=str(folder / "topo.csv"), layout=str(folder / "layout.csv"),
                   input_type_gemm=topology.startswith("Layer, M"))
    with contextlib.redirect_stdout(io.StringIO()):
        sim.run_scale(top_path=str(folder / "out"))
    return {name: (folder / "out" / cfg.run_name / name).read_text() for name in REPORT_FILES}
