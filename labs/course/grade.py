"""Grade submissions against the answer key (the command line is :mod:`labs.course.gradebook`).

For each submission :func:`grade_notebook`

1. reads the notebook (a missing, empty or corrupt file, or cells of the wrong types, is
   ``invalid``: every exercise FAIL);
2. compares the submission's check cells with the key (:mod:`labs.course.key`): an exercise whose
   check cells are missing, changed, added or re-tagged is FAIL with status ``tampered`` and its
   checks are not run;
3. takes the lab's reference run (:mod:`labs.course.reference`: the key's solution, run once in a
   trusted kernel, recorded every expected value);
4. starts a sealed kernel (:class:`~labs.course.sandbox.Sandbox`) and runs the code cells top to
   bottom; at each check cell it sends the *key's* check, rewritten so that only the got values are
   computed (:mod:`labs.course.protect`), never the submission's cell, and judges the values it
   gets back in this process (:func:`labs.course.verdict.judge`);
5. stops at the per-cell limit (default 120 s), the per-notebook limit (default 900 s) or the
   output limit: the kernel and all it started are killed, and every exercise not yet checked is
   FAIL with status ``timeout`` (``invalid`` for a flood of output).

An exercise passes only when all of its check cells ran and every assertion held on the values
the kernel returned; any other outcome (error, timeout, not run, tampered, a forbidden reference
called, a value that is not plain data) is FAIL with its reason; an exercise whose ``needs=`` are
missing where the reference ran is ``not applicable``.  Nothing the notebook prints decides a
grade.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from labs.course.key import compare, find_key, load_key
from labs.course.notebooks import NotebookError, load_notebook
from labs.course.protect import check_snippet, definitions, parse_result
from labs.course.reference import (
    CELL_TIMEOUT,
    NOTEBOOK_TIMEOUT,
    GraderError,
    Reference,
    reference_run,
)
from labs.course.results import ExerciseResult, NotebookResult, all_fail
from labs.course.sandbox import Sandbox, cores
from labs.course.verdict import judge

__all__ = ["grade_notebook", "grade_notebooks"]


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
    reference: Reference | None = None,
) -> NotebookResult:
    """Grade one submission in its own sandboxed kernel.

    Args:
        path: the submitted notebook.
        key: the answer key (a loaded dict or a key file); default: found by the lab number in
            the file name, in ``key_dir`` (default ``instructor/keys``).
        cell_timeout: seconds any one cell may run.
        notebook_timeout: seconds the whole notebook may run.
        isolate: use the namespaces of the sandbox where available.
        nb: the notebook, if already read (a :class:`NotebookError` stands for an unreadable one).
        hide: more folders the kernel must not see (see :class:`~labs.course.sandbox.Sandbox`).
        reference: the key's recorded run (:func:`reference_run`); computed when not given.

    Raises:
        NotebookError: no answer key could be found or read (nothing to grade against).
        GraderError: a kernel could not be started.
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
        return all_fail(path_text, key, "invalid", f"invalid: {err}", lab)
    if reference is None:
        reference = reference_run(
            key, cell_timeout=cell_timeout, notebook_timeout=notebook_timeout, isolate=isolate
        )
    checks, tampered = compare(nb, key)
    refs = {int(n): ex.get("references", []) for n, ex in key["exercises"].items()}
    order = sorted((i, num, k) for num, cells in checks.items() for k, i in enumerate(cells))
    check_at = {i: (num, k) for i, num, k in order}
    outcome: dict[int, list[str]] = {num: [] for num in checks}  # errors per exercise
    verified: dict[int, list[str]] = {num: [] for num in checks}
    invalid: dict[int, str] = {}  # exercise -> the key's own run failed (not the student's fault)
    stopped: dict[int, tuple[str, str]] = {}  # exercise -> (status, why) when not run to the end
    failed: dict[int, str] = {}
    executed = 0
    prelude: list[str] = []
    na = tuple(sorted(reference.not_applicable))
    box = Sandbox(isolate=isolate, hide=hide)
    try:
        box.start()
    except (RuntimeError, OSError) as err:
        box.close()
        raise GraderError(f"{path}: could not start a kernel to grade it: {err}") from err
    try:
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
            left = notebook_timeout - box.clock()  # the submission's own time, not a neighbour's
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
                if num in reference.not_applicable:
                    prelude.append(definitions(source))
                    continue
                code, nonce = check_snippet(
                    "\n".join([*prelude, source]), refs.get(num, []), box.package_dir,
                    keep=reference.keep, not_applicable=na,
                )  # fmt: skip
                prelude.append(definitions(source))
                result = box.run(code, limit)
            else:
                result = box.run(cell.get("source", ""), limit)
            executed += 1
            if result.status in ("timeout", "flood"):
                why = (
                    result.error
                    if result.status == "flood"
                    else f"timeout after {limit:g} s in cell {index}"
                    if limit == cell_timeout
                    else f"timeout: the notebook time limit of {notebook_timeout:g} s was "
                    f"reached in cell {index}"
                )
                failed[index] = why
                halted_status = "timeout" if result.status == "timeout" else "invalid"
                halted = f"not run: {why}"
                if index in check_at:
                    stopped.setdefault(check_at[index][0], (halted_status, why))
                continue
            if result.status == "died":
                why = f"the kernel died in cell {index} (it crashed, exited or ran out of memory)"
                failed[index] = why
                halted = f"not run: {why}"
                if index in check_at:
                    stopped.setdefault(check_at[index][0], ("graded", why))
                continue
            if index not in check_at:
                if result.status == "error":
                    failed[index] = result.error
                continue
            _judge_cell(
                reference, (num, k), parse_result(result.stdout, nonce), result.error,
                outcome, verified, invalid,
            )  # fmt: skip
            if outcome[num] and index not in failed:
                failed[index] = outcome[num][-1]
    finally:
        isolation = box.isolation
        box.close()
    exercises = []
    for n in sorted(int(n) for n in key["exercises"]):
        if n in tampered:
            exercises.append(ExerciseResult(path_text, n, False, tampered[n], "tampered"))
        elif n in reference.not_applicable:
            why = f"N/A exercise {n}: {reference.not_applicable[n]}"
            exercises.append(ExerciseResult(path_text, n, False, why, "not applicable"))
        elif n in invalid:
            exercises.append(ExerciseResult(path_text, n, False, invalid[n], "invalid"))
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
    if halted and halted_status == "invalid":  # a flood of output (not an answer-key problem)
        status = "invalid"
    return NotebookResult(
        path_text, exercises, failed, executed, [i for i, _, _ in order], lab, status, isolation
    )


