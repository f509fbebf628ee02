"""Grade submissions against the answer key (the command line is :mod:`labs.course.gradebook`).

One direction, stage by stage: for each submission :func:`grade_notebook`

1. reads the notebook (a missing, empty or corrupt file, or cells of the wrong types, is
   ``invalid``: every exercise FAIL);
2. compares its check cells with the key and plans the run (:func:`labs.course.key.compare`,
   :func:`~labs.course.key.plan`): an exercise whose check cells are missing, changed, added or
   re-tagged is FAIL with status ``tampered`` and its checks are not run; every other check cell
   is replaced by the key's check, followed by the key's graded variants of that exercise; an
   exercise whose reference implementation the cells paste is FAIL
   (:mod:`labs.course.copied`, from the source text);
3. takes the lab's reference run (:mod:`labs.course.reference`: the key's solution, run once in a
   trusted kernel, recorded every expected value);
4. starts a sealed kernel (:class:`~labs.course.sandbox.Sandbox`) whose ``labs`` is the key's
   sealed copy (:mod:`labs.course.sealed_labs`: the forbidden references raise) and runs the plan
   top to bottom: the submission's code cells as they are, each check as the snippet of
   :mod:`labs.course.snippet` (only the student's values computed, returned as plain data);
5. judges each check's values in this process against the reference run's
   (:func:`labs.course.verdict.judge`) and tallies the verdicts (:class:`~labs.course.results.Tally`);
6. stops at the per-cell limit (default 120 s), the per-notebook limit (default 900 s) or the
   output limit: the kernel and all it started are killed, and every exercise not yet checked is
   FAIL with status ``timeout`` (``invalid`` for a flood of output).

An exercise passes only when all of its checks ran and every assertion held on the values the
kernel returned; any other outcome (error, timeout, not run, tampered, a forbidden reference
called, a value that is not plain data) is FAIL with its reason; an exercise whose ``needs=`` are
missing where the reference ran is ``not applicable``.  Nothing the notebook prints decides a
grade.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from labs.course.copied import copied_references
from labs.course.decode import parse_events
from labs.course.key import KEY_DIR, Step, compare, find_key, load_key, plan
from labs.course.notebooks import NotebookError
from labs.course.reference import (
    CELL_TIMEOUT,
    NOTEBOOK_TIMEOUT,
    GraderError,
    Reference,
    reference_run,
)
from labs.course.results import NotebookResult, Tally, all_fail
from labs.course.sandbox import Sandbox, cores
from labs.course.sealed_labs import seal
from labs.course.snippet import MARK, check_snippet, definitions, given_preludes
from labs.course.submissions import digest, load
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
    if key is None:
        key = find_key(path, key_dir)
    if not isinstance(key, dict):
        key = load_key(key)
    try:
        nb = load(path, digest(path)) if nb is None else nb
        if isinstance(nb, NotebookError):
            raise nb
    except NotebookError as err:
        return all_fail(str(path), key, "invalid", f"invalid: {err}", key.get("lab", ""))
    if reference is None:
        reference = reference_run(
            key, cell_timeout=cell_timeout, notebook_timeout=notebook_timeout, isolate=isolate
        )
    checks, tampered = compare(nb, key)
    steps = plan(nb, key, checks)
    tally = Tally(str(path), key, tampered, reference.not_applicable,
                  sorted(i for cells in checks.values() for i in cells))  # fmt: skip
    own = [(step.index, step.source) for step in steps if step.check is None]
    for num, why in copied_references(own, key).items():  # from the text, not from the kernel
        tally.fail(num, why)
    box = Sandbox(isolate=isolate, hide=hide, labs_root=seal(key))
    try:
        box.start()
    except (RuntimeError, OSError) as err:
        box.close()
        raise GraderError(f"{path}: could not start a kernel to grade it: {err}") from err
    try:
        _run(box, steps, reference, tally, cell_timeout, notebook_timeout)
    finally:
        isolation = box.isolation
        box.close()
    return tally.result(isolation)


def _run(
    box, steps: list[Step], reference: Reference, tally: Tally, cell_timeout, notebook_timeout
):
    """Run the plan in ``box``: each step to the end, a limit, or a dead kernel."""
    prelude: list[str] = []  # the definitions of the checks so far, re-run before each check
    given = given_preludes(tally.key)  # and those of the lab's given cells before it
    na = tuple(sorted(reference.not_applicable))
    for step in steps:
        num = step.check[0] if step.check else None
        if tally.halted:
            tally.not_run(num)
            continue
        left = notebook_timeout - box.clock()  # the submission's own time, not a neighbour's
        if left <= 0:
            tally.halt("timeout", f"the notebook time limit of {notebook_timeout:g} s was reached "
                       f"before cell {step.index}")  # fmt: skip
            tally.not_run(num)
            continue
        limit = min(cell_timeout, left)
        nonce = ""
        if step.check is None:
            result = box.run(step.source, limit)
        elif num in reference.not_applicable:
            prelude.append(definitions(step.source))
            continue
        else:
            if given.get(step.check):  # the key's harness, as is (not rewritten), then the check
                box.run("\n".join(given[step.check]), limit)
            code, nonce = check_snippet("\n".join([*prelude, step.source]), keep=reference.keep,
                                        not_applicable=na)  # fmt: skip
            prelude.append(definitions(step.source))
            result = box.run(code, limit)
        tally.executed += 1
        if result.status in ("timeout", "flood", "died"):
            why = {
                "flood": result.error,
                "died": f"the kernel died in cell {step.index} (it crashed, exited or ran out "
                "of memory)",
            }.get(result.status) or (
                f"timeout after {limit:g} s in cell {step.index}" if limit == cell_timeout
                else f"timeout: the notebook time limit of {notebook_timeout:g} s was reached in "
                f"cell {step.index}"
            )  # fmt: skip
            tally.cell_failed(step.index, why)
            status = {"timeout": "timeout", "flood": "invalid"}.get(result.status, "graded")
            tally.halt(status, why)
            tally.not_run(num)
            continue
        if step.check is None:
            if result.status == "error":
                tally.cell_failed(step.index, result.error)
            continue
        events = _scrub(parse_events(result.stdout, MARK, nonce), code)
        _judge(reference, step, events, _scrub_text(result.error, code), tally)


_WINDOW = 24  #: characters a student's message may share with the code the grader sent


def _scrub_text(text: str, code: str) -> str:
    """``text`` cut where it starts quoting ``code`` (the snippet the grader sent the kernel):
    the student's code can read that text in its kernel and raise it back as a message."""
    if not isinstance(text, str):
        return text
    for i in range(len(text) - _WINDOW + 1):
        if text[i : i + _WINDOW] in code:
            return text[:i] + "[the grader's check code, removed]"
    return text


