"""The kernel's ``labs`` (issue 35): a copy per key in which the forbidden references only raise."""

from __future__ import annotations

import ast
import inspect
import json
import subprocess
import sys

import pytest

from labs.course.checks import ReferenceUsed
from labs.course.key import KEY_DIR
from labs.course.sealed_labs import forbidden, locate, seal, strip_source

MODULE = '''"""A module."""
import functools


def plain(x):
    """Doubles x."""
    y = x + x
    return y


def one_liner(x): return x * 3


@functools.cache
def cached(n):
    return sum(range(n))


def only_doc():
    """Nothing but a docstring."""


class Layer:
    """A class with state."""

    scale = 2.0

    def __init__(self, w):
        self.w = w

    def forward(self, x):
        return self.w * x * self.scale

    @property
    def double(self):
        return 2 * self.w


class NoInit:
    def ping(self):
        return "pong"


def untouched(x):
    return x - 1
'''


def _load(text: str) -> dict:
    ns: dict = {}
    exec(compile(text, "<m>", "exec"), ns)
    return ns


def test_a_stripped_module_keeps_signatures_and_docstrings_and_loses_the_bodies():
    targets = {(n,): f"{n} is forbidden" for n in ("plain", "one_liner", "cached", "only_doc")}
    targets |= {("Layer",): "Layer is forbidden", ("NoInit",): "NoInit is forbidden"}
    out = strip_source(MODULE, targets)
    for body in ("x + x", "x * 3", "sum(range(n))", "self.w * x", "2 * self.w", '"pong"'):
        assert body not in out, body
    ns = _load(out)
    assert ns["untouched"](5) == 4 and ns["Layer"].scale == 2.0
    assert inspect.signature(ns["plain"]) == inspect.signature(_load(MODULE)["plain"])
    assert ns["plain"].__doc__ == "Doubles x."
    for call, message in [
        (lambda: ns["plain"](1), "plain is forbidden"),
        (lambda: ns["one_liner"](1), "one_liner is forbidden"),
        (lambda: ns["cached"](3), "cached is forbidden"),
        (lambda: ns["only_doc"](), "only_doc is forbidden"),
        (lambda: ns["Layer"](1.0), "Layer is forbidden"),
        (lambda: ns["NoInit"](), "NoInit is forbidden"),  # an __init__ that raises was added
    ]:
        with pytest.raises(ReferenceUsed, match=message):
            call()


def test_a_method_alone_can_be_stripped():
    ns = _load(strip_source(MODULE, {("Layer", "forward"): "forward is forbidden"}))
    layer = ns["Layer"](3.0)
    assert layer.double == 6.0
    with pytest.raises(ReferenceUsed, match="forward is forbidden"):
        layer.forward(1.0)


def test_a_reexported_name_is_stripped_where_it_is_defined():
    path, names = locate("labs.parallel.pipeline.gpipe")
    assert path.name == "schedules.py" and names == ["gpipe"]
    path, names = locate("labs.inference.kv_cache.KVCache.update")
    assert path.name == "kv_cache.py" and names == ["KVCache", "update"]
    with pytest.raises(LookupError):
        locate("labs.basics.flops.no_such_function")


def _bodies(node) -> list[list]:
    """The statements of a def (or of every method of a class), docstring left out."""
    defs = (
        [n for n in node.body if isinstance(n, ast.FunctionDef)]
        if isinstance(node, ast.ClassDef)
        else [node]
    )
    out = []
    for d in defs:
        body = (
            d.body[1:]
            if isinstance(d.body[0], ast.Expr)
            and isinstance(getattr(d.body[0], "value", None), ast.Constant)
            else d.body
        )
        out.append(body)
    return out


@pytest.mark.parametrize("path", sorted(KEY_DIR.glob("*.json")), ids=lambda p: p.stem)
def test_every_key_seals_a_copy_without_its_references(path):
    """For every lab: the copy has no compiled files, and each forbidden reference (each method
    of a forbidden class) is one raise naming its exercise: its body is not in the copy."""
    key = json.loads(path.read_text())
    root = seal(key)
    assert not list(root.rglob("*.pyc")) and not list(root.rglob("__pycache__"))
    refs = forbidden(key)
    for name, numbers in refs.items():
        file, names = locate(name, root / "labs")
        node = ast.parse(file.read_text())
        for part in names:
            node = next(n for n in node.body if getattr(n, "name", None) == part)
        for body in _bodies(node):
            assert len(body) == 1 and isinstance(body[0], ast.Raise), (name, ast.unparse(body[0]))
            text = ast.unparse(body[0])
            assert "ReferenceUsed" in text and "is the reference implementation of exercise" in text
            # a method listed on its own (KVCache.update) names its own exercises
            named = text.split("ReferenceUsed(")[1].split(" is the reference")[0].strip("'\"")
            want = refs.get(named, numbers) if named.startswith(name) else numbers
            assert str(want[0]) in text.split(" of lab")[0], (name, named, text)


def test_a_sealed_reference_raises_in_a_fresh_interpreter():
    key = json.loads((KEY_DIR / "lab02-matmul-flops.json").read_text())
    root = seal(key)
    probe = (
        "import inspect\n"
        "from labs.basics import flops\n"
        "from labs.course.checks import ReferenceUsed\n"
        f"assert flops.__file__.startswith({str(root)!r})\n"
        "assert '2 * m * k * n' not in inspect.getsource(flops)\n"
        "try:\n"
        "    flops.matmul_flops(2, 3, 4)\n"
        "except ReferenceUsed as err:\n"
        "    print(err)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], cwd=root, env={"PYTHONPATH": str(root)},
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.startswith(
        "labs.basics.flops.matmul_flops is the reference implementation of exercises 1 and 3 and 5"
    ), result.stdout
