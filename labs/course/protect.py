"""Run an instructor check inside a kernel, recording only; the verdict is the grader's.

The grader never executes a submission's check cells.  At each check cell's place it sends the
cell built by :func:`check_snippet`, which, inside the kernel,

1. arms a tripwire on the reference implementations the key forbids for this exercise: every
   function object sharing their code (aliases, ``from ... import ... as``, reloaded copies) is
   swapped for a trampoline that raises ``ReferenceUsed`` when the call comes from the
   submission's code (a frame whose code object is not one the grader compiled, whatever its file
   name), or from another thread unless ``labs`` itself made it;
2. runs the key's check, rewritten by :mod:`labs.course.verdict` so that only the got values are
   computed, under :mod:`labs.course.recorder`, which prints them as plain data on one line tagged
   with a random nonce;
3. disarms the tripwire.

Nothing the kernel prints decides a grade: the grader compares the recorded values with the ones
the trusted reference run recorded (:func:`labs.course.verdict.judge`).  A submission that
rewrites the interpreter can change what it reports about its own values, not the expected
values, which never enter its kernel, nor the comparison.
"""

from __future__ import annotations

import ast
import hashlib
import secrets
from pathlib import Path

from labs.course.rewrite import CHECKS_MODULES, rewrite
from labs.course.verdict import parse_events

__all__ = ["check_snippet", "definitions", "parse_result", "MARK"]

#: The recorder, read once when the grader starts (before any kernel could touch a file).
_RECORDER = Path(__file__).with_name("recorder.py").read_text(encoding="utf-8")
MARK = "labs-grade-result "

_KERNEL_CODE = r"""
import gc, json, os, sys, types

A = ARGS
check_code = compile(A["source"], "<labs-grade-check>", "exec")
CHECK_CODES = set()
todo = [check_code]
while todo:  # the check's code objects and those of the functions it defines
    c = todo.pop()
    CHECK_CODES.add(id(c))
    todo.extend(k for k in c.co_consts if isinstance(k, types.CodeType))
recorder_code = compile(A["recorder_source"], "<labs-grade-recorder>", "exec")
TRUSTED_CODES = set(CHECK_CODES)
todo = [recorder_code, sys._getframe(0).f_code]  # the recorder and this code (trip, trampolines)
while todo:
    c = todo.pop()
    TRUSTED_CODES.add(id(c))
    todo.extend(k for k in c.co_consts if isinstance(k, types.CodeType))
KEEP_ALIVE = [check_code, recorder_code]


class ReferenceUsed(BaseException):  # noqa: N818 - as in labs.course.checks
    pass

TRUSTED = tuple(
    os.path.join(os.path.realpath(p), "")
    for p in [A["package_dir"], *{sys.prefix, sys.base_prefix, sys.exec_prefix}]
)
violations = []


def from_submission(code):
    # Only the grader's own code objects count as the check's or the recorder's: a file name
    # such as <labs-grade-check> proves nothing.
    filename = code.co_filename
    if id(code) in TRUSTED_CODES or filename.startswith("<frozen"):
        return False
    return not os.path.realpath(filename).startswith(TRUSTED) if filename[:1] != "<" else True


def make_trip(name, original):
    def refuse():
        violations.append(name)
        raise ReferenceUsed(
            f"calls the reference implementation {name}, which this exercise asks you "
            "to write yourself"
        )

    def trip(args, kwargs):
        caller = sys._getframe(2)
        frame = caller
        while frame is not None:
            if id(frame.f_code) in CHECK_CODES:
                break  # called (through labs or the library) by the check itself
            if from_submission(frame.f_code):
                refuse()
            frame = frame.f_back
        else:  # another thread, or a call the check did not make: only labs may call it
            if not os.path.realpath(caller.f_code.co_filename).startswith(TRUSTED[:1]):
                refuse()
        return original(*args, **kwargs)

    return trip


def resolve(name):
    import importlib

    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            obj = getattr(obj, attr)
        return obj
    raise ImportError(name)


armed, unguarded = [], []
for name in A["references"]:
    try:
        target = resolve(name)
    except (ImportError, AttributeError):
        unguarded.append(name)
        continue
    if isinstance(target, type):
        target = target.__dict__.get("__init__")
    target = getattr(target, "__func__", target)
    if not isinstance(target, types.FunctionType):
        unguarded.append(name)
        continue
    if any(target is g for g, _ in armed):
        continue
    code = target.__code__
    qualname = getattr(code, "co_qualname", target.__name__)  # Python < 3.11: the plain name
    same = [
        f
        for f in gc.get_objects()
        if type(f) is types.FunctionType
        and f.__code__.co_filename == code.co_filename
        and getattr(f.__code__, "co_qualname", f.__name__) == qualname
    ]
    for f in same:
        if any(f is g for g, _ in armed):  # listed twice (a re-export): armed once
            continue
        if f.__closure__:
            unguarded.append(name)
            continue
        slot = len(armed)
        tramp = compile(
            "def trampoline(*args, **kwargs):\n"
            f"    return __labs_grade_trip__[{slot}](args, kwargs)\n",
            "<labs-grade-trip>",
            "exec",
        ).co_consts[0]
        TRUSTED_CODES.add(id(tramp))
        KEEP_ALIVE.append(tramp)
        original = types.FunctionType(
            f.__code__, f.__globals__, f.__name__, f.__defaults__, f.__closure__
        )
        original.__kwdefaults__ = f.__kwdefaults__
        f.__globals__.setdefault("__labs_grade_trip__", {})[slot] = make_trip(name, original)
        armed.append((f, f.__code__))
        f.__code__ = tramp

RECORDER_ARGS = dict(A["recorder"], violations=violations, unguarded=sorted(set(unguarded)))
try:
    exec(
        recorder_code,
        {"__name__": "__labs_grade_recorder__", "ARGS": RECORDER_ARGS, "USER_NS": USER_NS,
         "CHECK_CODE": check_code},
    )
finally:
    for f, code in reversed(armed):
        f.__code__ = code
        f.__globals__.pop("__labs_grade_trip__", None)
"""


def definitions(source: str) -> str:
    """The definitions of a check cell (functions, classes, imports, literal constants).

    Re-run before every later check so that a notebook cannot redefine a helper that a check
    cell defined and a later check calls.
    """
    try:
        from labs.course.rewrite import parse_source

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


def check_snippet(
    source: str,
    references: list[str],
    package_dir: str | Path,
    *,
    student: bool = True,
    keep: set[str] = frozenset(),
    not_applicable: tuple[int, ...] = (),
) -> tuple[str, str]:
    """``(code, nonce)``: the cell to execute in place of a check cell.

    Args:
        source: the key's check cell (with the definitions of earlier check cells before it).
        references: reference implementations the code under test must not call.
        package_dir: the kernel's copy of ``labs`` (code there may call the references).
        student: rewrite for a submission's kernel (only got values are computed) or, when
            ``False``, for the trusted reference run.
        keep: names other cells read (assignments to them are never dropped).
        not_applicable: exercises the reference run found not applicable here (skipped).
    """
    body, bind = rewrite(source, student, set(keep))
    nonce = secrets.token_hex(16)
    args = {
        "source": body,
        "references": list(references) if student else [],
        "package_dir": str(package_dir),
        "recorder_source": _RECORDER,
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


def parse_result(stdout: str, nonce: str) -> list | None:
    """The recorded events with ``nonce`` in a check's output (the last line), or ``None``."""
    return parse_events(stdout, MARK, nonce)
