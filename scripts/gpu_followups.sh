#!/usr/bin/env bash
# Issue 11's open measurement on the GPU machine (torch preinstalled, no DGL, no network,
# 16 CPU cores): does glibc malloc keeping freed memory (--retain-memory) bring 8 DDP
# ranks on the CPU closer to linear? Rounds 13 and 15 ran DDP without it; then every rank
# maps its batch-sized tensors afresh and faults their pages in at every step (8 ranks at
# once), and a share's step time jitters with its allocations (round 21 on the development
# machine: the shares' content spread 3.7-4.0% of a share with it, 6.0-8.2% without,
# docs/benchmarks/distributed.md, "Round 21"). Round 15's version of this script (pinning,
# compiled epochs): docs/benchmarks/gpu_h200/r15/gpu_followups_r15.sh.
#
#   OUT=/tmp/followups bash scripts/gpu_followups.sh
#
# Alone on the machine, one after the other, A/B interleaved: one process alone without
# and with --retain-memory; then at 8: DDP, DDP retaining, DDP, DDP retaining, and 8
# independent processes retaining; 200 events a process, 20 batches (round 15's setting).
# JSON and logs go into one archive in $OUT (the device machine hands back at most 8 files);
# the last line is one JSON summary, also in $OUT/summary.json.
#
# Rehearse on a CPU: FOLLOWUPS_QUICK=1 PY=.venv/bin/python \
#   OUT=/tmp/followups_dry bash scripts/gpu_followups.sh
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-python3}
OUT=${OUT:-/tmp/tbdfs_followups}
QUICK=${FOLLOWUPS_QUICK:-}
LIMIT=${FOLLOWUPS_SECONDS:-560}   # seconds for the whole script
export TBDFS_DATA_DIR=${TBDFS_DATA_DIR:-$PWD/.gpudata}
. scripts/gpu_common.sh
left() { echo $(( LIMIT - ($(date +%s) - t0) )); }
cap() { local l; l=$(left); [ "$l" -gt "$1" ] && l=$1; echo "$l"; }

machine_and_build

if [ -n "$QUICK" ]; then n=2; tail="--max-batches 2"; else
  n=8; tail="--data-dir $TBDFS_DATA_DIR --no-download --max-batches 20"; fi
scaling() {  # name, cap, extra train_wikipedia arguments, benchmark_distributed arguments...
  local name=$1 c=$2 extra=$3; shift 3
  step "scaling: $name"
  timeout "$(cap "$c")" $PY examples/benchmark_distributed.py throughput \
    --events-per-proc 200 --json "$OUT/$name.json" "$@" -- $tail $extra >"$OUT/$name.log" 2>&1
  grep "process" "$OUT/$name.log" >&2
}
scaling alone 60 "" --procs 1 --independent
scaling alone_retain 60 --retain-memory --procs 1 --independent
scaling ddp_a 90 "" --procs $n
scaling ddp_retain_a 90 --retain-memory --procs $n
scaling ddp_b 90 "" --procs $n
scaling ddp_retain_b 90 --retain-memory --procs $n
scaling independent_retain 80 --retain-memory --procs $n --independent

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
# Fractions of linear against the plain process alone (round 15's base), and the
# retaining process alone for the retaining runs' own ratio.
for name in ("alone_retain", "ddp_a", "ddp_retain_a", "ddp_b", "ddp_retain_b",
             "independent_retain"):
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
ret = load("alone_retain")
summary["alone_retain_events_per_second"] = ret and round(ret["runs"][0]["events_per_second"], 1)
print(json.dumps(summary))
PYEOF
) | tee "$OUT/summary.json"
pack=/tmp/followups_$$.tgz
tar czf "$pack" -C "$OUT" . && find "$OUT" -mindepth 1 ! -name summary.json -delete \
  && mv "$pack" "$OUT/followups.tgz"
