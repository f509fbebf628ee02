#!/usr/bin/env bash
# Run every test: set up (tools/setup.sh), lint and format-check with ruff, then pytest — unit
# tests, each lab graded as solution and as student notebook, the release/grade tools, the book
# build (warnings are errors) and the offline browser test — and, beside it, tools/compat.py (the
# labs on the lowest admitted versions and on Colab's).
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
# The labs where readers run them (tools/compat.py): every lab's solution and the emulator's
# tests on the lowest versions pyproject.toml admits and on Colab's, from the checkout's wheel, in
# environments and folders outside the repository (never the book build's; the environments are
# cached in ~/.cache/dlsys-compat across runs and clones). It runs beside pytest, its log comes at
# the end. COMPAT=0 skips it; with pytest arguments it runs only if COMPAT=1. What each part costs:
# tests/BUDGET.md.
compat_log=$(mktemp)
compat_pid=""
if [ "${COMPAT:-$([ $# -eq 0 ] && echo 1 || echo 0)}" = 1 ]; then
  # niced: pytest keeps the cores it needs, compat fills the time its workers wait
  nice -n 10 .venv/bin/python tools/compat.py >"$compat_log" 2>&1 &
  compat_pid=$!
fi
trap 'rm -f "$compat_log"; [ -n "$compat_pid" ] && kill "$compat_pid" 2>/dev/null || true' EXIT
.venv/bin/ruff check .
.venv/bin/ruff format --check .
export PYTHONHASHSEED=0
unset MPLBACKEND  # kernels must keep the inline matplotlib backend, or figures vanish from pages
# Two workers (the machine's two cores). Each test module runs whole on one worker (loadscope), so
# a module's expensive fixture (the book build, the graded labs) is made once; the longest modules
# are collected first (tests/conftest.py) and start first. (loadgroup's xdist_group marks do not
# group anything under pytest 9.2: the book was built, and the labs graded, twice per run.)
# PYTEST_WORKERS=0 runs serially.
status=0
pytest_log=$(mktemp)
.venv/bin/python -m pytest -n "${PYTEST_WORKERS:-2}" --dist loadscope --no-loadscope-reorder \
  --durations=25 "$@" | tee "$pytest_log" \
  || status=$?
if [ -n "$compat_pid" ]; then
  compat_status=0
  wait "$compat_pid" || compat_status=$?
  compat_pid=""
  cat "$compat_log"
  [ "$status" -ne 0 ] || status=$compat_status
  echo "pytest's result, again (the compat log above came after it):"
  grep -E "^=+ .*(passed|failed|error).* =+$" "$pytest_log" | tail -n 1 || true
fi
rm -f "$pytest_log"
exit "$status"
