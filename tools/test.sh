#!/usr/bin/env bash
# Run every test: set up (tools/setup.sh), lint and format-check with ruff, then pytest — unit
# tests, each lab graded as solution and as student notebook, the release/grade tools, the book
# build (warnings are errors) and the offline browser test.
# Usage: bash tools/test.sh [extra pytest arguments]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash tools/setup.sh
# Debian packages some tests use: chromium (the browser test) and redis-server (Chapter 6's shared
# rate limit). Install them when we may (root with apt); otherwise the browser test says why it is
# skipped (and fails instead under CI=true) and the Redis cells and test skip with one line.
missing=""
command -v chromium >/dev/null 2>&1 || missing="$missing chromium"
command -v redis-server >/dev/null 2>&1 || missing="$missing redis-server"
if [ -n "$missing" ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  echo "test: installing Debian packages:$missing"
  # shellcheck disable=SC2086
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/dev/null) \
    || echo "test: could not install$missing"
fi
.venv/bin/ruff check .
.venv/bin/ruff format --check .
export PYTHONHASHSEED=0
unset MPLBACKEND  # kernels must keep the inline matplotlib backend, or figures vanish from pages
# Two workers (the machine's two cores); tests that share one expensive fixture (the book build,
# the graded labs) carry an xdist_group mark and stay on one worker. PYTEST_WORKERS=0 runs serially.
.venv/bin/python -m pytest -n "${PYTEST_WORKERS:-2}" --dist loadgroup "$@"
