#!/usr/bin/env bash
# Build the book: set up (tools/setup.sh), execute every chapter and lab, and write HTML with
# Jupyter Book 1. Warnings are errors (-W, nitpicky -n) and so is a failing cell.
# Usage: bash tools/build-book.sh [--skip-setup]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
if [ "${1:-}" != "--skip-setup" ]; then bash tools/setup.sh; fi
export PYTHONHASHSEED=0
export IPYTHONDIR="$PWD/tools/ipython"  # kernel settings: HiDPI (retina) figures
unset MPLBACKEND  # kernels must keep the inline matplotlib backend, or figures vanish from pages
.venv/bin/jupyter-book build . --builder html -W -n --keep-going
echo
echo "The book is at: $(pwd)/_build/html/index.html"
