#!/usr/bin/env bash
# Set up everything the book and the tests need, idempotently:
#   .venv/     a virtual environment with torch (pinned), the labs package (editable), the book's
#              and the tests' dependencies;
#   vendor/    MathJax and the ipywidgets embed manager, from the npm registry, served by the book
#              itself so that math and widgets render offline.
# Needs only python3 (>= 3.10, with venv and pip) and node/npm. Re-running is cheap: each step is
# skipped while its inputs (pyproject.toml, package-lock.json) are unchanged.
#
# Environment variables:
#   PYTHON       the interpreter to build the venv from (default: python3)
#   TORCH_SPEC   the torch requirement (default: torch==2.13.0; on this CPU machine that is the
#                CPU build on disk, never a multi-GB CUDA download)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

PYTHON=${PYTHON:-python3}
TORCH_SPEC=${TORCH_SPEC:-torch==2.13.0}

digest() { "$PYTHON" -c 'import hashlib,sys; print(hashlib.sha256(sys.stdin.buffer.read()).hexdigest())'; }

# --- Python -------------------------------------------------------------------------------
if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv with $("$PYTHON" --version 2>&1)"
  "$PYTHON" -m venv .venv
fi
want=$( (echo "$TORCH_SPEC"; cat pyproject.toml) | digest)
if [ "$(cat .venv/.dlsys-stamp 2>/dev/null)" != "$want" ]; then
  echo "setup: installing Python packages ($TORCH_SPEC, labs[book,test])"
  # torch is named in the same command so pip never resolves an unpinned (multi-GB CUDA) build.
  .venv/bin/python -m pip install --quiet --disable-pip-version-check "$TORCH_SPEC" -e ".[book,test]"
  .venv/bin/python -m ipykernel install --sys-prefix --name python3 --display-name "Python 3" >/dev/null
  echo "$want" > .venv/.dlsys-stamp
fi

# --- Front-end assets -----------------------------------------------------------------------
want=$(cat package.json package-lock.json tools/setup.sh | digest)
if [ "$(cat vendor/.dlsys-stamp 2>/dev/null)" != "$want" ]; then
  echo "setup: installing MathJax and the widget manager from the npm registry"
  npm ci --no-audit --no-fund --ignore-scripts --loglevel=error
  rm -rf vendor && mkdir -p vendor/widgets
  cp -r node_modules/mathjax/es5 vendor/mathjax
  cp node_modules/requirejs/require.js vendor/widgets/require.js
  find node_modules/@jupyter-widgets/html-manager/dist -maxdepth 1 -type f ! -name '*.map' \
    -exec cp {} vendor/widgets/ \;
  echo "$want" > vendor/.dlsys-stamp
fi
echo "setup: ready (.venv, vendor/)"
