"""Grade submissions against the answer key (the command line is :mod:`labs.course.gradebook`).

For each submission :func:`grade_notebook`

1. reads the notebook (a missing, empty or corrupt file is ``invalid``: every exercise FAIL);
2. finds the lab's answer key (:mod:`labs.course.key`) and compares the submission's check cells
   with it: an exercise whose check cells are missing, changed, added or re-tagged is FAIL with
   status ``tampered`` and its checks are not run;
3. starts a fresh kernel in a :class:`~labs.course.sandbox.Sandbox` and runs the code cells top to
   bottom; at each check cell it runs the *key's* check through :mod:`labs.course.protect`, never
   the submission's cell;
4. stops at the per-cell limit (default 120 s) or the per-notebook limit (default 900 s): the kernel
   is killed and every exercise not yet checked is FAIL with status ``timeout``.

An exercise passes only when all of its check cells ran and passed; any other outcome (error,
timeout, not run, tampered, a forbidden reference called) is FAIL with its reason.  Nothing the
notebook prints or writes is read except the nonce-tagged result line of the grader's own check.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from labs.course.key import compare, find_key, load_key
from labs.course.notebooks import NotebookError, load_notebook
from labs.course.protect import check_snippet, definitions, parse_result, pass_lines
from labs.course.sandbox import Sandbox

__all__ = [
    "ExerciseResult",
    "NotebookResult",
    "GraderError",
    "CELL_TIMEOUT",
    "NOTEBOOK_TIMEOUT",
    "grade_notebook",
    "grade_notebooks",
]

CELL_TIMEOUT = 120  #: seconds a cell may run
NOTEBOOK_TIMEOUT = 900  #: seconds a whole submission may run
STATUSES = ("graded", "invalid", "timeout", "tampered")


class GraderError(RuntimeError):
    """The grader itself failed (no kernel could start): nobody's fault but the set-up's."""


@dataclass
class ExerciseResult:
    """One exercise of one notebook."""

    notebook: str
    exercise: int
    passed: bool
    error: str  #: why it failed ("" when passed)
    status: str = "graded"  #: graded, invalid, timeout or tampered
    verified: str = ""  #: the PASS line(s) of a passed exercise

    @property
    def message(self) -> str:
        return self.error if not self.passed else self.verified


@dataclass
class NotebookResult:
    """Everything graded in one notebook."""

    notebook: str
    exercises: list[ExerciseResult]
    failed_cells: dict[int, str] = field(default_factory=dict)  #: cell index -> error line
    executed_cells: int = 0
    check_cells: list[int] = field(default_factory=list)
    lab: str = ""
    status: str = "graded"
    isolation: str = ""  #: "" or what the sandbox could not isolate here

    @property
    def passed(self) -> bool:
        return all(e.passed for e in self.exercises) and not self.failed_cells


def _all_fail(path: str, key: dict | None, status: str, why: str, lab: str = "") -> NotebookResult:
    numbers = [int(n) for n in key["exercises"]] if key else [0]
    exercises = [ExerciseResult(path, n, False, why, status) for n in sorted(numbers)]
    return NotebookResult(path, exercises, lab=lab, status=status)


def grade_notebook(
    path: str | Path,
    key: dict[str, Any] | str | Path | None = None,
    *,
    cell_timeout: float = CELL_TIMEOUT,
    notebook_timeout: float = NOTEBOOK_TIMEOUT,
    key_dir: str | Path | None = None,
    isolate: bool = True,
    nb: Any = None,
    hide: tuple = (),
) -> NotebookResult:
    """Grade one submission in its own sandboxed kernel.

    Args:
        path: the submitted notebook.
        key: the answer key (a loaded dict or a key file); default: found by the lab number in
            the file name, in ``key_dir`` (default ``instructor/keys``).
        cell_timeout: seconds any one cell may run.
        notebook_timeout: seconds the whole notebook may run.
        isolate: use network and mount namespaces where available.
        nb: the notebook, if already read (a :class:`NotebookError` stands for an unreadable one).
        hide: more folders the kernel must not see (see :class:`~labs.course.sandbox.Sandbox`).

    Raises:
        NotebookError: no answer key could be found or read (nothing to grade against).
        GraderError: the kernel could not be started.
    """
    path_text = str(path)
    if key is None:
        key = find_key(path, key_dir)
    if not isinstance(key, dict):
        key = load_key(key)
    lab = key.get("lab", "")
    try:
        if isinstance(nb, NotebookError):
            raise nb
        nb = load_notebook(path) if nb is None else nb
    except NotebookError as err:
        return _all_fail(path_text, key, "invalid", f"invalid: {err}", lab)
    checks, tampered = compare(nb, key)
    refs = {int(n): ex.get("references", []) for n, ex in key["exercises"].items()}
    order = sorted((i, num, k) for num, cells in checks.items() for k, i in enumerate(cells))
    check_at = {i: (num, k) for i, num, k in order}
    outcome: dict[int, list[str]] = {num: [] for num in checks}  # errors per exercise
    verified: dict[int, list[str]] = {num: [] for num in checks}
    stopped: dict[int, tuple[str, str]] = {}  # exercise -> (status, why) when not run to the end
    failed: dict[int, str] = {}
    executed = 0
    prelude: list[str] = []
    box = Sandbox(isolate=isolate, hide=hide)
    try:
        box.start()
    except (RuntimeError, OSError) as err:
        box.close()
        raise GraderError(f"{path}: could not start a kernel to grade it: {err}") from err
    try:
        deadline = time.monotonic() + notebook_timeout
        halted = ""
        halted_status = "graded"
        for index, cell in enumerate(nb.cells):
            if cell.get("cell_type") != "code" or halted:
                if halted and index in check_at:
                    stopped.setdefault(check_at[index][0], (halted_status, halted))
                continue
            tagged = any(str(t).startswith("exercise-") for t in cell.metadata.get("tags", []))
            if index not in check_at and tagged:
                continue  # a check cell of a tampered exercise: never run the submission's copy
            left = deadline - time.monotonic()
            if left <= 0:
                halted, halted_status = (
                    f"not run: the notebook time limit of {notebook_timeout:g} s was reached "
                    f"before cell {index}",
                    "timeout",
                )
                if index in check_at:
                    stopped.setdefault(check_at[index][0], (halted_status, halted))
                continue
            limit = min(cell_timeout, left)
            if index in check_at:
                num, k = check_at[index]
                source = key["exercises"][str(num)]["checks"][k]["source"]
                code, nonce = check_snippet(
                    num, "\n".join([*prelude, source]), refs.get(num, []), box.package_dir
                )
                prelude.append(definitions(source))
                result = box.run(code, limit)
            else:
                result = box.run(cell.get("source", ""), limit)
            executed += 1
            if result.status == "timeout":
                why = (
                    f"timeout after {limit:g} s in cell {index}"
                    if limit == cell_timeout
                    else f"timeout: the notebook time limit of {notebook_timeout:g} s was "
                    f"reached in cell {index}"
                )
                failed[index] = why
                halted, halted_status = f"not run: {why}", "timeout"
                if index in check_at:
                    stopped.setdefault(check_at[index][0], ("timeout", why))
                continue
            if result.status == "died":
                why = f"the kernel died in cell {index} (it crashed or exited)"
                failed[index] = why
                halted = f"not run: {why}"
                if index in check_at:
                    stopped.setdefault(check_at[index][0], ("graded", why))
                continue
            if index not in check_at:
                if result.status == "error":
                    failed[index] = result.error
                continue
            verdict = parse_result(result.stdout, nonce)
            if result.status != "ok" or verdict is None:
                why = (
                    result.error or "the check reported no result (was the grader's code replaced?)"
                )
                outcome[num].append(why)
            elif not verdict["ok"]:
                outcome[num].append(verdict["error"] or "the check failed")
            else:
                verified[num].extend(pass_lines(result.stdout))
            if outcome[num] and index not in failed:
                failed[index] = outcome[num][-1]
    finally:
        isolation = box.isolation
        box.close()
    exercises = []
    for n in sorted(int(n) for n in key["exercises"]):
        if n in tampered:
            exercises.append(ExerciseResult(path_text, n, False, tampered[n], "tampered"))
        elif n in stopped and not outcome[n]:
            status, why = stopped[n]
            exercises.append(ExerciseResult(path_text, n, False, why, status))
        elif outcome[n]:
            exercises.append(ExerciseResult(path_text, n, False, outcome[n][0]))
        else:
            exercises.append(
                ExerciseResult(path_text, n, True, "", verified=" | ".join(verified[n]))
            )
    statuses = {e.status for e in exercises}
    status = next((s for s in ("tampered", "timeout") if s in statuses), "graded")
    return NotebookResult(
        path_text, exercises, failed, executed, [i for i, _, _ in order], lab, status, isolation
    )


def grade_notebooks(
    paths: list[str | Path],
    timeout: float = CELL_TIMEOUT,
    *,
    notebook_timeout: float = NOTEBOOK_TIMEOUT,
    jobs: int = 1,
    key: str | Path | None = None,
    key_dir: str | Path | None = None,
    isolate: bool = True,
    on_done=None,
) -> list[NotebookResult]:
    """Grade several submissions, ``jobs`` at a time, each in its own kernel; results in order.

    Every notebook is read before any kernel starts, and the kernels cannot see the submissions'
    folders (where namespaces are available), so no submission can read or rewrite another.  A
    submission for which no key is found is ``invalid`` (the others are still graded);
    ``on_done(result)`` is called as each one finishes (for progress bars).
    """
    loaded: dict[str, Any] = {}
    for p in paths:
        try:
            loaded[str(p)] = load_notebook(p)
        except NotebookError as err:
            loaded[str(p)] = err
    hide = tuple(sorted({str(Path(p).resolve().parent) for p in paths}))

    def one(p: str | Path) -> NotebookResult:
        try:
            result = grade_notebook(
                p,
                key,
                cell_timeout=timeout,
                notebook_timeout=notebook_timeout,
                key_dir=key_dir,
                isolate=isolate,
                nb=loaded[str(p)],
                hide=hide,
            )
        except NotebookError as err:
            result = _all_fail(str(p), None, "invalid", f"invalid: {err}")
        if on_done is not None:
            on_done(result)
        return result

    if jobs <= 1 or len(paths) <= 1:
        return [one(p) for p in paths]
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        return list(pool.map(one, paths))
