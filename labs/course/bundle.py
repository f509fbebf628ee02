"""A Gradescope autograder bundle for one lab: ``labs-release --gradescope DIR``.

Gradescope's autograder specification (https://gradescope-autograders.readthedocs.io/en/latest/specs/)
asks for a zip with ``setup.sh`` (run once, as root, when Gradescope builds the image) and
``run_autograder`` (run for every submission, in a fresh container, from ``/autograder``) at its
root; the zip is unpacked into ``/autograder/source``. :func:`write_bundle` writes, per lab,
``DIR/<lab>/`` and ``DIR/<lab>.zip`` holding

* ``setup.sh``: a virtual environment in ``/autograder/venv`` with torch pinned as the project
  pins it on a CPU (``torch==2.13.0`` from PyTorch's CPU index, no CUDA download) and the wheel of
  the ``labs`` package built from this checkout (:func:`build_wheel`), with the grader's extra;
* ``run_autograder``: ``labs-grade --gradescope "${AUTOGRADER_ROOT:-/autograder}"``
  (:func:`labs.course.gradescope.run`);
* the lab's answer key and ``labs-autograder.json`` (:data:`CONFIG`: key, visibility, time limits).
"""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from labs.course.gradefile import write_atomic
from labs.course.notebooks import REPO_ROOT, NotebookError

__all__ = [
    "VISIBILITIES",
    "CONFIG",
    "CELL_TIMEOUT",
    "NOTEBOOK_TIMEOUT",
    "build_wheel",
    "write_bundle",
]

VISIBILITIES = ("visible", "hidden", "after_due_date", "after_published")
CONFIG = "labs-autograder.json"
TORCH = "torch==2.13.0"  #: the project's CPU pin (tools/setup.sh)
CELL_TIMEOUT = 120
NOTEBOOK_TIMEOUT = 240  #: twice this (reference run + submission) fits Gradescope's 10 minutes

SETUP = """#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder image (Ubuntu, Python >= 3.10).
set -euo pipefail
cd "$(dirname "${{BASH_SOURCE[0]}}")"  # /autograder/source
ROOT="${{AUTOGRADER_ROOT:-/autograder}}"
TORCH_SPEC="${{TORCH_SPEC:-{torch}}}"
TORCH_INDEX="${{TORCH_INDEX:-https://download.pytorch.org/whl/cpu}}"
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3 python3-venv python3-pip \\
    util-linux >/dev/null
fi
python3 -m venv "$ROOT/venv"
pip=("$ROOT/venv/bin/python" -m pip install --quiet --disable-pip-version-check)
# torch alone first, from PyTorch's CPU index: the grader has no GPU, and PyPI's Linux wheel would
# bring gigabytes of CUDA libraries
"${{pip[@]}}" --index-url "$TORCH_INDEX" "$TORCH_SPEC"
# the labs package of this release with the grader's extra; torch named again so it stays pinned
"${{pip[@]}}" "$TORCH_SPEC" "./{wheel}[grade,triton]"
"$ROOT/venv/bin/labs-grade" --help >/dev/null
echo "setup.sh: ready ($("$ROOT/venv/bin/python" --version), $TORCH_SPEC)"
"""

RUN = """#!/usr/bin/env bash
# Gradescope runs this for every submission, in a fresh container, from /autograder. It grades
# the notebook in $ROOT/submission against the key ({key}) and writes $ROOT/results/results.json.
# AUTOGRADER_ROOT moves the whole layout (a test runs it under a temporary folder).
set -uo pipefail
ROOT="${{AUTOGRADER_ROOT:-/autograder}}"
exec "$ROOT/venv/bin/labs-grade" --gradescope "$ROOT"
"""


def build_wheel(dest: Path) -> Path:
    """The wheel of this checkout's ``labs`` package, built into ``dest`` (from a copy of the
    sources, so nothing is written into the checkout)."""
    if not (REPO_ROOT / "pyproject.toml").is_file():
        raise NotebookError(
            f"labs-release --gradescope builds the labs wheel from the repository checkout; "
            f"{REPO_ROOT / 'pyproject.toml'} is missing (run it from a clone of the book)"
        )
    dest.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="labs-wheel-") as tmp:
        src = Path(tmp) / "src"
        src.mkdir()
        for name in ("pyproject.toml", "README.md"):
            shutil.copy(REPO_ROOT / name, src / name)
        ignore = shutil.ignore_patterns("__pycache__", "*.egg-info")
        shutil.copytree(REPO_ROOT / "labs", src / "labs", ignore=ignore)
        cmd = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation"]
        done = subprocess.run(
            [*cmd, "-w", str(tmp), str(src)], capture_output=True, text=True, cwd=tmp
        )
        if done.returncode:
            raise NotebookError(f"could not build the labs wheel: {done.stderr[-2000:]}")
        (wheel,) = Path(tmp).glob("dlsys_labs-*.whl")
        target = dest / wheel.name
        shutil.copy(wheel, target)
    return target


def write_bundle(
    key_path: Path,
    out_dir: Path,
    wheel: Path,
    *,
    visibility: str = "visible",
    cell_timeout: float = CELL_TIMEOUT,
    notebook_timeout: float = NOTEBOOK_TIMEOUT,
) -> Path:
    """Write ``out_dir/<lab>/`` and ``out_dir/<lab>.zip`` (files at the zip's root); the zip's path."""
    if visibility not in VISIBILITIES:
        raise ValueError(f"visibility {visibility!r}: expected one of {', '.join(VISIBILITIES)}")
    lab = key_path.stem
    folder = out_dir / lab
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    shutil.copy(key_path, folder / key_path.name)
    shutil.copy(wheel, folder / wheel.name)
    config = {
        "key": key_path.name,
        "visibility": visibility,
        "timeout": cell_timeout,
        "notebook_timeout": notebook_timeout,
    }
    (folder / CONFIG).write_text(json.dumps(config, indent=1) + "\n", encoding="utf-8")
    (folder / "setup.sh").write_text(SETUP.format(torch=TORCH, wheel=wheel.name), encoding="utf-8")
    (folder / "run_autograder").write_text(RUN.format(key=key_path.name), encoding="utf-8")
    for name in ("setup.sh", "run_autograder"):
        (folder / name).chmod(0o755)
    archive = out_dir / f"{lab}.zip"
    data = io.BytesIO()
    with zipfile.ZipFile(data, "w", zipfile.ZIP_DEFLATED) as zf:
        for path in sorted(folder.iterdir()):
            info = zipfile.ZipInfo(path.name, date_time=(2020, 1, 1, 0, 0, 0))
            info.external_attr = (
                0o755 if path.name in ("setup.sh", "run_autograder") else 0o644
            ) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, path.read_bytes())
    write_atomic(archive, data.getvalue())  # an unpredictable temporary name, then a rename
    return archive
