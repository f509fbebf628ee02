"""Gradescope: the run that grades ``/autograder/submission`` into ``results.json``.

``labs-grade --gradescope ROOT`` (:func:`run`, what a bundle's ``run_autograder`` runs:
:mod:`labs.course.bundle`) grades the notebook in ``ROOT/submission`` against the bundle's key and
writes ``ROOT/results/results.json`` in the format of Gradescope's autograder specification
(https://gradescope-autograders.readthedocs.io/en/latest/specs/): one test per exercise with
``score``, ``max_score`` (the key's points), ``status``, ``output`` (the feedback line
``labs-grade`` prints, escaped: :func:`labs.course.feedback.feedback_line`) and ``visibility``; at
the top the total ``score``, ``execution_time``, an ``output`` summary (with the protections that
are off where the container forbids namespaces), ``visibility`` and ``stdout_visibility``. A
missing, unreadable or ambiguous submission is a result (every exercise 0 points, saying why),
never a crash; only a grader failure (no kernel can start) exits 3 without ``results.json``, which
Gradescope reports as an autograder error rather than a grade. Before it writes ``results.json``
the run kills whatever the submission left running (it adopts orphaned processes), and where the
kernel could read files it removes the key from the container first. ``ROOT`` is
``/autograder`` on Gradescope; tests run the same layout under a temporary folder.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

from labs.course.bundle import CELL_TIMEOUT, CONFIG, NOTEBOOK_TIMEOUT
from labs.course.feedback import clean, escape, feedback_line
from labs.course.gradefile import write_atomic
from labs.course.notebooks import NotebookError
from labs.course.points import key_points
from labs.course.results import ExerciseResult, all_fail
from labs.course.submissions import walk

__all__ = ["find_submission", "results", "run"]


def find_submission(folder: Path, lab: str) -> Path | str:
    """The notebook to grade in ``folder``, or why there is none (a sentence for the student).

    ``<lab>.ipynb`` anywhere in the upload wins; else the one notebook whose name has the lab's
    number; else the only notebook. Hidden folders, ``__MACOSX``, symbolic links and folders
    deeper than :data:`labs.course.submissions.MAX_DEPTH` are skipped.
    """
    found, _ = walk(folder, skip=(".", "__MACOSX"))  # never recursive: any depth of folders
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
    visibility: str = "visible", protections_off: list[str] | None = None,
) -> dict[str, Any]:  # fmt: skip
    """``results.json`` for one graded notebook (``result``), or for none (``why`` not).

    One test per exercise of the key: ``score`` and ``max_score`` from the key's points (0 and 0
    for an exercise that is not applicable here), ``status``, ``output`` (the feedback line that
    ``labs-grade`` prints) and ``visibility``; ``extra_data`` lists the sandbox's protections
    that are off where it ran (``protections_off``, empty when all are on).
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
                f"Protections off on this grader: "
                f"{clean(result.isolation.removeprefix('protections off here: '))}. The time, memory, "
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
        "extra_data": {"protections_off": sorted(protections_off or [])},
    }


def _adopt_orphans() -> bool:
    """Make this process adopt what the kernels leave behind (Linux ``PR_SET_CHILD_SUBREAPER``):
    a daemon that double-forks into its own session becomes our descendant, not init's."""
    if not sys.platform.startswith("linux"):
        return False
    import ctypes

    return ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0) == 0


def _descendants(pid: int) -> list[int]:
    found, todo = [], [pid]
    while todo:
        for task in Path(f"/proc/{todo.pop()}/task").glob("*"):
            try:
                kids = [int(c) for c in (task / "children").read_text().split()]
            except (OSError, ValueError):
                continue
            found += kids
            todo += kids
    return found


def _kill_leftovers() -> int:
    """SIGKILL every process still under this one once grading is over (none should be); how many
    there were. Stopped first, then killed, round after round, so a forking one cannot outrun it."""
    import os
    import signal

    killed: set[int] = set()
    for _ in range(100):
        while True:  # reap the dead (adopted orphans are our children now)
            try:
                if os.waitpid(-1, os.WNOHANG)[0] == 0:
                    break
            except ChildProcessError:
                break
        alive = [p for p in _descendants(os.getpid()) if not _zombie(p)]
        if not alive:
            break
        for sig in (signal.SIGSTOP, signal.SIGKILL):
            for p in alive:
                try:
                    os.kill(p, sig)
                except ProcessLookupError:
                    pass
        killed.update(alive)
        time.sleep(0.05)
    return len(killed)


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return True


def run(root: Path, *, isolate: bool = True, out=None) -> int:
    """Grade ``root/submission`` for Gradescope into ``root/results/results.json``.

    Returns 0 when ``results.json`` was written (whatever the grade), 2 when the bundle itself is
    broken (no config or key), 3 when the grader failed (no kernel could start, or
    ``results.json`` could not be written: none is left under that name, an autograder error).
    """
    from labs.course.grade import grade_notebooks
    from labs.course.key import load_key
    from labs.course.reference import GraderError
    from labs.course.sandbox import Sandbox

    out = out or sys.stdout
    t0 = time.monotonic()
    adopting = _adopt_orphans()
    source = root / "source"
    try:
        config = json.loads((source / CONFIG).read_text(encoding="utf-8"))
        key = load_key(source / config["key"])
    except (OSError, ValueError, KeyError, NotebookError) as err:
        print(f"error: the autograder bundle in {source} is broken: {escape(err)}", file=out)
        return 2
    visibility = config.get("visibility", "visible")
    box = Sandbox(isolate=isolate)  # not started: says which protections are off here
    isolation = box.isolation
    off = list(getattr(box, "protections_off", None) or (["filesystem"] if isolation else []))
    if "filesystem" in off:  # a kernel could read the key: it leaves the container first
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
    left = _kill_leftovers() if adopting else 0
    if left:  # before results.json is written: nothing of the submission's can rewrite it
        print(f"note: killed {left} process(es) the submission left running", file=out)
    payload = results(
        key, graded, why="" if graded else str(found), seconds=time.monotonic() - t0,
        visibility=visibility, protections_off=off,
    )  # fmt: skip
    target = root / "results" / "results.json"
    try:  # whatever the kernel left in results/, only this grader's file stands under the name
        target.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(target, json.dumps(payload, indent=1) + "\n")
    except OSError as err:
        print(f"error: cannot write {escape(target)}: {escape(err.strerror or err)}", file=out)
        if target.is_file():  # not this run's: a grade Gradescope must never read
            target.unlink(missing_ok=True)
        return 3
    print(payload["output"], file=out)
    print(f"results written to {escape(target)}", file=out)
    return 0
