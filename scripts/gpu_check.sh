#!/usr/bin/env bash
# GPU check for a machine with an NVIDIA GPU and torch preinstalled -- no DGL, no network
# needed (the model runs on torch alone).  Builds the extension, runs the CUDA tests and the
# GPU model benchmark, and ends with ONE JSON line summarising everything.  Budget: ~8 min.
#
#   bash scripts/gpu_check.sh                  # logs and JSON files under $OUT (or /tmp)
#   TBDFS_DATA_DIR=/path/to/data bash scripts/gpu_check.sh   # real Wikipedia if present
#
# Without Wikipedia data the benchmark uses a synthetic graph of Wikipedia's size
# (8,227 + 1,000 nodes, 157,474 events), said so in the JSON ("dataset").
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
OUT=${OUT:-/tmp/tbdfs_gpu_check}
. scripts/gpu_common.sh
machine_and_build

step "CUDA tests (and the no-DGL tests)"
timeout 240 $PY -m pytest -q -p no:cacheprovider tests/test_cuda.py tests/test_compile.py \
  tests/test_without_dgl.py \
  >"$OUT/tests.log" 2>&1
tests_rc=$?
tail -n 5 "$OUT/tests.log" >&2

dataset=wikipedia
if ! $PY -c 'import sys; from tbdfs_dgl.data import load_dataset, default_data_dir; load_dataset("wikipedia", default_data_dir())' >/dev/null 2>&1; then
  dataset=synthetic-wikipedia
fi
threads=$(( $(nproc) > 8 ? 8 : $(nproc) ))
# For rehearsing this script on a machine without a GPU: TBDFS_GPU_CHECK_DEVICE=cpu and
# TBDFS_GPU_CHECK_QUICK=1 (tiny synthetic runs).
device=${TBDFS_GPU_CHECK_DEVICE:-cuda}
quick=${TBDFS_GPU_CHECK_QUICK:+--quick}
bench() {  # name, timeout, args...
  local name=$1 limit=$2; shift 2
  step "benchmark $name"
  timeout "$limit" $PY examples/benchmark_model.py --device "$device" --dataset "$dataset" \
    --threads "$threads" --json "$OUT/$name.json" $quick "$@" >"$OUT/$name.log" 2>&1
  local rc=$?
  cat "$OUT/$name.log" >&2
  return $rc
}
# Per-batch figures (eager), tBDFS and TGAT (width 172 eager: round 5's docs).
bench eager 80 --settings defaults,official4 --variants tbdfs,tgat --batches 8 --rounds 2
# Whole epochs (every training batch, sampling included) at the defaults, compiled with CUDA
# graphs ('reduce-overhead') and bf16: the issue's "defaults <= 3 s per epoch".
bench epoch 90 --settings defaults --variants tbdfs,tgat --compile --compile-mode reduce-overhead \
  --amp bf16 --batches 100000 --rounds 2 --warmup 3
# The official settings compiled the same way (their epochs extrapolated: s_per_epoch).
bench compiled 120 --settings official4,official172 --variants tbdfs --compile \
  --compile-mode reduce-overhead --amp bf16 --batches 8 --rounds 2 --warmup 3
# The official settings are paced by the sampling thread (round 7): four batches sampled
# ahead, a thread each, against "compiled"'s one.
bench prefetch4 70 --settings official4 --variants tbdfs --compile --compile-mode reduce-overhead \
  --amp bf16 --batches 8 --rounds 2 --warmup 3 --prefetch-batches 4

step "summary"
$PY - "$OUT" "$build_rc" "$tests_rc" "$dataset" "$(( $(date +%s) - t0 ))" <<'PYEOF'
import json, os, sys
out, build_rc, tests_rc, dataset, seconds = sys.argv[1:6]
summary = {"build_rc": int(build_rc), "tests_rc": int(tests_rc), "dataset": dataset,
           "seconds": int(seconds)}
try:
    tail = open(os.path.join(out, "tests.log")).read().strip().splitlines()[-1]
    summary["tests"] = tail
except (OSError, IndexError):
    pass
for name in ("eager", "epoch", "compiled", "prefetch4"):
    path = os.path.join(out, name + ".json")
    if not os.path.exists(path):
        summary[name] = None
        continue
    doc = json.load(open(path))
    summary["gpu"] = doc.get("gpu")
    summary[name] = [{k: (round(v, 2) if isinstance(v, float) else v)
                      for k, v in r.items()
                      if k in ("setting", "variant", "ms_per_batch", "s_per_epoch",
                               "s_per_official_epoch", "sampling_ms_per_batch", "compile_mode",
                               "prefetch_batches",
                               "peak_gpu_mb", "epoch_batches")}
                     for r in doc["results"]]
print(json.dumps(summary))
PYEOF
