"""What a check computes only for its expected side, found and dropped for a submission's kernel.

:func:`drop_unused` removes from a rewritten check (:mod:`labs.course.rewrite`) every assignment,
helper function or class, item of a literal ``for`` list and argument of a check-defined helper
that nothing reads any more once the expected arguments are gone; :func:`loaded_names` says which
names other cells read before they assign them, which must stay (``keep``).
"""

from __future__ import annotations

import ast
import threading

__all__ = ["drop_unused", "loaded_names", "parse_source"]

_PARSE_LOCK = threading.Lock()


def parse_source(source: str) -> ast.Module:
    """``ast.parse`` under one lock: CPython 3.11 before 3.11.8 can raise "AST constructor
    recursion depth mismatch" when two threads parse at once (gh-106905), and the grader
    grades submissions on threads."""
    with _PARSE_LOCK:
        return ast.parse(source)


def _loaded(tree: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def _free(tree: ast.AST) -> set[str]:
    """Names ``tree`` reads before it assigns them, in the order Python evaluates them."""
    free: set[str] = set()
    stored: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.Name):
            if isinstance(node.ctx, ast.Load) and node.id not in stored:
                free.add(node.id)
            elif isinstance(node.ctx, ast.Store):
                stored.add(node.id)
            return
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda | ast.ClassDef):
            args = getattr(node, "args", None)  # a function's parameters are its own names
            params = {a.arg for a in ast.walk(args) if isinstance(a, ast.arg)} if args else set()
            outer = set(stored)
            stored.update(params)
            for child in ast.iter_child_nodes(node):  # its body runs later: reads are free
                visit(child)
            stored.clear()  # what the body assigns is local to it
            stored.update(outer)
            if not isinstance(node, ast.Lambda):
                stored.add(node.name)
            return
        order = {  # the value is evaluated before it is stored
            ast.Assign: ("value", "targets"), ast.AugAssign: ("value", "target"),
            ast.AnnAssign: ("value", "target"), ast.NamedExpr: ("value", "target"),
            ast.For: ("iter", "target", "body", "orelse"), ast.comprehension: ("iter", "target", "ifs"),
        }.get(type(node))  # fmt: skip
        fields = order or [f for f, _ in ast.iter_fields(node)]
        if isinstance(node, ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp):
            fields = ["generators", *(f for f in fields if f != "generators")]
        for field in fields:
            value = getattr(node, field, None)
            for child in value if isinstance(value, list) else [value]:
                if isinstance(child, ast.AST):
                    visit(child)

    visit(tree)
    return free


def loaded_names(sources: list[str]) -> set[str]:
    """Names ``sources`` (cells of the solution) read before assigning them themselves: the
    values another cell must leave for them (:func:`rewrite`'s ``keep``)."""
    names: set[str] = set()
    for source in sources:
        try:
            names |= _free(parse_source(source))
        except SyntaxError:
            continue
    return names


def _assigned(stmt: ast.stmt) -> list[str] | None:
    """The names an assignment or definition binds, or ``None`` when it binds anything else."""

    def names(t) -> list[str] | None:
        if isinstance(t, ast.Name):
            return [t.id]
        if isinstance(t, ast.Tuple | ast.List):
            out = [names(e) for e in t.elts]
            return None if any(o is None for o in out) else [n for o in out for n in o]
        return None

    if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return [stmt.name]
    if isinstance(stmt, ast.Assign | ast.AnnAssign) and stmt.value is not None:
        found = [
            names(t) for t in (stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target])
        ]
        return None if any(f is None for f in found) else [n for f in found for n in f]
    return None


def drop_unused(tree: ast.Module, keep: set[str]) -> None:
    """Drop assignments and definitions whose names nothing reads any more (they only fed
    expected values), until nothing changes."""
    changed = True
    while changed:
        changed = _drop_unused_loop_items(tree, keep) | _drop_unused_arguments(tree, keep)
        used = _loaded(tree) | keep
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):  # its methods are reached through its objects
                continue
            for field in ("body", "orelse", "finalbody"):
                stmts = getattr(node, field, None)
                if not isinstance(stmts, list):
                    continue
                kept = []
                for stmt in stmts:
                    bound = _assigned(stmt)
                    if any(isinstance(d, ast.Call) for d in getattr(stmt, "decorator_list", ())):
                        bound = None  # @app.get("/x") registers it: it may never be read
                    if bound is not None:
                        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                            inside = _loaded(stmt) - _loaded_outside(tree, stmt)
                            live = used - inside | keep
                        else:
                            live = used
                        if not any(n in live for n in bound):
                            changed = True
                            continue
                    kept.append(stmt)
                if len(kept) != len(stmts):
                    setattr(node, field, kept or [ast.Pass()])


def _loaded_outside(tree: ast.AST, skip: ast.AST) -> set[str]:
    """Names read in ``tree`` outside the subtree ``skip``."""
    out: set[str] = set()
    todo = [tree]
    while todo:
        node = todo.pop()
        if node is skip:
            continue
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            out.add(node.id)
        todo.extend(ast.iter_child_nodes(node))
    return out


def _literal_items(tree: ast.Module, it: ast.AST, keep: set[str]) -> list | None:
    """The items of a literal list or tuple a ``for`` runs over: written in place, or the value
    of the one assignment to a name that only this loop reads."""
    if isinstance(it, ast.List | ast.Tuple):
        return it.elts
    if not isinstance(it, ast.Name) or it.id in keep:
        return None
    reads = [n for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id == it.id]
    sets = [
        a for a in ast.walk(tree)
        if isinstance(a, ast.Assign) and len(a.targets) == 1
        and isinstance(a.targets[0], ast.Name) and a.targets[0].id == it.id
    ]  # fmt: skip
    if len(reads) == 2 and len(sets) == 1 and isinstance(sets[0].value, ast.List | ast.Tuple):
        return sets[0].value.elts
    return None


def _drop_unused_loop_items(tree: ast.Module, keep: set[str]) -> bool:
    """``for x, expected in [(1, 2), (3, 4)]:`` with ``expected`` no longer read: drop it from the
    target and from every literal item, so the expected values are not in the student's kernel
    (not even as constants a frame-reading value could find)."""
    used, changed = _loaded(tree) | keep, False
    for node in ast.walk(tree):
        if not (isinstance(node, ast.For) and isinstance(node.target, ast.Tuple)):
            continue
        names = node.target.elts
        items = _literal_items(tree, node.iter, keep)
        if (
            any(isinstance(n, ast.Starred) for n in names)
            or not items
            or not all(isinstance(i, ast.Tuple | ast.List) and len(i.elts) == len(names)
                       and not any(isinstance(e, ast.Starred) for e in i.elts) for i in items)
        ):  # fmt: skip
            continue
        drop = [k for k, n in enumerate(names) if isinstance(n, ast.Name) and n.id not in used]
        if not drop:
            continue
        if len(drop) == len(names):  # keep the number of iterations, nothing else
            node.target = ast.Name("_", ast.Store())
            items[:] = [ast.Constant(None) for _ in items]
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
                if not (isinstance(arg, ast.Constant) and arg.value is None):
                    node.args[k] = ast.Constant(None)
                    changed = True
        for kw in node.keywords:
            if kw.arg in dead and not (
                isinstance(kw.value, ast.Constant) and kw.value.value is None
            ):
                kw.value = ast.Constant(None)
                changed = True
    return changed
