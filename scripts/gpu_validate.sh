#!/usr/bin/env bash
# One command on a machine with one NVIDIA GPU (< 5 minutes): install infersim with the validate
# extra (PyPI only), check and time the gpu suite's Triton kernels, predict them with the preset
# matching the device (h100-sxm / h200 / a100-sxm-80gb), calibrate that preset on 70% of the
# kernels and report the held-out error on the rest. Writes, under
# infersim/validation/data/<device>-<date>/: results.json, results.csv, calibration.json and
# calibrated.yaml (load it with --chip PATH).
#
# Without a GPU it proves the plumbing instead: the Triton kernels under the interpreter
# (correctness), then the cpu backend on the quick suite against the measured host-cpu chip.
#
# Environment: VENV (default .venv), PYTHON (default python3), SUITE, CHIP, ENGINE (default: the
# CLI's default engine, analytic; roofline for the baseline), SEED.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=${VENV:-.venv}
PYTHON=${PYTHON:-python3}
engine=()
[ -n "${ENGINE:-}" ] && engine=(--engine "$ENGINE")
SEED=${SEED:-0}
start=$(date +%s)

if [ ! -x "$VENV/bin/python" ]; then
  "$PYTHON" -m venv "$VENV"
fi
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -e '.[validate]'
PY="$VENV/bin/python"
run() { "$PY" -m infersim.validation "$@"; }

if "$PY" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)'; then
  device=$("$PY" -c 'import torch; print(torch.cuda.get_device_name(0))')
  backend=(--backend cuda --suite "${SUITE:-gpu}")
  [ -n "${CHIP:-}" ] && backend+=(--chip "$CHIP")
else
  device="cpu $("$PY" -c 'from infersim.validation.hostcpu import host_info; print(host_info().cpu_model)')"
  echo "no CUDA device: proving the plumbing on the CPU (interpreter, then the cpu backend)"
  backend=(--backend cpu --suite "${SUITE:-quick}" --threads 1 --timer cpu --rounds 9)
fi
slug=$(printf '%s' "$device" | tr '[:upper:]' '[:lower:]' | tr -cs 'a-z0-9' '-' | sed 's/^-//; s/-$//')
out="infersim/validation/data/${slug}-$(date +%Y-%m-%d)"
mkdir -p "$out"
echo "device: $device -> $out"

if [ "${backend[1]}" = cpu ]; then
  TRITON_INTERPRET=1 run validate --backend interpret --suite tiny --out "$out/interpret.json"
fi
run validate "${backend[@]}" "${engine[@]}" --out "$out/results.json"
"$PY" - "$out" <<'PY'
import json, sys
from pathlib import Path
from infersim.validation.records import write_results
out = Path(sys.argv[1])
write_results(json.loads((out / "results.json").read_text()), out / "results.csv")
PY
run calibrate "$out/results.json" --out "$out/calibrated.yaml" --holdout-frac 0.3 \
  --seed "$SEED" "${engine[@]}" --json > "$out/calibration.json"
run calibrate "$out/results.json" --holdout-frac 0.3 --seed "$SEED" "${engine[@]}"
echo "wrote $out/{results.json,results.csv,calibration.json,calibrated.yaml} in $(( $(date +%s) - start )) s"
