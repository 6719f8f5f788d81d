#!/usr/bin/env bash
# The GPU-machine measurements left open by round 13 (round 15 ran them: 312 s on an H200;
# docs/benchmarks/distributed.md and model_gpu.md, "Round 15"), in one call: the
# machine of scripts/gpu_check.sh (torch preinstalled, no DGL, no network, 16 CPU cores).
# (Round 13's version, which ran DyGLib's five Wikipedia epochs and the first
# independent-process control: docs/benchmarks/gpu_h200/r13/gpu_followups_r13.sh.)
#
#   OUT=/tmp/followups bash scripts/gpu_followups.sh
#
# Alone on the machine, one after the other:
#   * issue 11: does pinning every process to CPUs of its own (--pin-cores: an equal share,
#     whole physical cores first) recover what 8 processes lose? Round 13 found eight
#     independent one-process trainings 30% slower on average than one alone (the slowest
#     58%), and DDP only 8% behind that slowest one (docs/benchmarks/distributed.md). One
#     process alone; then at 8, independent unpinned, independent pinned, DDP pinned, DDP
#     unpinned; 200 events a process, 20 batches. The machine's CPU topology is printed first.
#   * issue 8: whole compiled epochs (CUDA graphs + bf16) of today's default model (with the
#     padding of empty neighbourhoods, never timed over whole epochs on a GPU), tBDFS and
#     TGAT interleaved: the defaults' <= 3 s per epoch target re-measured.
# JSON and logs go into one archive in $OUT (the device machine hands back at most 8 files);
# the last line is one JSON summary, also in $OUT/summary.json.
#
# Rehearse on a CPU: FOLLOWUPS_DEVICE=cpu FOLLOWUPS_QUICK=1 PY=.venv/bin/python \
#   OUT=/tmp/followups_dry bash scripts/gpu_followups.sh
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-python3}
OUT=${OUT:-/tmp/tbdfs_followups}
DEV=${FOLLOWUPS_DEVICE:-cuda}
QUICK=${FOLLOWUPS_QUICK:-}
LIMIT=${FOLLOWUPS_SECONDS:-560}   # seconds for the whole script
export TBDFS_DATA_DIR=${TBDFS_DATA_DIR:-$PWD/.gpudata}
. scripts/gpu_common.sh
left() { echo $(( LIMIT - ($(date +%s) - t0) )); }
cap() { local l; l=$(left); [ "$l" -gt "$1" ] && l=$1; echo "$l"; }

machine_and_build

if [ -n "$QUICK" ]; then n=2; tail="--max-batches 2"; else
  n=8; tail="--data-dir $TBDFS_DATA_DIR --no-download --max-batches 20"; fi
scaling() {  # name, cap, benchmark_distributed throughput arguments...
  local name=$1 c=$2; shift 2
  step "scaling: $name"
  timeout "$(cap "$c")" $PY examples/benchmark_distributed.py throughput \
    --events-per-proc 200 --json "$OUT/$name.json" "$@" -- $tail >"$OUT/$name.log" 2>&1
  grep "process" "$OUT/$name.log" >&2
}
scaling alone 60 --procs 1 --independent
scaling independent 80 --procs $n --independent
scaling independent_pinned 80 --procs $n --independent --pin-cores
scaling ddp_pinned 90 --procs $n --pin-cores
scaling ddp 90 --procs $n

lim=$(cap 220)
if [ "$lim" -gt 30 ]; then
  step "whole compiled epochs at the defaults"
  if [ -n "$QUICK" ]; then ep="--batches 2 --rounds 1 --quick"; else
    ep="--batches 100000 --rounds 2 --warmup 3 --compile --compile-mode reduce-overhead --amp bf16"; fi
  timeout "$lim" $PY examples/benchmark_model.py --device "$DEV" --threads 8 \
    --settings defaults --variants tbdfs,tgat $ep --json "$OUT/epochs.json" \
    >"$OUT/epochs.log" 2>&1
  grep "^| defaults" "$OUT/epochs.log" >&2
else
  step "whole epochs skipped: out of time"
fi

step "summary"
($PY - "$OUT" "$build_rc" "$(( $(date +%s) - t0 ))" <<'PYEOF'
import json, os, sys
out, build_rc, seconds = sys.argv[1:4]
summary = {"build_rc": int(build_rc), "seconds": int(seconds)}
def load(name):
    path = os.path.join(out, name + ".json")
    return json.load(open(path)) if os.path.exists(path) else None
alone = load("alone")
base = alone and alone["runs"][0]["events_per_second"]
for name in ("independent", "independent_pinned", "ddp_pinned", "ddp"):
    doc = load(name)
    if not doc:
        summary[name] = None
        continue
    r = doc["runs"][0]
    slowest = r.get("per_process_train_seconds") and max(r["per_process_train_seconds"])
    summary[name] = {
        "procs": r["procs"], "events_per_second": round(r["events_per_second"], 1),
        "train_seconds": round(r["train_seconds"], 2),
        "per_process_train_seconds": r.get("per_process_train_seconds"),
        # DDP waits for its slowest rank: an independent run's fair counterpart is its
        # events over its slowest process's seconds.
        "fraction_of_linear": base and round(r["events_per_second"] / (r["procs"] * base), 3),
        "fraction_by_slowest": base and round(
            r["events"] / (slowest or r["train_seconds"]) / (r["procs"] * base), 3)}
summary["alone_events_per_second"] = base and round(base, 1)
doc = load("epochs")
summary["epochs"] = doc and {r["variant"]: {"ms_per_batch": round(r["ms_per_batch"], 2),
                                            "s_per_official_epoch": round(r["s_per_official_epoch"], 2),
                                            "peak_gpu_mb": r.get("peak_gpu_mb")}
                             for r in doc["results"]}
print(json.dumps(summary))
PYEOF
) | tee "$OUT/summary.json"
pack=/tmp/followups_$$.tgz
tar czf "$pack" -C "$OUT" . && find "$OUT" -mindepth 1 ! -name summary.json -delete \
  && mv "$pack" "$OUT/followups.tgz"