def _scrub(events: list | None, code: str) -> list | None:
    """The kernel's events with the exception messages scrubbed (:func:`_scrub_text`)."""
    if events is None:
        return None
    return [
        [*ev[:2], _scrub_text(ev[2], code)] if isinstance(ev, list) and ev[:1] == ["error"]
        and len(ev) == 3 else ev
        for ev in events
    ]  # fmt: skip


def _hidden(key: dict, check: tuple[int, int]) -> tuple[int, int] | None:
    """``(j, of)`` when ``check`` is the j-th of the exercise's ``of`` graded variants."""
    ex = key["exercises"][str(check[0])]
    j = check[1] - len(ex["checks"]) + 1
    return (j, len(ex["graded"])) if j >= 1 else None


def _judge(reference: Reference, step: Step, events: list | None, error: str, tally: Tally):
    """Judge one check's recorded events against the reference run's, into the tally.  A graded
    variant's messages name it only (``hidden check 2 of 3 of exercise 4``): its inputs and
    expected values reach the instructor's JSON gradebook alone (:attr:`ExerciseResult.detail`)."""
    num = step.check[0]
    hidden = _hidden(tally.key, step.check)
    if step.check in reference.problems or step.check not in reference.events:
        why = reference.problems.get(step.check, "the key's own run recorded nothing")
        if hidden:
            tally.detail.setdefault(num, []).append(f"hidden check {hidden[0]}: {why}")
            why = f"hidden check {hidden[0]} of {hidden[1]} of exercise {num}: the key's run failed"
        tally.key_problem(num, why)
        return
    if events is None:
        tally.fail(num, error or "the check reported no result (did the kernel's output get "
                   "redirected or the grader's code replaced?)", hidden)  # fmt: skip
        tally.cell_failed(step.index, tally.errors[num][-1])
        return
    try:
        verdicts = judge(reference.events[step.check], events)
    except Exception as err:  # noqa: BLE001 - malformed results from the kernel: that one FAILs
        tally.fail(num, f"the check's results from the kernel are malformed ({err!r:.80})", hidden)
        return
    tally.verdicts(step.index, num, verdicts, hidden)


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

    Every notebook's size and SHA-256 are taken and every key is read, and every lab's reference
    run made, before any submission's kernel starts; each notebook is read when its turn comes
    (so the class is never all in memory) and graded only if it still has that digest. The
    kernels cannot see the submissions' folders (where namespaces are available), and where they
    could, a notebook another kernel rewrote is ``invalid``: no submission can change another's
    grade.  A notebook over :data:`~labs.course.submissions.NOTEBOOK_LIMIT` bytes is ``invalid`` without being read.  A submission for which no key is
    found is ``invalid`` (the others are still graded); ``on_done(result)`` is called as each one
    finishes (for progress bars).
    """
    jobs = max(1, min(jobs, cores()))  # each kernel has a core (labs.course.sandbox)
    loaded: dict[str, Any] = {}
    keys: dict[str, Any] = {}
    secret = {Path(key_dir or KEY_DIR)}  # the keys: a kernel that could read them fails to start
    for p in paths:
        loaded[str(p)] = digest(p)
        try:
            k = key if key is not None else find_key(p, key_dir)
            secret |= set() if isinstance(k, dict) else {Path(k).parent}
            keys[str(p)] = k if isinstance(k, dict) else load_key(k)
        except NotebookError as err:
            keys[str(p)] = err
    secret = {str(f.resolve()) for f in secret if f.is_dir()}
    hide = tuple(sorted({str(Path(p).resolve().parent) for p in paths} | secret))
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
                    isolate=isolate, nb=load(p, loaded[str(p)]), hide=hide,
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
