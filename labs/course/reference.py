"""The reference run: the key's own solution, run once per lab in a trusted sealed kernel.

Before any submission's kernel starts, :func:`reference_run` runs the solution's code cells
(stored in the answer key, :mod:`labs.course.key`) in a :class:`~labs.course.sandbox.Sandbox` with
the full ``labs`` package and, at every check cell and graded variant, the reference version of
the check (:mod:`labs.course.snippet`): every argument of every assertion is recorded as plain
data.  These are the expected values (and exception types, patterns, tolerances, facts) a
submission's values are compared with (:func:`labs.course.verdict.judge`); they never enter a
submission's kernel.  An exercise whose
``needs=`` are missing here is recorded as not applicable.  Runs are cached per key text within a
process, so grading a class runs each lab's solution once.
"""

from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import dataclass
from typing import Any

from labs.course.decode import parse_events
from labs.course.key import check_source
from labs.course.rewrite import rewrite
from labs.course.sandbox import Sandbox
from labs.course.snippet import MARK, check_snippet, definitions, given_preludes
from labs.course.unused import loaded_names

__all__ = ["CELL_TIMEOUT", "NOTEBOOK_TIMEOUT", "GraderError", "Reference", "reference_run"]

CELL_TIMEOUT = 120  #: seconds a cell may run
NOTEBOOK_TIMEOUT = 900  #: seconds a whole submission may run


class GraderError(RuntimeError):
    """The grader itself failed (no kernel could start): nobody's fault but the set-up's."""


@dataclass
class Reference:
    """What the key's own solution recorded at each check cell, in a trusted kernel."""

    events: dict[tuple[int, int], list]  #: (exercise, k) -> the recorder's events
    not_applicable: dict[int, str]  #: exercise -> why it cannot run here
    problems: dict[tuple[int, int], str]  #: check cells the key's own run could not record
    keep: set[str]  #: names other cells read (see :func:`labs.course.rewrite.rewrite`)


def _keep(key: dict[str, Any]) -> set[str]:
    """Names that code other than expected arguments reads: assignments to them always stay.

    The solution's plain cells run as they are in a submission's kernel; a check reads what its
    own student version still reads (another check's name may be one of them)."""
    plain = loaded_names([c["source"] for c in key["cells"] if "source" in c])
    checks = [check_source(key, *c["check"]) for c in key["cells"] if "check" in c]
    keep = set(plain)
    for _ in range(2):  # a name one check keeps may keep another check's assignment
        found = set(plain)
        for source in checks:
            try:
                found |= loaded_names([rewrite(source, True, keep)[0]])
            except SyntaxError:
                continue
        keep = found
    return keep


_CACHE: dict[tuple[str, bool], Reference] = {}
_LOCK = threading.Lock()
_LOCKS: dict[tuple[str, bool], threading.Lock] = {}


def reference_run(
    key: dict[str, Any],
    *,
    cell_timeout: float = CELL_TIMEOUT,
    notebook_timeout: float = NOTEBOOK_TIMEOUT,
    isolate: bool = True,
) -> Reference:
    """Run the key's solution once in a trusted sandboxed kernel and record every check's values.

    Raises:
        GraderError: the kernel could not start, or the key has no solution cells.
    """
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()
    with _LOCK:
        lock = _LOCKS.setdefault((digest, isolate), threading.Lock())
    with lock:  # one run per key, several keys at once
        if (digest, isolate) not in _CACHE:
            _CACHE[(digest, isolate)] = _run(key, cell_timeout, notebook_timeout, isolate)
        return _CACHE[(digest, isolate)]


def _run(key: dict[str, Any], cell_timeout: float, notebook_timeout: float, isolate: bool):
    if not key.get("cells"):
        raise GraderError(f"the answer key of {key.get('lab')} has no solution cells to run")
    keep = _keep(key)
    events: dict[tuple[int, int], list] = {}
    problems: dict[tuple[int, int], str] = {}
    na: dict[int, str] = {}
    prelude: list[str] = []
    given = given_preludes(key)
    box = Sandbox(isolate=isolate)
    try:
        box.start()
    except (RuntimeError, OSError) as err:
        box.close()
        raise GraderError(f"{key.get('lab')}: could not start the reference kernel: {err}") from err
    try:
        for c in key["cells"]:
            left = min(cell_timeout, notebook_timeout - box.clock())
            if "check" not in c:
                if left > 0 and box.alive():
                    box.run(c["source"], left)
                continue
            num, k = c["check"]
            source = check_source(key, num, k)
            if left <= 0 or not box.alive():
                problems[(num, k)] = "the key's own run stopped before this check (time limit)"
                continue
            if given.get((num, k)):  # as in a submission's run (labs.course.grade)
                box.run("\n".join(given[(num, k)]), left)
            code, nonce = check_snippet("\n".join([*prelude, source]), student=False, keep=keep)
            prelude.append(definitions(source))
            result = box.run(code, left)
            found = parse_events(result.stdout, MARK, nonce)
            if found is None:
                problems[(num, k)] = (
                    f"the key's own run of this check gave no result ({result.error})"
                )
                continue
            events[(num, k)] = found
            for ev in found:
                if ev and ev[0] == "na":
                    na[num] = str(ev[1])
    finally:
        box.close()
    return Reference(events, na, problems, keep)
