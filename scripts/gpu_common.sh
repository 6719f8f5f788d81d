# Sourced by the GPU-machine scripts (gpu_check.sh, gpu_full_protocol.sh): the environment,
# a timed `step` logger, and `machine_and_build`, which prints the machine and builds the
# extension in place (build_rc holds its exit status, the log goes to $OUT/build.log).
# Expects PY and OUT to be set and the current folder to be the repository root.
mkdir -p "$OUT"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
export PYTHONUNBUFFERED=1
t0=$(date +%s)
step() { echo "== $(( $(date +%s) - t0 ))s: $*" >&2; }

machine_and_build() {
  step "machine"
  nvidia-smi -L >&2 || true
  # The CPU topology (threads per core, sockets): it decides how N processes share the cores.
  lscpu 2>/dev/null | grep -E '^(Model name|CPU\(s\)|Thread\(s\) per core|Core\(s\) per socket|Socket\(s\)|NUMA node\(s\)|L3 cache)' >&2 || true
  $PY -c 'import sys, torch, numpy; print(sys.version.split()[0], "torch", torch.__version__, "numpy", numpy.__version__, "cuda", torch.cuda.is_available())' >&2
  step "build the extension"
  $PY setup.py --quiet build_ext --inplace >"$OUT/build.log" 2>&1
  build_rc=$?
  [ $build_rc -eq 0 ] || tail -n 30 "$OUT/build.log" >&2
}
