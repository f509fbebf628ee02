"""Rewrite a check cell for grading: the reference run records everything, a submission only got.

A check cell of a lab stays what students and the book run::

    with exercise(1, "FLOPs of a product") as check:
        check.equal(matmul_flops(2, 3, 4), flops.matmul_flops(2, 3, 4), "matmul_flops(2, 3, 4)")

:func:`rewrite` turns it into a program for :mod:`labs.course.recorder`:

* the **reference** version (``student=False``) runs in a trusted kernel on the key's own
  solution, once per lab, and records every argument of every assertion (expected values,
  tolerances, ``what``);
* the **student** version keeps only the *got* argument of each assertion
  (``check.equal(matmul_flops(2, 3, 4))``): expected values, tolerances and messages are never
  computed in the submission's kernel, and assignments that only fed them are dropped (unless
  another cell reads the name, or the value may draw random numbers, which would shift the
  inputs that follow), as are the items of a literal ``for`` list and the arguments of a helper
  defined in the check that only fed them.

In both, ``check.true(a == b)`` becomes ``check.compare(a, b, "Eq")`` so that the comparison is
made by the grader on plain data, not by an ``__eq__`` the submission defined, and the body of
``with exercise(...) as check:`` runs only ``if check.runs`` (``needs=`` may make it not
applicable).
"""

from __future__ import annotations

import ast
import threading

__all__ = ["rewrite", "loaded_names", "METHODS", "OPS", "CHECKS_MODULES"]

METHODS = ("equal", "close", "true", "between", "raises")
CHECKS_MODULES = ("labs.course.checks", "labs.checks")
_CHECKS_NAMES = ("exercise", "Check", "CheckFailure", "ReferenceUsed")
OPS = {
    ast.Eq: "Eq", ast.NotEq: "NotEq", ast.Lt: "Lt", ast.LtE: "LtE", ast.Gt: "Gt", ast.GtE: "GtE",
    ast.In: "In", ast.NotIn: "NotIn",
}  # fmt: skip

#: an assignment whose value mentions one of these may draw random numbers: never dropped
_RANDOM_HINTS = ("rand", "rng", "seed", "normal", "sample", "shuffle", "choice", "perm", "gen")


_PARSE_LOCK = threading.Lock()


def parse_source(source: str) -> ast.Module:
    """``ast.parse`` under one lock: CPython 3.11 before 3.11.8 can raise "AST constructor
    recursion depth mismatch" when two threads parse at once (gh-106905), and the grader
    grades submissions on threads."""
    with _PARSE_LOCK:
        return ast.parse(source)


def _receivers(tree: ast.AST) -> set[str]:
    names = {"check"}
    for node in ast.walk(tree):
        if isinstance(node, ast.With | ast.AsyncWith):
            for item in node.items:
                if isinstance(item.optional_vars, ast.Name):
                    names.add(item.optional_vars.id)
    return names


def _is_check_call(node: ast.AST, receivers: set[str]) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in METHODS
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id in receivers
    )


