"""Rewrite a check cell for grading: the reference run records everything, a submission only got.

A check cell of a lab stays what students and the book run::

    with exercise(1, "FLOPs of a product") as check:
        check.equal(matmul_flops(2, 3, 4), flops.matmul_flops(2, 3, 4), "matmul_flops(2, 3, 4)")

:func:`rewrite` turns it into a program for :mod:`labs.course.recorder`:

* the **reference** version (``student=False``) runs in a trusted kernel on the key's own
  solution, once per lab, and records every argument of every assertion (expected values,
  tolerances, ``what``);
* the **student** version keeps only the student's side of each assertion (:data:`ASSERTIONS`: the
  first argument, both arrays of ``shares_memory``, the function and its arguments of ``raises``):
  ``check.equal(matmul_flops(2, 3, 4))``.  Expected values, exception types, patterns, tolerances
  and messages are never computed in the submission's kernel, and everything that only fed them
  is dropped too: assignments, helper functions and classes the check defines, the items of a
  literal ``for`` list, the arguments of a helper that only fed them.

Both keep the body of ``with exercise(...) as check:`` under ``if check.runs`` (``needs=`` may
make it not applicable).  No assertion takes a condition: a comparison is the grader's
(:mod:`labs.course.verdict`), made on the values the kernel returns.
"""

from __future__ import annotations

import ast

from labs.course.checks import ASSERTIONS
from labs.course.unused import drop_unused, parse_source

__all__ = ["rewrite", "parse_source", "CHECKS_MODULES"]

CHECKS_MODULES = ("labs.course.checks", "labs.checks")
_CHECKS_NAMES = ("exercise", "Check", "CheckFailure", "ReferenceUsed")


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
        and node.func.attr in ASSERTIONS
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
        if not self.student or not _is_check_call(node, self.receivers):
            return node
        method, args = node.func.attr, node.args
        if method == "raises":
            if args:
                node.args = [ast.Constant(None), *args[1:]]
            node.keywords = [k for k in node.keywords if k.arg not in ("what", "match")]
            return node
        if any(isinstance(a, ast.Starred) for a in args):
            return node
        node.args, node.keywords = args[: ASSERTIONS[method]], []
        return node


def rewrite(source: str, student: bool, keep: set[str] = frozenset()) -> tuple[str, list[str]]:
    """``(code, bind)``: the check cell for the recorder, and the check names it imported.

    Args:
        source: the key's check cell.
        student: ``True`` for a submission's kernel (only the got arguments stay).
        keep: names other cells read (:func:`labs.course.unused.loaded_names`): assignments
            to them stay.
    """
    tree = parse_source(source)
    rw = _Rewrite(student, _receivers(tree))
    tree = ast.fix_missing_locations(rw.visit(tree))
    if student:
        drop_unused(tree, set(keep))
    used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    bind = list(dict.fromkeys([*rw.bind, *(n for n in _CHECKS_NAMES if n in used)]))
    return ast.unparse(tree), bind
