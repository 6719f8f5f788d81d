#!/usr/bin/env bash
# Shards of the full-protocol grid (issue 13) on a GPU machine: torch preinstalled, no DGL,
# no network.  Builds the extension, then runs N shards of examples/reproduce.py side by side
# on the one GPU (each shard's sampler on its own CPU threads) until a time limit, and ends
# with ONE JSON line.  A shard stopped by the limit loses nothing finished: finished runs
# are in the results file, and the run it was in has its training state after its last
# finished epoch, which the next call (here or on a CPU) resumes.
#
#   OUT=/tmp/full TBDFS_DATA_DIR=/path/to/data bash scripts/gpu_full_protocol.sh
#
# The results file starts as a copy of the committed docs/<budget>/results/runs.jsonl (so
# finished runs are skipped) and is written to $OUT/<budget>_runs.jsonl; copy it back over
# docs/<budget>/results/runs.jsonl and regenerate the report where matplotlib is:
#   python examples/reproduce.py --budget <budget> --report-only
# The states of runs in progress start as a copy of docs/<budget>/results/resume/ (git
# ignores it: carry it to the machine) and come back packed in $OUT/<budget>_resume.tgz;
# unpack it where they belong (replacing the older states of the same runs; the state of a
# run that finished there is deleted by the next reproduce.py of the grid):
#   tar -xzf <budget>_resume.tgz -C docs/<budget>/results/
#
# Settings (environment):
#   TBDFS_FULL_BUDGET    full-recent (default: [10, 10] recent) or full ([20, 20] uniform)
#   TBDFS_FULL_DATASETS  default wikipedia,collegemsg,email-eu,bitcoin-otc,synthetic
#   TBDFS_FULL_VARIANTS  default tgat,tbdfs,learned-alpha (the main comparison); empty: all
#   TBDFS_FULL_SHARDS    processes side by side (default 4)
#   TBDFS_FULL_SECONDS   time limit for the runs (default 420)
#   TBDFS_FULL_DEVICE    default cuda (cpu: rehearse the script here)
#   TBDFS_FULL_EXTRA     more reproduce.py arguments (e.g. "--compile --compile-mode
#                        reduce-overhead": CUDA graphs, 2.5-2.8x faster training steps at the
#                        defaults on an H200 in round 7, not yet tried in shards; "--seeds 0,1";
#                        "--budget ... --epochs 2" for a rehearsal)
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
OUT=${OUT:-/tmp/tbdfs_full_protocol}
BUDGET=${TBDFS_FULL_BUDGET:-full-recent}
DATASETS=${TBDFS_FULL_DATASETS:-wikipedia,collegemsg,email-eu,bitcoin-otc,synthetic}
VARIANTS=${TBDFS_FULL_VARIANTS-tgat,tbdfs,learned-alpha}
SHARDS=${TBDFS_FULL_SHARDS:-4}
LIMIT=${TBDFS_FULL_SECONDS:-420}
DEVICE=${TBDFS_FULL_DEVICE:-cuda}
EXTRA=${TBDFS_FULL_EXTRA:-}
. scripts/gpu_common.sh
machine_and_build

results="$OUT/${BUDGET}_runs.jsonl"
if [ -f "docs/$BUDGET/results/runs.jsonl" ]; then
  cp "docs/$BUDGET/results/runs.jsonl" "$results"
else
  : >"$results"
fi
before=$(wc -l <"$results")
states="$OUT/resume"
mkdir -p "$states"
[ -d "docs/$BUDGET/results/resume" ] && cp -r "docs/$BUDGET/results/resume/." "$states/"
# Sampler threads per shard: the CPU cores shared out (the GPU does the model).
threads=$(( $(nproc) / SHARDS )); [ "$threads" -ge 1 ] || threads=1
variants=${VARIANTS:+--variants $VARIANTS}
step "$SHARDS shards of budget $BUDGET on $DEVICE, $threads CPU threads each, ${LIMIT}s"
pids=()
for i in $(seq 0 $((SHARDS - 1))); do
  # SIGINT: the runner saves nothing half-done and exits 130.
  timeout --signal=INT "$LIMIT" $PY examples/reproduce.py --budget "$BUDGET" \
    --datasets "$DATASETS" $variants --device "$DEVICE" --threads "$threads" \
    --shard "$i/$SHARDS" --results "$results" --state-dir "$states" --no-report \
    --no-progress $EXTRA \
    >"$OUT/shard$i.log" 2>&1 &
  pids+=($!)
done
rcs=()
for p in "${pids[@]}"; do wait "$p"; rcs+=($?); done
after=$(wc -l <"$results")
grep -h "^done \|FAILED" "$OUT"/shard*.log >&2 || true
# One archive: the machine hands back only a few files.
in_progress=$(cd "$OUT" && find resume -name '*.state' | sort | tr '\n' ' ')
tar -C "$OUT" -czf "$OUT/${BUDGET}_resume.tgz" resume && rm -rf "$states"
step "finished"
$PY - "$results" "$before" "$after" "$build_rc" "${rcs[*]}" "$BUDGET" "$DEVICE" \
  "$in_progress" <<'EOF'
import json, sys
path, before, after, build_rc, rcs, budget, device, in_progress = sys.argv[1:]
runs = [json.loads(x) for x in open(path) if x.strip()]
new = runs[int(before):]
print(json.dumps({
    "budget": budget, "device": device, "build_rc": int(build_rc),
    "shard_rcs": [int(x) for x in rcs.split()], "runs_before": int(before),
    "runs_after": int(after), "results": path,
    "states_in_progress": in_progress.split(),
    "new_runs": [{"run": f"{r['dataset']}/{r['variant']}/seed{r['seed']}",
                  "test_ap": round(r["test"]["transductive"]["ap"], 4),
                  "epochs": r["epochs_run"], "best": r["best_epoch"],
                  "wall_s": round(r["wall_seconds"], 1)} for r in new]}))
EOF
