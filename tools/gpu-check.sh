#!/usr/bin/env bash
# Run every chapter and every lab solution on a CUDA GPU, then the GPU tests, and write a report
# (gpu-check/report.md and report.json: device, driver, torch/CUDA/Triton versions, PASS/FAIL and
# seconds per page and per test). Without CUDA it says so in one line and exits 0.
# Usage: bash tools/gpu-check.sh [--quick] [--list] [--jobs N] [--out DIR] [--publish]
#   --quick    only the pages with GPU sections (and all GPU tests)
#   --list     print what would run, run nothing (works without a GPU)
#   --publish  also copy the report to book/appendix/gpu-report.txt (the appendix shows it)
# The interpreter: $PYTHON if set, else .venv/bin/python when its torch sees CUDA, else python3.
# It needs a CUDA build of torch, triton, and the packages of `pip install -e ".[book,test]"`;
# the repository is put on PYTHONPATH, so an installed `labs` is not required.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
py=${PYTHON:-}
if [ -z "$py" ]; then
  if [ -x .venv/bin/python ] && .venv/bin/python -c 'import sys, torch; sys.exit(not torch.cuda.is_available())' 2>/dev/null; then
    py=.venv/bin/python
  elif command -v python3 >/dev/null && python3 -c 'import torch' 2>/dev/null; then
    py=python3
  elif [ -x .venv/bin/python ]; then
    py=.venv/bin/python
  else
    echo "gpu-check: no Python with torch found (set PYTHON, or run bash tools/setup.sh)"
    exit 0
  fi
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
exec "$py" tools/gpu_check.py "$@"
