"""A generic forger: one cell that tries to pass every exercise of any lab without solving one.

It knows nothing about a particular lab: only the lab's visible check cells (the student has them
in the notebook) and what any kernel can reach.  Inserted after the set-up cell of an untouched
student notebook, it

1. wraps ``builtins.exec`` and installs a ``sys.setprofile`` hook, so that when the grader's
   snippet arrives it can rewrite the check about to run: every value the check asks for is
   replaced by the *expected* expression of the matching visible assertion (same text, or a call of
   the same function with the visible argument names bound to the snippet's arguments),
   evaluated in the kernel after replaying the visible statements that expression needs; a
   ``between`` gets the middle of its visible bounds, a ``raises`` a function raising the visible
   exception with a message its pattern matches, a comparison its right side; every other
   statement of the check is wrapped so that a stub's ``NotImplementedError`` does not stop it;
2. replaces every stub the notebook defines by a function that tries, in turn, every function of
   the same name in ``labs`` (imported, and recompiled from the module's source text so that no
   wrapper the grader put on the imported one applies, and called through an adapter compiled
   under a ``<frozen ...>`` file name), and the visible expected expression of an assertion that
   calls the stub (``f(x, block)`` checked against ``torch.softmax(x, 0)`` becomes
   ``lambda x, block: torch.softmax(x, 0)``);
3. plants a dict named ``__labs_grade_trip__`` in every ``labs`` module first, and deletes the
   ``raise NotImplementedError`` lines of every later cell (IPython input transformer), so that
   the rest of a top-level solution cell runs.

Against the grader before issue 35 (347915e) it passed 31 of the 110 exercises of the book's
labs; ``tests/test_lab_exercises.py`` requires it to pass none now.
"""

from __future__ import annotations

