#!/usr/bin/env bash
# Round 10 device run (issues 8 and 14: the new default layer form on a GPU).
#  A (quiet): Wikipedia, benchmark_model.py on cuda:
#    A1 eager, defaults: tbdfs,tgat (new form) against tbdfs-plain,tgat-plain (TGAT's form),
#       100 batches x 2 rounds, interleaved;
#    A2 compile reduce-overhead + bf16, defaults, whole epochs: tbdfs vs tbdfs-plain;
#    A3 compile reduce-overhead + bf16, official4/official172, tbdfs, 4 batches sampled ahead.
#  B (side by side): CUDA tests; CollegeMsg time to val AP 0.75 (new form, then TGAT's form);
#    CollegeMsg 5 epochs alpha 1,0.5 seeds 0-3; Wikipedia 5 epochs alpha 1,0.5 seed 0.
# Everything lands in /tmp/r10 and comes back as $OUT/r10.tgz.
# Dry run on a CPU: R10_DEVICE=cpu R10_QUICK=1 PY=.venv/bin/python OUT=/tmp/r10dry bash .gpuscripts/r10.sh
set -u
cd "$(dirname "$0")/.."
PY=${PY:-python3}
OUT=${OUT:-/tmp/r10out}
DEV=${R10_DEVICE:-cuda}
QUICK=${R10_QUICK:-}
LIMIT=${R10_LIMIT:-550}          # seconds for the whole script
R=/tmp/r10; rm -rf $R; mkdir -p $R $OUT
export TBDFS_DATA_DIR=$PWD/.gpudata PYTHONPATH=$PWD PYTHONUNBUFFERED=1
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
pack() { tar czf $OUT/r10.tgz -C /tmp r10; echo "packed at $(el)s"; }
trap pack EXIT

nvidia-smi -L 2>/dev/null; nproc
$PY -c 'import sys, torch, numpy; print(sys.version.split()[0], "torch", torch.__version__, "numpy", numpy.__version__, "cuda", torch.cuda.is_available())'
$PY setup.py --quiet build_ext --inplace > $R/build.log 2>&1; echo "build rc $? at $(el)s"

# ---------------------------------------------------------------- A: quiet
bench() {  # name timeout args...
  local name=$1 lim=$2; shift 2
  timeout $lim $PY examples/benchmark_model.py --device $DEV --threads 8 --dataset wikipedia \
     --json $R/$name.json "$@" > $R/$name.log 2>&1
  echo "$name rc $? at $(el)s"; grep '^| ' $R/$name.log | grep -v -- '---' | head -12
}
C="--compile --compile-mode reduce-overhead --amp bf16"
if [ "$DEV" = cpu ]; then C=""; fi
if [ -n "$QUICK" ]; then
  bench a1_eager 60 --quick --settings defaults --variants tbdfs,tbdfs-plain --batches 2 --rounds 1 --warmup 1
  bench a2_epoch 60 --quick --settings defaults --variants tbdfs,tbdfs-plain --batches 2 --rounds 1 --warmup 1 $C
  bench a3_official 60 --quick --settings official4 --variants tbdfs --batches 2 --rounds 1 --warmup 1 --prefetch-batches 4 $C
else
  bench a1_eager 70 --settings defaults --variants tbdfs,tgat,tbdfs-plain,tgat-plain --batches 100 --rounds 2 --warmup 3
  bench a2_epoch 150 --settings defaults --variants tbdfs,tbdfs-plain --batches 100000 --rounds 2 --warmup 3 $C
  bench a3_official 110 --settings official4,official172 --variants tbdfs --batches 8 --rounds 2 --warmup 3 --prefetch-batches 4 $C
fi

# ---------------------------------------------------------------- B: side by side
left=$(( LIMIT - $(el) - 15 )); [ $left -gt 30 ] || left=30
echo "phase B with ${left}s at $(el)s"
CM=.gpudata/collegemsg/CollegeMsg.txt.gz
if [ -n "$QUICK" ]; then ep=1; mb="--max-batches 3"; else ep=5; mb=""; fi
common="--torch-threads 2 --device $DEV --no-download --no-progress --patience 100"
(timeout $left $PY examples/train_wikipedia.py --data $CM --alpha 1 --fanouts 20,20 --train-batches 10 \
   --epochs 6 --val-events 4000 --test-events 4000 $common --save-dir $R/tta_new $mb > $R/tta_new.log 2>&1
 echo "tta_new rc $? at $(el)s"
 timeout $(( left - $(el) + 60 )) $PY examples/train_wikipedia.py --data $CM --alpha 1 --fanouts 20,20 --train-batches 10 \
   --epochs 6 --val-events 4000 --test-events 4000 --no-attn-norm $common --save-dir $R/tta_plain $mb > $R/tta_plain.log 2>&1
 echo "tta_plain rc $? at $(el)s") &
for s in 0 1 2 3; do
  (timeout $left $PY examples/train_wikipedia.py --data $CM --alpha 1,0.5 --fanouts 20,20 --epochs $ep \
     --val-events 4000 --test-events 4000 --seed $s $common --save-dir $R/cm5_s$s $mb > $R/cm5_s$s.log 2>&1
   echo "cm5_s$s rc $? at $(el)s") &
done
(timeout $left $PY examples/train_wikipedia.py --alpha 1,0.5 --epochs $ep $common --save-dir $R/wiki5 $mb \
   > $R/wiki5.log 2>&1; echo "wiki5 rc $? at $(el)s") &
if [ "$DEV" = cuda ]; then
  (timeout $left $PY -m pytest -q -p no:cacheprovider tests/test_cuda.py tests/test_compile.py \
     tests/test_without_dgl.py > $R/tests.log 2>&1; echo "tests rc $? at $(el)s: $(tail -n 1 $R/tests.log)") &
fi
wait
echo "---- summary at $(el)s"
grep -h "val AP\|test AP\|epoch" $R/tta_*.log | tail -n 30
grep -h "transductive\|inductive |" $R/cm5_s*.log $R/wiki5.log | tail -n 40
grep -h "epoch [0-9]" $R/wiki5.log | cut -c1-120