def _judge_cell(reference, where, events, error, outcome, verified, invalid) -> None:
    """Record the verdicts of one check cell (``where`` = (exercise, k))."""
    num = where[0]
    if where in reference.problems or where not in reference.events:
        why = reference.problems.get(where, "the key's own run recorded nothing")
        invalid[num] = f"not graded: {why} (an answer-key problem, not the student's)"
        return
    if events is None:
        outcome[num].append(error or "the check reported no result (did the kernel's output "
                            "get redirected or the grader's code replaced?)")  # fmt: skip
        return
    try:
        violation = next(
            (ev[1] for ev in events if isinstance(ev, list) and ev[:1] == ["violation"]), None
        )
        verdicts = judge(reference.events[where], events)
    except Exception as err:  # noqa: BLE001 - malformed results from the kernel: that one FAILs
        outcome[num].append(f"the check's results from the kernel are malformed ({err!r:.80})")
        return
    for v in verdicts:
        n = v.number or num
        if v.status == "key":
            invalid[n] = f"not graded: {v.message} (an answer-key problem, not the student's)"
        elif violation is not None:
            outcome.setdefault(n, []).append(
                f"CheckFailure: Exercise {n} -- calls the reference implementation {violation}, "
                "which this exercise asks you to write yourself"
            )
        elif v.status == "fail":
            outcome.setdefault(n, []).append(v.message)
        elif v.status == "pass":
            verified.setdefault(n, []).append(v.message)


def grade_notebooks(
    paths: list[str | Path],
    timeout: float = CELL_TIMEOUT,
    *,
    notebook_timeout: float = NOTEBOOK_TIMEOUT,
    jobs: int = 1,
    key: str | Path | dict | None = None,
    key_dir: str | Path | None = None,
    isolate: bool = True,
    on_done=None,
) -> list[NotebookResult]:
    """Grade several submissions, ``jobs`` at a time, each in its own kernel; results in order.

    Every notebook and key is read, and every lab's reference run made, before any submission's
    kernel starts; the kernels cannot see the submissions' folders (where namespaces are
    available), so no submission can read or rewrite another.  A submission for which no key is
    found is ``invalid`` (the others are still graded); ``on_done(result)`` is called as each one
    finishes (for progress bars).
    """
    jobs = max(1, min(jobs, cores()))  # each kernel has a core (labs.course.sandbox)
    loaded: dict[str, Any] = {}
    keys: dict[str, Any] = {}
    for p in paths:
        try:
            loaded[str(p)] = load_notebook(p)
        except NotebookError as err:
            loaded[str(p)] = err
        try:
            k = key if key is not None else find_key(p, key_dir)
            keys[str(p)] = k if isinstance(k, dict) else load_key(k)
        except NotebookError as err:
            keys[str(p)] = err
    hide = tuple(sorted({str(Path(p).resolve().parent) for p in paths}))
    labs = {k["lab"]: k for k in keys.values() if isinstance(k, dict)}

    def reference(k: dict) -> Reference:
        return reference_run(
            k, cell_timeout=timeout, notebook_timeout=notebook_timeout, isolate=isolate
        )

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:  # every lab's, before any student's
        references = dict(zip(labs, pool.map(reference, labs.values()), strict=True))

    def one(p: str | Path) -> NotebookResult:
        k = keys[str(p)]
        if isinstance(k, NotebookError):
            result = all_fail(str(p), None, "invalid", f"invalid: {k}")
        else:
            try:
                result = grade_notebook(
                    p, k, cell_timeout=timeout, notebook_timeout=notebook_timeout,
                    isolate=isolate, nb=loaded[str(p)], hide=hide,
                    reference=references[k["lab"]],
                )  # fmt: skip
            except GraderError:
                raise
            except Exception as err:  # noqa: BLE001 - one notebook never stops the class
                why = f"invalid: the grader could not grade this notebook ({err!r:.200})"
                result = all_fail(str(p), k, "invalid", why, k.get("lab", ""))
        if on_done is not None:
            on_done(result)
        return result

    if jobs <= 1 or len(paths) <= 1:
        return [one(p) for p in paths]
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        return list(pool.map(one, paths))
