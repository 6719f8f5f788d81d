#!/usr/bin/env bash
# The GPU-machine measurements still open after round 11, in one call (~9 minutes): the
# machine of scripts/gpu_check.sh (torch preinstalled, no DGL, no network, 16 CPU cores).
#
#   OUT=/tmp/followups bash scripts/gpu_followups.sh
#
# In parallel from the start:
#   * issue 14: DyGLib's own TGAT on Wikipedia over five whole epochs (its code outside this
#     repository, in the ignored folder $DYGLIB, default .gpuscripts/dyglib; data in
#     $TBDFS_DATA_DIR, default .gpudata; both carried to the machine): the last missing
#     DyGLib figure of docs/learning_efficiency.md (section 15.7). It uses the GPU and two
#     CPU threads.
#   * the extension's build.
# Then, one after the other:
#   * issue 11: what sharing the machine costs. N independent one-process trainings at once
#     (examples/benchmark_distributed.py throughput --independent; no DDP) at 1, 4 and 8,
#     and DDP at 8 in the same lease, every rank 200 events a batch, 20 batches (round 10's
#     weak-scaling run: docs/benchmarks/distributed.md). If the independent processes also
#     slow down by about half at 8, DDP's loss is the machine's shared memory bandwidth and
#     caches, not its all-reduce.
#   * issue 14: our five Wikipedia epochs with today's default, TGAT and tBDFS, seeds 0 and
#     1 (four background processes, started after the scaling runs, beside what follows).
#   * issue 14: the options of round 11 on CUDA: the CUDA tests (which now include DyGLib's
#     layer, attn_residual + empty_neighbourhood='padding_node'), and their cost per batch
#     against the default, eager and compiled with CUDA graphs + bf16.
# JSON and logs land in $OUT; the last line is one JSON summary.
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
DYGLIB=${DYGLIB:-.gpuscripts/dyglib}
export TBDFS_DATA_DIR=${TBDFS_DATA_DIR:-$PWD/.gpudata}
. scripts/gpu_common.sh
left() { echo $(( LIMIT - ($(date +%s) - t0) )); }

dyglib_pid=
if [ -d "$DYGLIB" ]; then
  step "DyGLib TGAT, Wikipedia, five epochs (background)"
  if [ -n "$QUICK" ]; then dy="--data collegemsg --steps 2 --epoch-batches 2 --eval-batches 1"
  else dy="--data wikipedia --steps e3,e5 --epoch-batches 0 --eval-batches 0"; fi
  timeout $(( LIMIT - 15 )) $PY scripts/dyglib_tgat_curve.py --dyglib "$DYGLIB" $dy \
    --device "$DEV" --threads 2 --json "$OUT/dyglib_wikipedia_e5.json" \
    >"$OUT/dyglib_wikipedia_e5.log" 2>&1 &
  dyglib_pid=$!
else
  step "no DyGLib checkout at $DYGLIB: its run is skipped"
fi

machine_and_build

if [ -n "$QUICK" ]; then procs=1,2; ddp=2; tail="--max-batches 2"; else
  procs=1,4,8; ddp=8; tail="--data-dir $TBDFS_DATA_DIR --no-download --max-batches 20"; fi
step "independent processes ($procs), then DDP at $ddp, 200 events a rank"
timeout $(( $(left) > 200 ? 200 : $(left) )) $PY examples/benchmark_distributed.py throughput \
  --procs $procs --independent --events-per-proc 200 --json "$OUT/independent.json" \
  -- $tail >"$OUT/independent.log" 2>&1
grep "process" "$OUT/independent.log" >&2
timeout $(( $(left) > 80 ? 80 : $(left) )) $PY examples/benchmark_distributed.py throughput \
  --procs $ddp --events-per-proc 200 --json "$OUT/ddp.json" -- $tail >"$OUT/ddp.log" 2>&1
grep "process" "$OUT/ddp.log" >&2

# Issue 14: our own five Wikipedia epochs with today's default (TGAT and tBDFS, seeds 0 and
# 1, the trainer's protocol as round 10's section 13.3), beside DyGLib's five. Started only
# now so that the process-scaling runs above have the CPU cores to themselves; they share
# the GPU with the tests and the benchmarks below (which compare variants within a round).
ours_pids=()
if [ -n "$QUICK" ]; then ours="--epochs 1 --max-batches 2 --val-events 400 --test-events 400"
else ours="--epochs 5 --patience 100"; fi
step "ours, Wikipedia, alpha 1 and 0.5, seeds 0 and 1 (background, one process each)"
for s in 0 1; do for a in 1 0.5; do
  timeout $(( $(left) - 10 )) $PY examples/train_wikipedia.py --data-dir "$TBDFS_DATA_DIR" \
    --no-download --alpha $a $ours --torch-threads 2 --device "$DEV" --seed $s \
    --no-progress --save-dir "$OUT/ours_e5_seed${s}_alpha$a" \
    >"$OUT/ours_e5_seed${s}_alpha$a.log" 2>&1 &
  ours_pids+=($!)
