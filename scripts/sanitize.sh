#!/usr/bin/env bash
# `make sanitize`: the extension built with AddressSanitizer + UndefinedBehaviorSanitizer
# into build/sanitize (the regular tbdfs_dgl/_C*.so is untouched), then the C++-facing
# tests run against it.  TBDFS_EXT_DIR makes `tbdfs_dgl._C` resolve to the sanitized
# build; TBDFS_NO_DGL=1 keeps DGL out of the process (its own library trips ASan) and
# turns the tests that need it into skips (tests/conftest.py).  Any report fails the run.
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PY:-.venv/bin/python}
BUILD=build/sanitize
start=$(date +%s)

pyabs="$(cd "$(dirname "$PY")" && pwd)/$(basename "$PY")"  # the venv's, not what it links to
pybind11_dir=$("$PY" -c 'import pybind11; print(pybind11.get_cmake_dir())')
generator=()
if "$PY" -c 'import ninja' 2>/dev/null || command -v ninja >/dev/null 2>&1; then
  generator=(-G Ninja)
  export PATH="$(dirname "$PY"):$PATH"  # the venv's ninja
fi
flags="-O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all"
# A build folder configured with another python or build tool is started afresh.
if [ -f "$BUILD/CMakeCache.txt" ]; then
  make_prog=$(sed -n 's/^CMAKE_MAKE_PROGRAM:[A-Z]*=//p' "$BUILD/CMakeCache.txt")
  py_prog=$(sed -n 's/^Python_EXECUTABLE:[A-Z]*=//p' "$BUILD/CMakeCache.txt")
  if [ ! -x "$make_prog" ] || [ "$py_prog" != "$pyabs" ]; then rm -rf "$BUILD"; fi
fi
if [ ! -f "$BUILD/CMakeCache.txt" ]; then
  cmake -S . -B "$BUILD" "${generator[@]}" -DCMAKE_BUILD_TYPE=Debug \
    -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_SHARED_LINKER_FLAGS="-fsanitize=address,undefined" \
    -DCMAKE_LIBRARY_OUTPUT_DIRECTORY="$PWD/$BUILD/ext" \
    -DPython_EXECUTABLE="$pyabs" -Dpybind11_DIR="$pybind11_dir" >/dev/null
fi
cmake --build "$BUILD" -j "${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}" >/dev/null
echo "sanitize: built $(ls "$BUILD"/ext/_C*.so) in $(( $(date +%s) - start )) s" >&2

# ASan must be the first library loaded into python (not instrumented itself), and
# libstdc++ must be there when it starts, or its __cxa_throw interceptor finds nothing to
# forward to and aborts on the first C++ exception.
asan=$(${CXX:-g++} -print-file-name=libasan.so)
stdcxx=$(${CXX:-g++} -print-file-name=libstdc++.so.6)
export LD_PRELOAD="$asan:$stdcxx${LD_PRELOAD:+:$LD_PRELOAD}"
asan_opts="detect_leaks=0:abort_on_error=1:halt_on_error=1:strict_string_checks=1"
export ASAN_OPTIONS="$asan_opts:check_initialization_order=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
export TBDFS_EXT_DIR="$PWD/$BUILD/ext" TBDFS_NO_DGL=1 OMP_NUM_THREADS=1
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
"$PY" -m pytest -q -p no:cacheprovider tests/test_graph.py tests/test_sampler.py \
  tests/test_reliability.py tests/test_sampler_differential.py tests/test_strategy.py \
  tests/test_append.py tests/test_distributed.py tests/test_leaf_merge.py \
  tests/test_gathered_scores.py tests/test_path_attention.py tests/test_simd.py "$@"
"$PY" - <<'PY'
import tbdfs_dgl._C as C, os
assert os.path.dirname(C.__file__) == os.environ["TBDFS_EXT_DIR"], C.__file__
print("sanitize: tests ran against", C.__file__)
PY
echo "sanitize: done in $(( $(date +%s) - start )) s" >&2
