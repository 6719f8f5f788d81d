#!/usr/bin/env bash
# Round 10, second device call (issue 11): data-parallel throughput on the 16 CPU cores,
# weak scaling (200 events per rank) at 1,4,8,16 processes, then strong scaling (global
# batch 200) at 8 and 16 in the same lease.  JSON files come back under $OUT.
# Dry run: PY=.venv/bin/python OUT=/tmp/r10bdry R10B_PROCS=1,2 R10B_STRONG=2 bash .gpuscripts/r10b.sh
set -u
cd "$(dirname "$0")/.."
PY=${PY:-python3}
OUT=${OUT:-/tmp/r10bout}; mkdir -p $OUT
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
nproc; $PY -c 'import torch; print("torch", torch.__version__)'
$PY setup.py --quiet build_ext --inplace > $OUT/build.log 2>&1; echo "build rc $? at $(el)s"
tail="--data-dir .gpudata --no-download --max-batches 20"
timeout 150 $PY examples/benchmark_distributed.py throughput --procs ${R10B_PROCS:-1,4,8,16} \
  --events-per-proc 200 --json $OUT/weak.json -- $tail 2>&1 | grep -v Warning
echo "weak done at $(el)s"
timeout 70 $PY examples/benchmark_distributed.py throughput --procs ${R10B_STRONG:-8,16} \
  --json $OUT/strong.json -- $tail 2>&1 | grep -v Warning
echo "strong done at $(el)s"
