"""The cell the grader sends in place of a check cell: what the kernel computes, and nothing more.

The grader never executes a submission's check cells.  At each check cell's place it sends the
cell built by :func:`check_snippet`: the key's check, rewritten by :mod:`labs.course.rewrite` so
that a submission's kernel computes only the student's side of each assertion, run under
:mod:`labs.course.recorder` (with :mod:`labs.course.plaindata`, both sent as text), which prints
the values and their facts as plain data on one line tagged with a random nonce.  The trusted
reference run gets the full check (expected values included) in the same way.

Nothing the kernel prints decides a grade: :mod:`labs.course.verdict` compares the recorded values
with the reference run's.  The kernel cannot compute the expected side either: it is not in the
snippet, and the reference implementations that could compute it are missing from the kernel's
copy of ``labs`` (:mod:`labs.course.sealed_labs`).  A submission that rewrites the interpreter can
change what it reports about its own values, nothing else.
"""

from __future__ import annotations

import ast
import hashlib
import secrets
from pathlib import Path

from labs.course.rewrite import CHECKS_MODULES, rewrite
from labs.course.unused import parse_source

__all__ = ["check_snippet", "definitions", "MARK"]

#: The kernel-side code, read once when the grader starts (before any kernel could touch a file).
_HERE = Path(__file__).parent
_KERNEL_TEXT = (
    (_HERE / "plaindata.py").read_text(encoding="utf-8")
    + "\n"
    + (_HERE / "recorder.py").read_text(encoding="utf-8")
)
MARK = "labs-grade-result "

_KERNEL_CODE = r"""
A = ARGS
check_code = compile(A.pop("source"), "<labs-grade-check>", "exec")  # no text left to read
exec(
    compile(A.pop("recorder_source"), "<labs-grade-recorder>", "exec"),
    {"__name__": "__labs_grade_recorder__", "ARGS": A["recorder"], "USER_NS": USER_NS,
     "CHECK_CODE": check_code},
)
"""


def definitions(source: str) -> str:
    """The definitions of a check cell (functions, classes, imports, literal constants).

    Re-run before every later check so that a notebook cannot redefine a helper that a check
    cell defined and a later check calls.
    """
    try:
        tree = parse_source(source)
    except SyntaxError:
        return ""
    keep = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Import):
            keep.append(node)
        elif isinstance(node, ast.ImportFrom) and node.module not in CHECKS_MODULES:
            keep.append(node)
        elif isinstance(node, ast.Assign):
            try:
                ast.literal_eval(node.value)
            except ValueError:
                continue
            keep.append(node)
    return ast.unparse(ast.Module(body=keep, type_ignores=[])) if keep else ""


def given_preludes(key: dict) -> dict[tuple[int, int], list[str]]:
    """``{(exercise, k): definitions}`` of the lab's given cells that come before each check in
    the key (its ``"given"`` cells): re-run before that check, so that a submission cannot
    redefine the harness a check calls (a training loop, a kernel launcher) in its own copy of
    a given cell."""
    out: dict[tuple[int, int], list[str]] = {}
    seen: list[str] = []
    for cell in key.get("cells", []):
        if "check" in cell:
            out[(int(cell["check"][0]), int(cell["check"][1]))] = list(seen)
        elif cell.get("given") and (text := definitions(cell.get("source", ""))):
            seen.append(text)
    return out


def check_snippet(
    source: str,
    *,
    student: bool = True,
    keep: set[str] = frozenset(),
    not_applicable: tuple[int, ...] = (),
) -> tuple[str, str]:
    """``(code, nonce)``: the cell to execute in place of a check cell.

    Args:
        source: the key's check cell (with the definitions of earlier check cells before it).
        student: rewrite for a submission's kernel (only the student's values are computed) or,
            when ``False``, for the trusted reference run.
        keep: names other cells read (assignments to them are never dropped).
        not_applicable: exercises the reference run found not applicable here (skipped).
    """
    body, bind = rewrite(source, student, set(keep))
    nonce = secrets.token_hex(16)
    args = {
        "source": body,
        "recorder_source": _KERNEL_TEXT,
        "recorder": {
            "mode": "student" if student else "reference",
            "mark": MARK,
            "nonce": nonce,
            "na": [int(n) for n in not_applicable],
            "bind": bind,
            # the same for the reference run and every submission: the key's source decides it
            "seed": int(hashlib.sha256(source.encode("utf-8")).hexdigest()[:8], 16),
        },
    }
    code = (
        "import builtins as __labs_grade_builtins\n"
        "__labs_grade_builtins.exec(__labs_grade_builtins.compile("
        f"{_KERNEL_CODE!r}, '<labs-grade>', 'exec'), "
        "{'__name__': '__labs_grade__', 'USER_NS': __labs_grade_builtins.globals(), "
        f"'ARGS': {args!r}}})\n"
        "del __labs_grade_builtins\n"
    )
    return code, nonce
