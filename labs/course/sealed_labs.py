"""The ``labs`` a submission's kernel imports: a copy without the references the key forbids.

An answer key lists, per exercise, the reference implementations in ``labs`` that compute what the
exercise asks for (``key["exercises"][N]["references"]``).  A submission's kernel must not be able
to produce a graded value with them, so it never gets them: :func:`seal` writes, once per key, a
copy of the package in which each of them — a function, a method, or every method of a class —
keeps its signature and docstring, and its body is one line raising
:class:`~labs.course.checks.ReferenceUsed` with the exercise's number.  The original text of those
bodies is not in the copy (nor any ``.pyc`` compiled from it); every other module and function is
unchanged, so the rest of the lab runs as in the book.  No tripwire and no trust in names, files or
frames is needed: what the kernel can import cannot compute the expected value.

The grader hands the folder that holds the copy to :class:`~labs.course.sandbox.Sandbox` as
``labs_root``; the trusted reference run keeps the full package.
"""

from __future__ import annotations

import ast
import atexit
import hashlib
import json
import shutil
import tempfile
import threading
from pathlib import Path
from typing import Any

__all__ = ["PACKAGE_DIR", "forbidden", "seal", "strip_source"]

PACKAGE_DIR = Path(__file__).resolve().parents[1]  #: the full ``labs`` package
_IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
_LOCK = threading.Lock()
_CACHE: dict[str, Path] = {}
_ROOT: list[Path] = []


def forbidden(key: dict[str, Any]) -> dict[str, list[int]]:
    """``{reference name: [exercise numbers that forbid it]}`` of a key."""
    out: dict[str, list[int]] = {}
    for num, ex in sorted(key["exercises"].items(), key=lambda kv: int(kv[0])):
        for name in ex.get("references", []):
            out.setdefault(name, []).append(int(num))
    return out


def _module_file(package: Path, dotted: str) -> Path | None:
    parts = dotted.split(".")
    if parts[0] != "labs":
        return None
    base = package.joinpath(*parts[1:])
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def _find(tree: ast.Module, names: list[str]) -> ast.AST | None:
    body: list = tree.body
    node = None
    for name in names:
        node = next(
            (n for n in body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
             and n.name == name),
            None,
        )  # fmt: skip
        if node is None:
            return None
        body = node.body
    return node


def _imported(tree: ast.Module, name: str, module: str, is_package: bool) -> str | None:
    """The dotted name that ``from X import Y as name`` in ``module`` binds to ``name``."""
    for node in tree.body:
        if not isinstance(node, ast.ImportFrom):
            continue
        for alias in node.names:
            if (alias.asname or alias.name) != name:
                continue
            if node.level:
                base = module.split(".")
                base = base[: len(base) - node.level + (1 if is_package else 0)]
                source = ".".join([*base, *([node.module] if node.module else [])])
            else:
                source = node.module or ""
            return f"{source}.{alias.name}"
    return None


def locate(name: str, package: Path = PACKAGE_DIR, depth: int = 0) -> tuple[Path, list[str]]:
    """``(module file, [class, method] or [function])`` where ``name`` is defined, following
    re-exports (``labs.parallel.pipeline.gpipe`` is defined in ``...pipeline/schedules.py``)."""
    parts = name.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        module = ".".join(parts[:cut])
        path = _module_file(package, module)
        if path is None:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        if _find(tree, parts[cut:]) is not None:
            return path, parts[cut:]
        target = _imported(tree, parts[cut], module, path.name == "__init__.py")
        if target and depth < 8:
            return locate(".".join([target, *parts[cut + 1 :]]), package, depth + 1)
        break
    raise LookupError(f"{name}: no function or class of that name is defined in labs")


def _raise_line(message: str) -> str:
    return f'raise __import__("labs.course.checks", fromlist=["_"]).ReferenceUsed({message!r})'


def _strip_body(lines: list[bytes], node: ast.AST, message: str) -> None:
    """Replace the body of ``node`` (a def) in ``lines`` (bytes, with ends) by one raise."""
    body = node.body
    doc = (
        isinstance(body[0], ast.Expr)
        and isinstance(body[0].value, ast.Constant)
        and isinstance(body[0].value.value, str)
    )
    stmt = _raise_line(message).encode()
    if doc and len(body) == 1:  # only a docstring: add the raise after it
        indent = lines[body[0].lineno - 1][: body[0].col_offset]
        lines[node.end_lineno - 1] += indent + stmt + b"\n"
        return
    first = body[1] if doc else body[0]
    start = lines[first.lineno - 1]
    if first.lineno == node.lineno or start[: first.col_offset].strip():  # `def f(): return x`
        lines[first.lineno - 1 : node.end_lineno] = [start[: first.col_offset] + stmt + b"\n"]
    else:
        indent = start[: first.col_offset]
        lines[first.lineno - 1 : node.end_lineno] = [indent + stmt + b"\n"]


