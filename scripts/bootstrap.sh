#!/usr/bin/env bash
# Creates .venv with the pinned environment (requirements/dev.txt) and builds the C++
# extension, each only when missing or out of date.  Every README command calls this first.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=${TBDFS_VENV:-.venv}
PY=${PYTHON:-}
if [ -z "$PY" ]; then
  if command -v python3.11 >/dev/null 2>&1; then PY=python3.11; else PY=python3; fi
fi

stamp="$VENV/.requirements.sha256"
want=$(sha256sum requirements/dev.txt | cut -d' ' -f1)
if [ ! -x "$VENV/bin/python" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  version=$("$PY" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
  if [ "$version" != "3.11" ]; then
    echo "bootstrap: the pinned set (dgl 2.1.0 + torch 2.2.1) is tested on Python 3.11;" >&2
    echo "bootstrap: '$PY' is Python $version. Set PYTHON=/path/to/python3.11." >&2
    exit 1
  fi
  echo "bootstrap: creating $VENV from requirements/dev.txt (torch's CUDA wheel: ~2.8 GB download, a few minutes)" >&2
  "$PY" -m venv "$VENV"
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade "pip<25"
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -r requirements/dev.txt
  echo "$want" > "$stamp"
fi

# Rebuild the extension when any C++ source or the build files are newer than it.
so=$(ls tbdfs_dgl/_C*.so 2>/dev/null | head -n1 || true)
if [ -z "$so" ] || [ -n "$(find csrc CMakeLists.txt setup.py -newer "$so" -print -quit)" ]; then
  echo "bootstrap: building tbdfs_dgl._C" >&2
  "$VENV/bin/python" setup.py --quiet build_ext --inplace >/dev/null
fi
