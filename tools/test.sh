#!/usr/bin/env bash
# Run every test: set up (tools/setup.sh), lint and format-check with ruff, then pytest — unit
# tests, each lab graded as solution and as student notebook, the release/grade tools, the book
# build (warnings are errors) and the offline browser test.
# Usage: bash tools/test.sh [extra pytest arguments]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash tools/setup.sh
# The browser test needs Debian's chromium; install it when we may (root with apt), else the test
# says why it is skipped (and fails instead under CI=true).
if ! command -v chromium >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  echo "test: installing chromium (Debian package) for the browser test"
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
    || echo "test: could not install chromium"
fi
.venv/bin/ruff check .
.venv/bin/ruff format --check .
export PYTHONHASHSEED=0
unset MPLBACKEND  # kernels must keep the inline matplotlib backend, or figures vanish from pages
.venv/bin/python -m pytest "$@"