def strip_source(text: str, targets: dict[tuple[str, ...], str]) -> str:
    """``text`` with the defs at ``targets`` (qualified name parts -> message) reduced to a
    raise: a function's body, or the body of every method of a class (one that defines no
    ``__init__`` gets one that raises)."""
    tree = ast.parse(text)
    bodies: list[tuple[ast.AST, str]] = []
    inits: list[tuple[tuple[str, ...], str]] = []
    for names, message in targets.items():
        node = _find(tree, list(names))
        if node is None:
            raise LookupError(f"{'.'.join(names)} is not defined in this module")
        if isinstance(node, ast.ClassDef):
            methods = [
                n for n in node.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
            ]
            bodies += [(m, message) for m in methods]
            if not any(m.name == "__init__" for m in methods):
                inits.append((names, message))
        else:
            bodies.append((node, message))
    lines = text.encode("utf-8").splitlines(keepends=True)
    done: set[int] = set()
    for node, message in sorted(bodies, key=lambda t: -t[0].lineno):  # bottom up: no shifts
        if id(node) not in done:
            done.add(id(node))
            _strip_body(lines, node, message)
    if inits:  # then an __init__ at the end of each class that has none
        tree = ast.parse(b"".join(lines))
        ends = [(_find(tree, list(names)), message) for names, message in inits]
        for node, message in sorted(ends, key=lambda t: -t[0].end_lineno):
            indent = b" " * node.body[0].col_offset
            lines[node.end_lineno - 1] += (
                indent + b"def __init__(self, *args, **kwargs):\n"
                + indent + b"    " + _raise_line(message).encode() + b"\n"
            )  # fmt: skip
    out = b"".join(lines).decode("utf-8")
    compile(out, "<sealed>", "exec")  # a broken splice must fail here, not in a kernel
    return out


def _message(name: str, numbers: list[int], lab: str) -> str:
    which = " and ".join(str(n) for n in numbers)
    plural = "s" if len(numbers) > 1 else ""
    return (
        f"{name} is the reference implementation of exercise{plural} {which} of {lab}: it is "
        "not available while grading (the exercise asks you to write it yourself)"
    )


def seal(key: dict[str, Any], package: Path = PACKAGE_DIR) -> Path:
    """The folder holding this key's sealed copy of ``labs`` (made once per process and key)."""
    refs = forbidden(key)
    digest = hashlib.sha256(json.dumps([str(package), key.get("lab"), refs]).encode()).hexdigest()
    with _LOCK:
        if digest in _CACHE and _CACHE[digest].is_dir():
            return _CACHE[digest]
        if not _ROOT:
            _ROOT.append(Path(tempfile.mkdtemp(prefix="labs-sealed-")))
            atexit.register(shutil.rmtree, _ROOT[0], True)
        root = _ROOT[0] / digest[:16]
        shutil.rmtree(root, ignore_errors=True)
        shutil.copytree(package, root / "labs", ignore=_IGNORE)
        where: dict[tuple[Path, tuple[str, ...]], set[int]] = {}  # a def named twice: once
        for name, numbers in refs.items():
            path, names = locate(name, package)
            where.setdefault((path, tuple(names)), set()).update(numbers)
        by_file: dict[Path, dict[tuple[str, ...], str]] = {}
        for (path, names), numbers in where.items():
            dotted = ".".join(["labs", *path.relative_to(package).with_suffix("").parts, *names])
            dotted = dotted.replace(".__init__", "")
            message = _message(dotted, sorted(numbers), str(key.get("lab", "this lab")))
            by_file.setdefault(path, {})[names] = message
        for path, targets in by_file.items():
            copy = root / "labs" / path.relative_to(package)
            copy.write_text(strip_source(path.read_text(encoding="utf-8"), targets), "utf-8")
        for f in (root / "labs").rglob("*"):
            if f.is_file():
                f.chmod(0o444)
        _CACHE[digest] = root
        return root
