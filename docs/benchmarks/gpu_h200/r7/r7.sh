#!/usr/bin/env bash
# Round 7 device run.
#  A (quiet machine): the defaults' whole Wikipedia epoch on the GPU, base commit 75f68f9
#    (.gpuscripts/base) against this tree: compile + bf16, compile 'reduce-overhead' + bf16,
#    eager; alternating processes.
#  B (in parallel): CUDA tests; issue 14's learning runs: DyGLib's TGAT on CollegeMsg over
#    5 whole epochs and on Wikipedia over 2, ours on Wikipedia over 5 epochs (alpha 1, 0.5),
#    ours' CollegeMsg time to val AP 0.75.
# Everything lands in /tmp/r7 and comes back as $OUT/r7.tgz.
# Kept as the record of round 7's device call (it ran from .gpuscripts/, an ignored folder
# carried to the machine with .gpudata/): .gpuscripts/base held `git archive 75f68f9
# tbdfs_dgl examples`, .gpuscripts/dyglib a DyGLib checkout (not part of this repository).
# Run from the repository root as `bash .gpuscripts/r7.sh` after copying it there.
# Dry run on a CPU: R7_DEVICE=cpu R7_QUICK=1 PY=.venv/bin/python OUT=/tmp/r7dry bash .gpuscripts/r7.sh
set -u
cd "$(dirname "$0")/.."
PY=${PY:-python3}
OUT=${OUT:-/tmp/r7out}
DEV=${R7_DEVICE:-cuda}
QUICK=${R7_QUICK:-}
LIMIT=${R7_LIMIT:-575}          # seconds for the whole script
R=/tmp/r7; rm -rf $R; mkdir -p $R $OUT
export TBDFS_DATA_DIR=$PWD/.gpudata PYTHONPATH=$PWD PYTHONUNBUFFERED=1
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
pack() { tar czf $OUT/r7.tgz -C /tmp r7; echo "packed at $(el)s"; }
trap pack EXIT

nvidia-smi -L 2>/dev/null; nproc
$PY -c 'import sys, torch, numpy; print(sys.version.split()[0], "torch", torch.__version__, "numpy", numpy.__version__, "cuda", torch.cuda.is_available())'
$PY setup.py --quiet build_ext --inplace > $R/build.log 2>&1; echo "build rc $? at $(el)s"
cp tbdfs_dgl/_C*.so .gpuscripts/base/tbdfs_dgl/

# ---------------------------------------------------------------- A: quiet A/B
if [ -n "$QUICK" ]; then qa="--quick --batches 2 --rounds 1 --warmup 1"; else
  qa="--dataset wikipedia --batches 100000 --rounds 2 --warmup 3"; fi
bench() {  # name root timeout args...
  local name=$1 root=$2 lim=$3; shift 3
  if [ $(el) -gt $(( LIMIT - 340 )) ]; then echo "$name skipped at $(el)s"; return; fi
  (cd $root && timeout $lim $PY examples/benchmark_model.py --device $DEV --threads 8 \
     --settings defaults --variants tbdfs $qa --json $R/$name.json "$@") > $R/$name.log 2>&1
  echo "$name rc $? at $(el)s: $(grep '^| defaults' $R/$name.log | head -1)"
}
B=.gpuscripts/base
C="--compile --amp bf16"
[ "$DEV" = cpu ] && C=""
export TORCH_LOGS=graph_breaks,recompiles,perf_hints   # why a graph breaks / is not captured
bench base_c $B 100 $C
bench new_c . 90 $C
bench new_ro . 90 $C ${C:+--compile-mode reduce-overhead}
unset TORCH_LOGS
bench new_e . 50
bench base_e $B 50
bench new_ro2 . 50 $C ${C:+--compile-mode reduce-overhead}
bench base_c2 $B 50 $C
qa="--dataset wikipedia --batches 8 --rounds 2 --warmup 3"; [ -n "$QUICK" ] && qa="--quick --batches 2 --rounds 1 --warmup 1"
bench new_ro_official . 80 $C ${C:+--compile-mode reduce-overhead} --settings official4,official172

# ---------------------------------------------------------------- B: learning, in parallel
left=$(( LIMIT - $(el) - 25 )); [ $left -gt 30 ] || left=30
echo "phase B with ${left}s at $(el)s"
if [ -n "$QUICK" ]; then
  cm_steps=2,e1; cm_eb=3; wk_steps=e1; wk_eb=2; ev=1; wk_ev=1; ours_ep=1; mb="--max-batches 3"
else
  cm_steps=10,20,40,80,e1,e2,e5; cm_eb=0; wk_steps=e1,e2; wk_eb=0; ev=20; wk_ev=0; ours_ep=5; mb=""
fi
DY=.gpuscripts/dyglib
(timeout $left $PY scripts/dyglib_tgat_curve.py --dyglib $DY --data collegemsg --device $DEV \
   --steps $cm_steps --epoch-batches $cm_eb --eval-batches $ev --threads 2 \
   --json $R/dyglib_cm.json > $R/dyglib_cm.log 2>&1; echo "dyglib_cm rc $? at $(el)s") &
(timeout $left $PY scripts/dyglib_tgat_curve.py --dyglib $DY --data wikipedia --device $DEV \
   --steps $wk_steps --epoch-batches $wk_eb --eval-batches $wk_ev --threads 2 \
   --json $R/dyglib_wiki.json > $R/dyglib_wiki.log 2>&1; echo "dyglib_wiki rc $? at $(el)s") &
(timeout $left $PY examples/train_wikipedia.py --alpha 1,0.5 --epochs $ours_ep \
   --patience 100 --torch-threads 2 --device $DEV --no-download --no-progress --save-dir $R/ours_wiki $mb \
   > $R/ours_wiki.log 2>&1; echo "ours_wiki rc $? at $(el)s") &
(timeout $left $PY examples/train_wikipedia.py --data .gpudata/collegemsg/CollegeMsg.txt.gz --alpha 1 --fanouts 20,20 \
   --train-batches 10 --epochs 6 --val-events 4000 --test-events 4000 --torch-threads 2 --device $DEV \
   --no-download --no-progress --save-dir $R/ours_cm_tta $mb > $R/ours_cm_tta.log 2>&1
 echo "ours_cm_tta rc $? at $(el)s") &
if [ "$DEV" = cuda ]; then
  (timeout $left $PY -m pytest -q -p no:cacheprovider tests/test_cuda.py tests/test_compile.py \
     tests/test_without_dgl.py > $R/tests.log 2>&1; echo "tests rc $? at $(el)s: $(tail -n 1 $R/tests.log)") &
fi
wait
echo "---- summary at $(el)s"
grep -h "^| defaults\|^| official" $R/*.log
grep -h "DyGLib TGAT step" $R/dyglib_*.log | tail -n 14
grep -h "epoch\|test" $R/ours_wiki.log | tail -n 14
grep -h "val AP" $R/ours_cm_tta.log | tail -n 8