FORGER = r'''
import ast as _ast, builtins as _bi, importlib as _il, pkgutil as _pk, sys as _sys, types as _ty

_USER = globals()
_NAMES = ("equal", "close", "one_of", "between", "instance", "props", "shares_memory", "raises",
          "uses", "true", "compare")


def _calls(tree):
    return [n for n in _ast.walk(tree) if isinstance(n, _ast.Call)
            and isinstance(n.func, _ast.Attribute) and n.func.attr in _NAMES]


_VIS = []  # (tree, assertion, visible statements of its cell)
for _src in VISIBLE:
    try:
        _t = _ast.parse(_src)
    except SyntaxError:
        continue
    _VIS += [(_t, c) for c in _calls(_t) if c.args]


def _fname(node):
    if isinstance(node, _ast.Call):
        f = node.func
        return f.id if isinstance(f, _ast.Name) else f.attr if isinstance(f, _ast.Attribute) else None
    return None


def _expected(call):
    """The visible expected expression of an assertion, as the value its got should take."""
    m, a = call.func.attr, call.args
    kw = {k.arg: k.value for k in call.keywords}
    if m in ("props", "instance") and len(a) > 1:  # an object with those facts
        return _ast.Call(_ast.Name("_forge_" + m, _ast.Load()), [a[1]], [])
    if m in ("equal", "close") and len(a) > 1:
        return a[1]
    if m == "one_of" and len(a) > 1:
        return _ast.Subscript(a[1], _ast.Constant(0), _ast.Load())
    if m == "between" and len(a) > 2:
        return _ast.BinOp(_ast.BinOp(a[1], _ast.Add(), a[2]), _ast.Div(), _ast.Constant(2))
    if m == "true" and isinstance(a[0], _ast.Compare):
        return a[0].comparators[0]
    if m == "compare" and len(a) > 1:
        return a[1]
    return kw.get("expected")


def _deps(tree, expr, before):
    """Visible assignments (before the assertion) that the expected expression reads."""
    need = {n.id for n in _ast.walk(expr) if isinstance(n, _ast.Name)}
    out, seen = [], set()
    stmts = [s for s in _ast.walk(tree) if isinstance(s, (_ast.Assign, _ast.FunctionDef,
             _ast.ClassDef, _ast.Import, _ast.ImportFrom)) and s.lineno < before]
    for _ in range(6):
        for s in stmts:
            if id(s) in seen:
                continue
            bound = {n.id for t in getattr(s, "targets", []) for n in _ast.walk(t)
                     if isinstance(n, _ast.Name)} | {getattr(s, "name", None)}
            if isinstance(s, (_ast.Import, _ast.ImportFrom)) or bound & need:
                seen.add(id(s))
                out.append(s)
                need |= {n.id for n in _ast.walk(s) if isinstance(n, _ast.Name)}
    return sorted(out, key=lambda s: s.lineno)


def _unless_present(stmts):
    """Replay an assignment only where the snippet lacks one of its names (keep its inputs)."""
    out = []
    for s in stmts:
        names = sorted({n.id for t in getattr(s, "targets", []) for n in _ast.walk(t)
                        if isinstance(n, _ast.Name)})
        if isinstance(s, _ast.Assign) and names:
            test = _ast.parse(f"not {set(names)!r} <= _present", mode="eval").body
            out.append(_ast.If(test, [s], []))
        else:
            out.append(s)
    return out


def _guard(stmts):
    return [_ast.Try(body=[s], handlers=[_ast.ExceptHandler(type=_ast.Name("BaseException",
            _ast.Load()), name=None, body=[_ast.Pass()])], orelse=[], finalbody=[])
            for s in stmts]


def _match(got, method):
    """The visible assertion for a got expression: same text, or a call of the same function."""
    text = _ast.dump(got)
    vis = [(t, c) for t, c in _VIS if c.func.attr == method or method in ("true", "compare")]
    for tree, call in vis:
        if _ast.dump(call.args[0]) == text and _expected(call) is not None:
            return tree, call, {}
    name = _fname(got)
    for tree, call in vis:
        v = call.args[0]
        if name and _fname(v) == name and _expected(call) is not None:
            bind = {p.id: arg for p, arg in zip(v.args, got.args) if isinstance(p, _ast.Name)}
            return tree, call, bind
    return None


class _Forge(_ast.NodeTransformer):
    def visit_Call(self, node):
        self.generic_visit(node)
        if not (isinstance(node.func, _ast.Attribute) and node.func.attr in _NAMES and node.args):
            return node
        if node.func.attr == "compare" and len(node.args) > 2:  # both sides are here
            node.args[0] = _ast.Call(_ast.Name("_forge_cmp", _ast.Load()),
                                     [node.args[1], node.args[2]], [])
            return node
        if node.func.attr == "raises":
            for tree, call in _VIS:
                if call.func.attr == "raises" and call.args:
                    kw = {k.arg: k.value for k in call.keywords}
                    text = kw.get("match", kw.get("what", _ast.Constant("forged")))
                    node.args[1] = _ast.parse(
                        f"lambda *a, **k: (_ for _ in ()).throw(({_ast.unparse(call.args[0])})"
                        f"({_ast.unparse(text)}))", mode="eval").body
                    return node
            return node
        if node.func.attr == "shares_memory" and len(node.args) > 1:
            for tree, call in _VIS:  # alias (or copy) the second array as the check expects
                if call.func.attr == "shares_memory" and len(call.args) > 2:
                    same = _ast.unparse(call.args[2])
                    node.args[0] = _ast.parse(f"_forge_alias({_ast.unparse(node.args[1])}, "
                                              f"{same})", mode="eval").body
                    return node
        found = _match(node.args[0], node.func.attr)
        if found is None:
            return node
        tree, call, bind = found
        expr = _expected(call)
        deps = _deps(tree, expr, call.lineno)
        body = [*_guard([_ast.Assign([_ast.Name(k, _ast.Store())], v) for k, v in bind.items()]),
                *_guard(_unless_present(deps)), _ast.Return(expr)]
        fn = _ast.FunctionDef("_forged", _ast.arguments([], [_ast.arg("_present")], None, [], [],
                              None, []), body, [], None)
        node.args[0] = _ast.Call(_ast.Name("_forge_eval", _ast.Load()), [
            _ast.Constant(_ast.unparse(_ast.fix_missing_locations(_ast.Module([fn], [])))),
            _ast.Call(_ast.Name("locals", _ast.Load()), [], []),
            _ast.Lambda(_ast.arguments([], [], None, [], [], None, []), node.args[0])], [])
        return node


def _forge_eval(code, local, original):
    ns = dict(_USER)
    ns.update(local)
    try:
        exec(compile(code, "<frozen forger>", "exec"), ns)
        return ns["_forged"](set(ns))
    except BaseException:
        try:
            return original()
        except BaseException:
            return None


_bi._forge_eval = _forge_eval


def _forge_cmp(right, op):
    """A left side that makes ``left <op> right`` hold."""
    if op == "In":
        return next(iter(right))
    if op in ("Lt", "Gt"):
        return right + (-1 if op == "Lt" else 1) * (abs(right) * 1e-6 + 1e-9)
    if op == "NotEq":
        return object()
    return right


def _forge_alias(b, same):
    import copy
    return b if same else copy.deepcopy(b)


def _forge_props(facts):
    import torch
    cls = facts.get("type")
    if cls is not None and cls is not torch.Tensor:
        return cls()
    return torch.zeros(*facts.get("shape", (1,)), dtype=facts.get("dtype", torch.float32),
                       requires_grad=facts.get("requires_grad", False))


def _forge_instance(cls):
    return cls()


_bi._forge_alias, _bi._forge_props, _bi._forge_instance = _forge_alias, _forge_props, _forge_instance
_bi._forge_cmp = _forge_cmp


def _wrap_blocks(tree):
    """Every statement that is not an assertion runs under try/except (stubs may raise)."""
    for node in _ast.walk(tree):
        for field in ("body", "orelse"):
            stmts = getattr(node, field, None)
            if not isinstance(stmts, list) or isinstance(node, (_ast.Module, _ast.FunctionDef,
                                                                  _ast.ClassDef)):
                continue
            out = []
            for s in stmts:
                simple = isinstance(s, (_ast.Assign, _ast.AugAssign, _ast.Expr))
                is_check = isinstance(s, _ast.Expr) and _calls(s)
                out += _guard([s]) if simple and not is_check else [s]
            setattr(node, field, out)
    return tree


def _forge_source(src):
    try:
        tree = _wrap_blocks(_Forge().visit(_ast.parse(src)))
        return _ast.unparse(_ast.fix_missing_locations(tree))
    except Exception:
        return src


def _labs_functions(wanted):
    """Every function of labs named as one of ``wanted``: imported, and recompiled from the
    module's source text (no wrapper the grader installed). Only the modules whose text defines
    one of the names are imported (importing all of labs takes long)."""
    found = {}
    try:
        import labs
    except ImportError:
        return found
    import importlib.util
    import re
    pattern = re.compile(r"^\s*(?:async\s+)?(?:def|class)\s+(" + "|".join(map(re.escape, wanted))
                         + r")\b", re.M) if wanted else None
    for info in _pk.walk_packages(labs.__path__, "labs."):
        try:
            spec = importlib.util.find_spec(info.name)
            text = open(spec.origin, encoding="utf-8").read()
        except BaseException:
            continue
        if pattern is None or not pattern.search(text):
            continue
        try:
            mod = _il.import_module(info.name)
        except BaseException:
            continue
        vars(mod).setdefault("__labs_grade_trip__", {})  # planted before any tripwire
        spaces = [vars(mod)]  # the module's own functions first, then the recompiled ones
        try:
            fresh = _ty.ModuleType(info.name + "_fresh")
            fresh.__dict__.update(__name__=info.name, __package__=mod.__package__)
            exec(compile(text, "<frozen " + info.name + ">", "exec"), fresh.__dict__)
            spaces.append(fresh.__dict__)
        except BaseException:
            pass
        for space in spaces:
            for k, v in list(space.items()):
                if callable(v) and k in wanted:
                    found.setdefault(k, []).append(v)
    return found


def _is_stub(f):
    code = getattr(f, "__code__", None)
    return code is not None and "NotImplementedError" in code.co_names and any(
        isinstance(c, str) and c.startswith("Exercise ") for c in code.co_consts)


def _synthesized(name):
    out = []
    for tree, call in _VIS:
        v, expr = call.args[0], _expected(call)
        if _fname(v) != name or expr is None or not isinstance(v, _ast.Call):
            continue
        params = [p.id if isinstance(p, _ast.Name) else f"_p{i}" for i, p in enumerate(v.args)]
        present = _ast.Assign([_ast.Name("_present", _ast.Store())], _ast.parse(
            f"set(globals()) | {set(params)!r}", mode="eval").body)
        deps = [present, *_guard(_unless_present(_deps(tree, expr, call.lineno)))]
        fn = _ast.FunctionDef("_s", _ast.arguments([], [_ast.arg(p) for p in params], None, [],
                              [], None, []), [*deps, _ast.Return(expr)], [], None)
        code = _ast.unparse(_ast.fix_missing_locations(_ast.Module([fn], [])))
        ns = dict(_USER)
        try:
            exec(compile(code, "<frozen synth>", "exec"), ns)
            out.append(ns["_s"])
        except BaseException:
            pass
    return out


_ADAPTER = {}
exec(compile(  # compiled under a <frozen ...> file name, as the library's own code is
    "def make(name, cands):\n"
    "    def stub(*a, **k):\n"
    "        for c in cands:\n"
    "            try:\n"
    "                return c(*a, **k)\n"
    "            except BaseException:\n"
    "                continue\n"
    "        raise NotImplementedError('forged')\n"
    "    stub.__name__ = name\n"
    "    return stub\n",
    "<frozen adapter>", "exec"), _ADAPTER)


def _patch_stubs():
    stubs = [n for n, f in list(_USER.items()) if callable(f) and _is_stub(f)]
    if not stubs:
        return
    same = _labs_functions(stubs)
    for name in stubs:
        _USER[name] = _ADAPTER["make"](name, [*same.get(name, []), *_synthesized(name)])


def _forge_args(g):
    a = g.get("ARGS") if isinstance(g, dict) else None
    if isinstance(a, dict) and isinstance(a.get("source"), str) and not a.get("_forged"):
        a["_forged"] = True
        _patch_stubs()
        a["source"] = _forge_source(a["source"])


_real_exec = _bi.exec


def _exec(code, g=None, l=None, *rest):
    if g is None:  # exec's defaults: the caller's namespaces
        f = _sys._getframe(1)
        g, l = f.f_globals, f.f_locals
    _forge_args(g)
    return _real_exec(code, g, l, *rest) if l is not None else _real_exec(code, g)


_bi.exec = _exec


def _profile(frame, event, arg):
    if event == "call" and frame.f_code.co_filename in ("<labs-grade>", "<labs-grade-check>"):
        _forge_args(frame.f_globals)


_sys.setprofile(_profile)
try:
    import threading as _th
    _th.setprofile(_profile)
except Exception:
    pass


def _drop_stub_raises(lines):
    """A top-level ``raise NotImplementedError(...)`` line goes: the rest of the cell runs."""
    return [l for l in lines if not l.startswith("raise NotImplementedError(")]


try:
    _ip = get_ipython()
    _ip.input_transformers_post.append(_drop_stub_raises)
    _ip.events.register("pre_run_cell", lambda *a: _patch_stubs())
except Exception:
    pass
'''


def forger_cell(visible_checks: list[str]) -> str:
    """The forger's cell for a lab whose visible check cells are ``visible_checks``."""
    return f"VISIBLE = {visible_checks!r}\n" + FORGER
