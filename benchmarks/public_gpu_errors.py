"""infersim against public GPU measurements: the error table and its per-kind MAPE.

Every row of ``infersim/validation/data/public_gpu/*.csv`` (cuBLAS/cuBLASLt GEMMs, HBM and L2
streams, latencies, NCCL all-reduce, whole models), predicted on the named chip preset. Rows
infersim cannot express are listed with the reason they were skipped.

    python benchmarks/public_gpu_errors.py                     # analytic engine, every kind
    python benchmarks/public_gpu_errors.py --engine roofline --kind gemm --kind memory
"""

from __future__ import annotations

import argparse

from infersim.validation.public import KINDS, error_table, format_table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engine", default="analytic", help="roofline, analytic or events")
    parser.add_argument("--kind", action="append", choices=KINDS,
                        help="only these kinds (repeatable; default: all)")
    args = parser.parse_args()
    print(format_table(error_table(args.engine, args.kind or KINDS)))


if __name__ == "__main__":
    main()