def _is_exercise(node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and (
        (isinstance(node.func, ast.Name) and node.func.id == "exercise")
        or (isinstance(node.func, ast.Attribute) and node.func.attr == "exercise")
    )


class _Rewrite(ast.NodeTransformer):
    def __init__(self, student: bool, receivers: set[str]):
        self.student, self.receivers, self.bind = student, receivers, []

    def visit_ImportFrom(self, node):  # noqa: N802 - ast API
        if node.module in CHECKS_MODULES and not node.level:
            self.bind.extend(a.asname or a.name for a in node.names)
            return ast.copy_location(ast.Pass(), node)
        return node

    def visit_With(self, node):  # noqa: N802
        self.generic_visit(node)
        item = node.items[0] if len(node.items) == 1 else None
        if item is not None and _is_exercise(item.context_expr):
            if item.optional_vars is None:
                item.optional_vars = ast.Name("check", ast.Store())
            if isinstance(item.optional_vars, ast.Name):
                runs = ast.Attribute(
                    ast.Name(item.optional_vars.id, ast.Load()), "runs", ast.Load()
                )
                node.body = [ast.If(runs, node.body, [])]
        return node

    def visit_Call(self, node):  # noqa: N802
        self.generic_visit(node)
        if not _is_check_call(node, self.receivers):
            return node
        method, args = node.func.attr, node.args
        if not args or any(isinstance(a, ast.Starred) for a in args[:2]):
            return node
        got = args[0]
        if method == "true" and isinstance(got, ast.Compare) and len(got.ops) == 1:
            op = OPS.get(type(got.ops[0]))
            if op is not None:
                node.func.attr = "compare"
                node.args = [got.left, got.comparators[0], ast.Constant(op), *args[1:]]
                if self.student:
                    node.args, node.keywords = node.args[:3], []
                return node
        if self.student:
            if method == "raises":
                node.args = [ast.Constant(None), *args[1:]]
                node.keywords = [k for k in node.keywords if k.arg != "what"]
            else:
                node.args, node.keywords = [got], []
        return node


def _loaded(tree: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def loaded_names(sources: list[str]) -> set[str]:
    """Names read by ``sources`` (cells of the solution), for :func:`rewrite`'s ``keep``."""
    names: set[str] = set()
    for source in sources:
        try:
            names |= _loaded(parse_source(source))
        except SyntaxError:
            continue
    return names


def _drop_unused(tree: ast.Module, keep: set[str]) -> None:
    """Drop assignments whose names nothing reads any more (they only fed expected values)."""

    def targets(stmt) -> list[ast.AST]:
        return stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]

    def names(t) -> list[str] | None:
        if isinstance(t, ast.Name):
            return [t.id]
        if isinstance(t, ast.Tuple | ast.List):
            out = [names(e) for e in t.elts]
            return None if any(o is None for o in out) else [n for o in out for n in o]
        return None

    changed = True
    while changed:
        changed = _drop_unused_loop_items(tree, keep) | _drop_unused_arguments(tree, keep)
        used = _loaded(tree) | keep
        for node in ast.walk(tree):
            for field in ("body", "orelse", "finalbody"):
                stmts = getattr(node, field, None)
                if not isinstance(stmts, list):
                    continue
                kept = []
                for stmt in stmts:
                    if isinstance(stmt, ast.Assign | ast.AnnAssign) and stmt.value is not None:
                        found = [names(t) for t in targets(stmt)]
                        text = ast.unparse(stmt.value).lower()
                        if (
                            all(f is not None for f in found)
                            and not any(n in used for f in found for n in f)
                            and not any(h in text for h in _RANDOM_HINTS)
                        ):
                            changed = True
                            continue
                    kept.append(stmt)
                if len(kept) != len(stmts):
                    setattr(node, field, kept or [ast.Pass()])


def _may_draw(node: ast.AST) -> bool:
    text = ast.unparse(node).lower()
    return any(h in text for h in _RANDOM_HINTS)


def _drop_unused_loop_items(tree: ast.Module, keep: set[str]) -> bool:
    """``for x, expected in [(1, 2), (3, 4)]:`` with ``expected`` no longer read: drop it from the
    target and from every literal item, so the expected values are not in the student's kernel
    (not even as constants a frame-reading value could find)."""
    used, changed = _loaded(tree) | keep, False
    for node in ast.walk(tree):
        if not (isinstance(node, ast.For) and isinstance(node.target, ast.Tuple)):
            continue
        names = node.target.elts
        items = node.iter.elts if isinstance(node.iter, ast.List | ast.Tuple) else None
        if (
            not all(isinstance(n, ast.Name) for n in names)
            or not items
            or not all(isinstance(i, ast.Tuple | ast.List) and len(i.elts) == len(names)
                       and not any(isinstance(e, ast.Starred) for e in i.elts) for i in items)
        ):  # fmt: skip
            continue
        drop = [
            k
            for k, n in enumerate(names)
            if n.id not in used and not any(_may_draw(i.elts[k]) for i in items)
        ]
        if not drop:
            continue
        if len(drop) == len(names):  # keep the number of iterations, nothing else
            node.target = ast.Name("_", ast.Store())
            node.iter.elts = [ast.Constant(None) for _ in items]
        else:
            node.target.elts = [n for k, n in enumerate(names) if k not in drop]
            for i in items:
                i.elts = [e for k, e in enumerate(i.elts) if k not in drop]
        changed = True
    return changed


def _drop_unused_arguments(tree: ast.Module, keep: set[str]) -> bool:
    """A helper defined in the check that no longer reads a parameter (it only fed expected
    values): its callers in the check pass ``None`` there instead of computing the value."""
    used_in: dict[str, set[str]] = {}
    params: dict[str, list[str]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            for item in node.body:  # methods are called through objects: left alone
                if isinstance(item, ast.FunctionDef):
                    params.pop(item.name, None)
                    used_in[item.name] = set()
        elif isinstance(node, ast.FunctionDef) and node.name not in used_in:
            params[node.name] = [a.arg for a in (*node.args.posonlyargs, *node.args.args)]
            used_in[node.name] = _loaded(node) | keep
    defined = [n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)]
    changed = False
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
            continue
        name = node.func.id
        if name not in params or defined.count(name) != 1:
            continue
        dead = {p for p in params[name] if p not in used_in[name]}
        for k, arg in enumerate(node.args):
            if isinstance(arg, ast.Starred):
                break
            if k < len(params[name]) and params[name][k] in dead:
                if not (isinstance(arg, ast.Constant) and arg.value is None) and not _may_draw(arg):
                    node.args[k] = ast.Constant(None)
                    changed = True
        for kw in node.keywords:
            if kw.arg in dead and not (
                isinstance(kw.value, ast.Constant) and kw.value.value is None
            ):
                if not _may_draw(kw.value):
                    kw.value = ast.Constant(None)
                    changed = True
    return changed


def rewrite(source: str, student: bool, keep: set[str] = frozenset()) -> tuple[str, list[str]]:
    """``(code, bind)``: the check cell for the recorder, and the check names it imported.

    Args:
        source: the key's check cell.
        student: ``True`` for a submission's kernel (only the got arguments stay).
        keep: names other cells read (see :func:`loaded_names`): assignments to them stay.
    """
    tree = parse_source(source)
    rw = _Rewrite(student, _receivers(tree))
    tree = ast.fix_missing_locations(rw.visit(tree))
    if student:
        _drop_unused(tree, set(keep))
    used = _loaded(tree)
    bind = list(dict.fromkeys([*rw.bind, *(n for n in _CHECKS_NAMES if n in used)]))
    return ast.unparse(tree), bind
