"""Gradescope: an autograder bundle per lab, and the run that writes its ``results.json``.

Gradescope's autograder specification (https://gradescope-autograders.readthedocs.io/en/latest/specs/):
a zip with ``setup.sh`` (run once, as root, when Gradescope builds the image; Ubuntu) and
``run_autograder`` (run for every submission, in a fresh container, from ``/autograder``) at its
root. The zip is unpacked into ``/autograder/source``; the student's files arrive in
``/autograder/submission``; ``run_autograder`` must leave ``/autograder/results/results.json``.

``labs-release --gradescope DIR`` writes, per lab, ``DIR/<lab>/`` and ``DIR/<lab>.zip`` holding
(:func:`write_bundle`):

* ``setup.sh``: a virtual environment in ``/autograder/venv`` with torch pinned as the project
  pins it on a CPU (``torch==2.13.0`` from PyTorch's CPU index, no CUDA download) and the wheel
  of the ``labs`` package built from this checkout, with the grader's extra;
* ``run_autograder``: ``labs-grade --gradescope "${AUTOGRADER_ROOT:-/autograder}"``;
* the lab's answer key and ``labs-autograder.json`` (key, visibility, time limits).

``labs-grade --gradescope ROOT`` (:func:`run`) grades the notebook in ``ROOT/submission`` against
the key and writes ``ROOT/results/results.json``: one test per exercise with ``score``,
``max_score`` (the key's points), ``status``, ``output`` (the feedback line ``labs-grade`` prints,
escaped: :func:`labs.course.feedback.feedback_line`) and ``visibility``; the top level has the total
``score``, ``execution_time``, an ``output`` summary (with the protections that are off where the
container forbids namespaces), ``visibility`` and ``stdout_visibility``. A missing, unreadable or
ambiguous submission is a result (every exercise 0 points, saying why), never a crash; only a
grader failure (no kernel can start) exits 3 without ``results.json``, which Gradescope reports as
an autograder error rather than a grade. ``AUTOGRADER_ROOT`` moves the whole layout (tests run
it under a temporary folder).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path
from typing import Any

from labs.course.feedback import clean, escape, feedback_line
from labs.course.notebooks import REPO_ROOT, NotebookError
from labs.course.points import key_points
from labs.course.results import ExerciseResult, all_fail

__all__ = [
    "VISIBILITIES", "CONFIG", "build_wheel", "write_bundle", "find_submission", "results", "run",
]  # fmt: skip

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
    tmp = archive.with_name(f".{archive.name}.tmp")
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as zf:
        for path in sorted(folder.iterdir()):
            info = zipfile.ZipInfo(path.name, date_time=(2020, 1, 1, 0, 0, 0))
            info.external_attr = (
                0o755 if path.name in ("setup.sh", "run_autograder") else 0o644
            ) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, path.read_bytes())
    tmp.replace(archive)
    return archive


def find_submission(folder: Path, lab: str) -> Path | str:
    """The notebook to grade in ``folder``, or why there is none (a sentence for the student).

    ``<lab>.ipynb`` anywhere in the upload wins; else the one notebook whose name has the lab's
    number; else the only notebook. Hidden folders, ``__MACOSX`` and symbolic links are skipped.
    """
    found = sorted(
        p
        for p in folder.rglob("*.ipynb")
        if not any(part.startswith((".", "__MACOSX")) for part in p.relative_to(folder).parts)
        and not p.is_symlink()
        and p.is_file()
    )
    if not found:
        return f"no notebook was submitted: upload {lab}.ipynb (your completed student notebook)"
    exact = [p for p in found if p.name == f"{lab}.ipynb"]
    number = lab.split("-")[0]
    named = [p for p in found if number in p.stem]
    for group in (exact, named, found):
        if len(group) == 1:
            return group[0]
    names = ", ".join(escape(p.relative_to(folder)) for p in found)
    return f"several notebooks were submitted ({names}) and none is named {lab}.ipynb: upload one"


def results(
    key: dict[str, Any], result=None, *, why: str = "", seconds: float = 0,
    visibility: str = "visible",
) -> dict[str, Any]:  # fmt: skip
    """``results.json`` for one graded notebook (``result``), or for none (``why`` not).

    One test per exercise of the key: ``score`` and ``max_score`` from the key's points (0 and 0
    for an exercise that is not applicable here), ``status``, ``output`` (the feedback line that
    ``labs-grade`` prints) and ``visibility``.
    """
    submitted = result is not None
    if not submitted:
        result = all_fail("", key, "invalid", why, key.get("lab", ""))
    points = key_points(key)
    by_number = {e.exercise: e for e in result.exercises}
    tests, score, possible = [], 0.0, 0.0
    for n in sorted(int(x) for x in key["exercises"]):
        what = clean(key["exercises"][str(n)].get("what", ""))
        e = by_number.get(n) or ExerciseResult(result.notebook, n, False, "not graded", "invalid")
        test: dict[str, Any] = {"name": f"Exercise {n}: {what}" if what else f"Exercise {n}",
                                "number": str(n)}  # fmt: skip
        if e.outcome == "N/A":
            test.update(score=0, max_score=0)
        else:
            earned = points[n] if e.passed else 0
            score, possible = score + earned, possible + points[n]
            test.update(
                score=earned, max_score=points[n], status="passed" if e.passed else "failed"
            )
        test.update(output=feedback_line(e), output_format="text", visibility=visibility)
        tests.append(test)
    passed = sum(t.get("status") == "passed" for t in tests)
    graded = sum("status" in t for t in tests)
    lines = [f"{clean(key.get('lab', ''))}: {passed} of {graded} exercises passed "
             f"({score:g} of {possible:g} points)."]  # fmt: skip
    if not submitted:
        lines.append(clean(why))
    else:
        lines.append(f"Graded: {escape(Path(result.notebook).name)} ({result.status}).")
        others = sorted(i for i in result.failed_cells if i not in result.check_cells)
        if others:
            lines.append(f"Cells that failed outside the checks: {', '.join(map(str, others))}.")
        if result.isolation:
            lines.append(
                f"Protections off on this grader: {clean(result.isolation)}. The time, memory, "
                "file and output limits still apply, and every verdict is made outside your "
                "kernel."
            )
    return {
        "score": score,
        "execution_time": int(round(seconds)),
        "output": "\n".join(lines),
        "output_format": "text",
        "test_output_format": "text",
        "test_name_format": "text",
        "visibility": visibility,
        "stdout_visibility": "hidden",
        "tests": tests,
    }


def run(root: Path, *, isolate: bool = True, out=None) -> int:
    """Grade ``root/submission`` for Gradescope into ``root/results/results.json``.

    Returns 0 when ``results.json`` was written (whatever the grade), 2 when the bundle itself is
    broken (no config or key), 3 when the grader failed (no ``results.json``: an autograder error).
    """
    from labs.course.grade import grade_notebooks
    from labs.course.key import load_key
    from labs.course.reference import GraderError
    from labs.course.sandbox import Sandbox

    out = out or sys.stdout
    t0 = time.monotonic()
    source = root / "source"
    try:
        config = json.loads((source / CONFIG).read_text(encoding="utf-8"))
        key = load_key(source / config["key"])
    except (OSError, ValueError, KeyError, NotebookError) as err:
        print(f"error: the autograder bundle in {source} is broken: {escape(err)}", file=out)
        return 2
    visibility = config.get("visibility", "visible")
    isolation = Sandbox(isolate=isolate).isolation
    if isolation:  # without namespaces a kernel could read the key: it leaves the container first
        print(f"note: {escape(isolation)}; removing the key from this container", file=out)
        (source / config["key"]).unlink(missing_ok=True)
    found = find_submission(root / "submission", key["lab"])
    graded = None
    if isinstance(found, Path):
        try:
            (graded,) = grade_notebooks(
                [found], config.get("timeout", CELL_TIMEOUT), key=key, isolate=isolate,
                notebook_timeout=config.get("notebook_timeout", NOTEBOOK_TIMEOUT),
            )  # fmt: skip
        except GraderError as err:
            print(f"error: the grader failed: {escape(err)}", file=out)
            return 3
        for e in graded.exercises:
            print("  " + feedback_line(e), file=out)
    payload = results(
        key, graded, why="" if graded else str(found), seconds=time.monotonic() - t0,
        visibility=visibility,
    )  # fmt: skip
    target = root / "results" / "results.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(".results.json.tmp")
    tmp.write_text(json.dumps(payload, indent=1) + "\n", encoding="utf-8")
    tmp.replace(target)
    print(payload["output"], file=out)
    print(f"results written to {escape(target)}", file=out)
    return 0