done; done

tests_rc=skipped
if [ "$DEV" = cuda ]; then
  step "CUDA tests"
  timeout $(( $(left) > 150 ? 150 : $(left) )) $PY -m pytest -q -p no:cacheprovider \
    tests/test_cuda.py tests/test_compile.py >"$OUT/tests.log" 2>&1
  tests_rc=$?
  tail -n 3 "$OUT/tests.log" >&2
fi

bench() {  # name, timeout cap, args...
  local name=$1 cap=$2; shift 2
  local lim; lim=$(left); [ "$lim" -gt "$cap" ] && lim=$cap
  [ "$lim" -gt 20 ] || { step "benchmark $name skipped: out of time"; return; }
  step "benchmark $name"
  timeout "$lim" $PY examples/benchmark_model.py --device "$DEV" --threads 8 \
    --settings defaults --variants tbdfs,tbdfs-dyglib,tgat,tgat-dyglib \
    ${QUICK:+--quick} --json "$OUT/$name.json" "$@" >"$OUT/$name.log" 2>&1
  grep "^| defaults" "$OUT/$name.log" >&2
}
if [ -n "$QUICK" ]; then bench options_eager 120 --batches 2 --rounds 1; else
  bench options_eager 70 --batches 8 --rounds 2
  bench options_compiled 120 --batches 8 --rounds 2 --warmup 3 --compile \
    --compile-mode reduce-overhead --amp bf16
fi

if [ -n "$dyglib_pid" ]; then
  step "waiting for DyGLib"
  wait "$dyglib_pid"
  grep "DyGLib TGAT step" "$OUT/dyglib_wikipedia_e5.log" >&2
fi

for p in "${ours_pids[@]}"; do wait "$p"; done
grep -h "^| wikipedia" "$OUT"/ours_e5_seed*.log >&2 || true
find "$OUT" -name '*.pt' -delete   # checkpoints: not needed back

step "summary"
($PY - "$OUT" "$build_rc" "$tests_rc" "$(( $(date +%s) - t0 ))" <<'PYEOF'
import json, os, sys
out, build_rc, tests_rc, seconds = sys.argv[1:5]
summary = {"build_rc": int(build_rc), "tests_rc": tests_rc, "seconds": int(seconds)}
def load(name):
    path = os.path.join(out, name + ".json")
    return json.load(open(path)) if os.path.exists(path) else None
for name in ("independent", "ddp"):
    doc = load(name)
    summary[name] = doc and [{k: round(r[k], 3) if isinstance(r[k], float) else r[k]
                              for k in ("procs", "events_per_second", "fraction_of_linear")}
                             for r in doc["runs"]]
# DDP ran alone in its document: its fraction of linear against the independent
# single process of the same lease.
ind, ddp = summary["independent"], summary["ddp"]
if ind and ddp and ind[0]["procs"] == 1:
    for r in ddp:
        r["fraction_of_linear"] = round(r["events_per_second"]
                                        / (r["procs"] * ind[0]["events_per_second"]), 3)
for name in ("options_eager", "options_compiled"):
    doc = load(name)
    summary[name] = doc and {r["variant"]: round(r["ms_per_batch"], 2) for r in doc["results"]}
summary["ours"] = []
for seed, alpha in ((0, "1"), (0, "0.5"), (1, "1"), (1, "0.5")):
    path = os.path.join(out, f"ours_e5_seed{seed}_alpha{alpha}", "metrics.json")
    if os.path.exists(path):
        summary["ours"] += [
            {"seed": seed, "alpha": r["alpha"], "epochs": r["epochs_run"], "best": r["best_epoch"],
             "val_ap": round(r["val"]["transductive"]["ap"], 4),
             "test_ap": round(r["test"]["transductive"]["ap"], 4),
             "val_curve": [round(h["val_ap"], 4) for h in r["history"]],
             "s_per_epoch": round(r["seconds_per_epoch"], 1)}
            for r in json.load(open(path))["runs"]]
doc = load("dyglib_wikipedia_e5")
summary["dyglib"] = doc and [{k: p.get(k) for k in ("step", "val_ap", "test_ap", "seconds")}
                             for p in doc["curve"]]
print(json.dumps(summary))
PYEOF
) | tee "$OUT/summary.json"
# The device machine hands back at most 8 files: everything goes into one archive, beside
# the summary.
pack=/tmp/followups_$$.tgz
tar czf "$pack" -C "$OUT" . && find "$OUT" -mindepth 1 ! -name summary.json -delete \
  && mv "$pack" "$OUT/followups.tgz"
