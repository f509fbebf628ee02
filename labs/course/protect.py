"""Run an instructor check inside a submission's kernel, out of the submission's reach.

The grader never executes a submission's check cells.  At each check cell's place it sends the
cell built by :func:`check_snippet`, which, inside the kernel,

1. loads a fresh copy of :mod:`labs.course.checks` from source text the grader sends (so a notebook
   that patched ``labs.course.checks`` in ``sys.modules``, or defined its own ``exercise``, has
   no effect) and binds the names the check imports to it;
2. arms a tripwire on the reference implementations the key forbids for this exercise: every
   function object sharing their code (aliases, ``from ... import ... as``, reloaded copies) is
   swapped for a trampoline that raises :class:`~labs.course.checks.ReferenceUsed` when the call
   comes from the submission's code, while calls made by ``labs`` itself or by the check go
   through;
3. runs the key's check source (``<labs-grade-check>``), disarms the tripwire, and prints one
   result line tagged with a random nonce; the grader trusts only that line.

Code in the notebook runs in the same process, so this defends against editing, patching and
shadowing the checks (attacks 1-3 and 5-7 of the course's test suite), not against a student who
rewrites the interpreter itself; the sandbox limits what such code can reach.
"""

from __future__ import annotations

import ast
import secrets
from pathlib import Path

__all__ = ["check_snippet", "definitions", "parse_result", "pass_lines", "CHECKS_MODULES"]

CHECKS_MODULES = ("labs.course.checks", "labs.checks")
_CHECKS_FILE = Path(__file__).with_name("checks.py")
_MARK = "labs-grade-result "
_CHECKS_NAMES = ("exercise", "Check", "CheckFailure", "ReferenceUsed")

_KERNEL_CODE = r"""
import gc, json, os, sys, types

A = ARGS
checks = types.ModuleType("labs_grade_checks")
checks.__dict__["__file__"] = "<labs-grade-checks>"
exec(compile(A["checks_source"], "<labs-grade-checks>", "exec"), checks.__dict__)
for name, alias in A["bind"]:
    USER_NS[alias] = getattr(checks, name)

TRUSTED = tuple(
    os.path.join(os.path.realpath(p), "")
    for p in {A["package_dir"], sys.prefix, sys.base_prefix, sys.exec_prefix}
)
violations = []


def from_submission(filename):
    if filename.startswith(("<labs-grade", "<frozen")):
        return False
    return not os.path.realpath(filename).startswith(TRUSTED) if filename[:1] != "<" else True


def make_trip(name, original):
    def trip(args, kwargs):
        frame = sys._getframe(2)
        while frame is not None:
            filename = frame.f_code.co_filename
            if filename == "<labs-grade-check>":
                break
            if from_submission(filename):
                violations.append(name)
                raise checks.ReferenceUsed(
                    f"calls the reference implementation {name}, which this exercise asks you "
                    "to write yourself"
                )
            frame = frame.f_back
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
        original = types.FunctionType(
            f.__code__, f.__globals__, f.__name__, f.__defaults__, f.__closure__
        )
        original.__kwdefaults__ = f.__kwdefaults__
        f.__globals__.setdefault("__labs_grade_trip__", {})[slot] = make_trip(name, original)
        armed.append((f, f.__code__))
        f.__code__ = tramp

result = {"ok": False, "error": "", "unguarded": sorted(set(unguarded))}
try:
    exec(compile(A["source"], "<labs-grade-check>", "exec"), USER_NS)
    result["ok"] = True
except BaseException as err:  # the verdict is reported, whatever the check raised
    text = str(err).strip().splitlines()
    result["error"] = f"{type(err).__name__}: {text[0] if text else ''}".rstrip(": ")
finally:
    for f, code in reversed(armed):
        f.__code__ = code
        f.__globals__.pop("__labs_grade_trip__", None)
if violations and (result["ok"] or "ReferenceUsed" not in result["error"]):
    result["ok"] = False
    result["error"] = (
        f"ReferenceUsed: Exercise {A['number']} -- calls the reference implementation "
        f"{violations[0]}, which this exercise asks you to write yourself"
    )
sys.stdout.flush()
print(A["mark"] + A["nonce"] + " " + json.dumps(result), flush=True)
"""


def _strip_check_imports(source: str) -> tuple[str, list[tuple[str, str]]]:
    """Remove ``from labs.course.checks import ...``; return the source and the names to bind."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return source, [(n, n) for n in _CHECKS_NAMES]
    bind: list[tuple[str, str]] = []

    class Strip(ast.NodeTransformer):
        def visit_ImportFrom(self, node: ast.ImportFrom):  # noqa: N802 - ast API
            if node.module in CHECKS_MODULES and not node.level:
                bind.extend((a.name, a.asname or a.name) for a in node.names)
                return ast.copy_location(ast.Pass(), node)
            return node

    tree = ast.fix_missing_locations(Strip().visit(tree))
    # Names of the checks module a check uses without importing it (imported in an earlier,
    # editable cell) are bound to the fresh copy too.
    used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    bound = {alias for _, alias in bind}
    bind += [(n, n) for n in _CHECKS_NAMES if n in used and n not in bound]
    return ast.unparse(tree), bind


def definitions(source: str) -> str:
    """The definitions of a check cell (functions, classes, imports, literal constants).

    Re-run before every later check so that a notebook cannot redefine a helper that a check
    cell defined and a later check calls.
    """
    try:
        tree = ast.parse(source)
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
    number: int, source: str, references: list[str], package_dir: str | Path
) -> tuple[str, str]:
    """``(code, nonce)``: the cell to execute in place of exercise ``number``'s check cell."""
    body, bind = _strip_check_imports(source)
    nonce = secrets.token_hex(16)
    args = {
        "number": number,
        "source": body,
        "bind": bind,
        "references": list(references),
        "package_dir": str(package_dir),
        "checks_source": _CHECKS_FILE.read_text(encoding="utf-8"),
        "mark": _MARK,
        "nonce": nonce,
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


def parse_result(stdout: str, nonce: str) -> dict | None:
    """The result line with ``nonce`` in a check's output (the last one), or ``None``."""
    import json

    found = None
    for line in stdout.split("\n"):
        if line.startswith(_MARK + nonce + " "):
            try:
                found = json.loads(line[len(_MARK) + len(nonce) + 1 :])
            except ValueError:
                found = None
    return found


def pass_lines(stdout: str) -> list[str]:
    """The ``PASS exercise N: ...`` lines a check printed."""
    return [line for line in stdout.splitlines() if line.startswith("PASS exercise ")]
