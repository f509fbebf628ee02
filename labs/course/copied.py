"""Submissions that paste a reference implementation from ``labs``: found in their source text.

The sealed copy of ``labs`` a submission's kernel imports has no reference implementation
(:mod:`labs.course.sealed_labs`), but the student's own ``pip install`` of the book's package
has them all: a student can paste ``labs/basics/flops.py``'s ``matmul_flops`` into a cell under
another name and the kernel computes the right values with it.  :func:`copied_references` looks
for that in the *source* of the cells the grader runs, in the grader's own process (nothing the
kernel does decides it):

* every function and class the submission defines, at any depth (methods, nested functions,
  and code inside string constants that parse as Python, such as ``exec('''...''')`` or a
  ``%%capture`` cell's body, or decode to it from base64 with zlib, gzip, bz2 or lzma) is turned
  into a :func:`shape`: its syntax tree in order, node by node, every string constant one token
  ``STR``, numbers kept, docstrings, comments, type annotations and layout dropped, and its
  identifiers (names, attributes, arguments) either renamed in order of first use or all alike —
  renaming variables, re-wrapping lines or deleting comments changes nothing;
* each reference the key lists for an exercise (its full source in the grader's package: a
  function, a class as a whole and each of its methods) is turned into the same;
* :class:`difflib.SequenceMatcher` compares them (``ratio()``: twice the matched tokens over the
  two lengths; :func:`score` takes the renamed ratio, or the all-alike one less
  :data:`PLAIN_PENALTY` if higher).  A pair at or above :data:`THRESHOLD`, where the reference
  has at least :data:`MIN_TOKENS` tokens, marks the exercise FAIL: "cell 4 defines ``f``, which
  matches labs' reference labs.basics.flops.matmul_flops (similarity 1.00): the exercise asks
  for your own code".

A reference shorter than :data:`MIN_TOKENS` (``return 2 * m * k * n``) is never compared: an
honest answer looks the same.  What it cannot see: code that is not in the cells' text (read
from the installed package or a file at run time, downloaded, encoded otherwise), and a copy
rewritten enough (statements reordered, loops restructured, dead code added) to fall below the
threshold.  ``tests/test_grade_copied.py`` holds the calibration: zero flags on every lab's
solution and student notebook, the closest honest solution at least 0.01 under the threshold,
and the red team's style of pasted copies flagged.
"""

from __future__ import annotations

import ast
import base64
import bz2
import difflib
import io
import lzma
import re
import zlib
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from labs.course.sealed_labs import PACKAGE_DIR, forbidden, locate

__all__ = [
    "THRESHOLD", "PLAIN_PENALTY", "MIN_TOKENS", "Match", "tokens", "shape", "definitions", "score",
    "similarity", "best_matches", "copied_references",
]  # fmt: skip

THRESHOLD = 0.95  #: similarity at or above which a definition is a copy of a reference
PLAIN_PENALTY = 0.02  #: what the ratio with identifiers all alike is discounted by
MIN_TOKENS = 40  #: references with fewer normalised tokens are not compared (too generic)
_MAX_DEPTH = 3  #: code inside strings inside strings ...: how deep to look
_SKIP_FIELDS = {"annotation", "returns", "type_comment", "ctx", "type_params"}
_IDENT_FIELDS = {"id", "arg", "attr", "name"}  # Name, arg, Attribute, def/class/except/alias
_BASE64 = re.compile(rb"[A-Za-z0-9+/_-]+={0,2}")
_MAX_BLOB = 4 << 20  #: decoded blobs larger than this are not read (a zip bomb stays small)
_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


@dataclass(frozen=True)
class Match:
    """A submission's definition that matches a reference implementation."""

    cell: int
    name: str
    reference: str
    similarity: float

    def message(self) -> str:
        return (
            f"copied reference: cell {self.cell} defines {self.name}, which matches labs' "
            f"reference {self.reference} (similarity {self.similarity:.2f}): the exercise asks "
            "for your own code"
        )


def _is_doc(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
    )


def tokens(node: ast.AST, rename: bool = True) -> list[str]:
    """The normalised token sequence of a syntax tree (pre-order; see the module's docstring):
    identifiers renamed in order of first use (``rename``), or all one token ``v``.  Iterative:
    an expression nested deeper than Python's recursion limit cannot hide a definition."""
    out: list[str] = []
    names: dict[str, str] = {}  # identifier -> its order of first use: renaming changes nothing
    stack: list[Any] = [node]  # nodes to visit and identifiers to emit, the next one last
    while stack:
        n = stack.pop()
        if isinstance(n, str):
            out.append(names.setdefault(n, f"v{len(names)}") if rename else "v")
        elif isinstance(n, ast.expr_context) or _is_doc(n):
            continue
        elif isinstance(n, ast.Constant):
            out.append("STR" if isinstance(n.value, str | bytes) else f"C:{n.value!r}")
        elif isinstance(n, ast.JoinedStr):  # an f-string: one string, its holes kept
            out.append("STR")
            stack += [v.value for v in reversed(n.values) if isinstance(v, ast.FormattedValue)]
        else:
            out.append(type(n).__name__)
            todo: list[Any] = []
            for name, value in ast.iter_fields(n):
                if name in _SKIP_FIELDS:
                    continue
                if name in _IDENT_FIELDS:
                    todo += [value] if isinstance(value, str) else []
                elif isinstance(value, list):
                    todo += [item for item in value if isinstance(item, ast.AST)]
                elif isinstance(value, ast.AST):
                    todo.append(value)
            stack += reversed(todo)
    return out


def _parse(source: str) -> ast.Module | None:
    try:
        return ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        pass
    # IPython: line magics, shell escapes and a cell magic's first line become blank lines
    lines = ["" if line.lstrip().startswith(("%", "!")) else line for line in source.splitlines()]
    try:
        return ast.parse("\n".join(lines))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def _hidden_source(value: Any) -> str | None:
    """The text of a string or bytes constant that may hold code: as it is when it has several
    lines; base64 (then zlib, gzip, bz2 or lzma) decoded when it looks like a blob."""
    if isinstance(value, str) and "\n" in value.strip():
        return value
    raw = value.encode("latin-1", "ignore") if isinstance(value, str) else value
    if not isinstance(raw, bytes) or len(raw) < 64:
        return None
    candidates = [raw]
    compact = re.sub(rb"\s+", b"", raw)
    if _BASE64.fullmatch(compact):
        for decode in (base64.b64decode, base64.urlsafe_b64decode):
            try:
                candidates.append(decode(compact + b"=" * (-len(compact) % 4)))
            except ValueError:
                pass
    for blob in candidates:
        for unpack in _UNPACK:
            try:
                text = unpack(blob).decode("utf-8")
            except Exception:  # noqa: BLE001 - not that format (or too big): try the next
                continue
            if "\n" in text.strip():
                return text
    return None


def _inflate(blob: bytes) -> bytes:
    d = zlib.decompressobj(wbits=47)  # zlib or gzip header, detected
    out = d.decompress(blob, _MAX_BLOB)
    if d.unconsumed_tail:
        raise ValueError("too big")
    return out


def _bounded(open_: Any) -> Any:
    def unpack(blob: bytes) -> bytes:
        with open_(io.BytesIO(blob)) as f:
            out = f.read(_MAX_BLOB + 1)
        if len(out) > _MAX_BLOB:
            raise ValueError("too big")
        return out

    return unpack


_UNPACK = (lambda b: b, _inflate, _bounded(bz2.open), _bounded(lzma.open))


def shape(node: ast.AST) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """A definition's two token sequences: identifiers renamed, and identifiers all alike."""
    return tuple(tokens(node)), tuple(tokens(node, rename=False))


def definitions(source: str, depth: int = 0) -> list[tuple[str, tuple]]:
    """``[(qualified name, shape)]`` of every def and class in ``source``, at any depth,
    including those in string constants that parse as Python (up to :data:`_MAX_DEPTH`)."""
    tree = _parse(source)
    if tree is None:
        return []
    found: list[tuple[str, tuple]] = []
    stack: list[tuple[ast.AST, str]] = [(tree, "")]  # iterative, as in tokens()
    while stack:
        node, prefix = stack.pop()
        for child in reversed(list(ast.iter_child_nodes(node))):
            if isinstance(child, _DEFS):
                stack.append((child, f"{prefix}{child.name}."))
            else:
                if depth < _MAX_DEPTH and isinstance(child, ast.Constant):
                    text = _hidden_source(child.value)
                    if text:
                        inner = definitions(text, depth + 1)
                        found.extend((f"{n} (in a string constant)", t) for n, t in inner)
                stack.append((child, prefix))
        if isinstance(node, _DEFS):
            found.append((prefix[:-1], shape(node)))
    return found


@lru_cache(maxsize=512)
def _reference_units(name: str) -> tuple[tuple[str, tuple], ...]:
    """``((dotted name, shape), ...)`` of a reference: itself and, for a class, its methods."""
    path, parts = locate(name, PACKAGE_DIR)
    node: Any = ast.parse(path.read_text(encoding="utf-8"))
    for part in parts:
        node = next(n for n in node.body if isinstance(n, _DEFS) and n.name == part)
    units = [(name, shape(node))]
    if isinstance(node, ast.ClassDef):
        units += [
            (f"{name}.{m.name}", shape(m))
            for m in node.body
            if isinstance(m, ast.FunctionDef | ast.AsyncFunctionDef)
        ]
    return tuple(u for u in units if len(u[1][0]) >= MIN_TOKENS)


def similarity(a, b, floor: float = THRESHOLD) -> float:
    """``difflib`` ratio of two token sequences; 0 when a cheap upper bound (their lengths,
    their multisets of tokens) is already below ``floor``."""
    if not a or not b or 2 * min(len(a), len(b)) / (len(a) + len(b)) < floor:
        return 0.0
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    if matcher.quick_ratio() < floor:
        return 0.0
    return matcher.ratio()


def score(ref: tuple, mine: tuple, floor: float = THRESHOLD) -> float:
    """The similarity of two shapes: the ratio with identifiers renamed, or, if higher, the
    ratio with identifiers all alike less :data:`PLAIN_PENALTY` (it also sees through dead code
    that shifts the renaming, but is a weaker sign)."""
    renamed = similarity(ref[0], mine[0], floor)
    alike = similarity(ref[1], mine[1], floor + PLAIN_PENALTY) - PLAIN_PENALTY
    return max(renamed, alike, 0.0)


def best_matches(
    cells: list[tuple[int, str]], key: dict[str, Any], floor: float = THRESHOLD
) -> dict[int, Match]:
    """For each exercise of ``key``, its closest (cell, definition, reference) pair (scores
    below ``floor`` may be reported as 0)."""
    defs, seen = [], set()
    for index, source in cells:
        try:
            found = definitions(source)
        except (RecursionError, MemoryError):  # nested past what the parser can walk: no defs
            continue
        for name, toks in found:
            if toks not in seen:  # a thousand copies of one def are compared once
                seen.add(toks)
                defs.append((index, name, toks))
    best: dict[int, Match] = {}
    for ref, numbers in forbidden(key).items():
        try:
            units = _reference_units(ref)
        except (LookupError, OSError, SyntaxError, StopIteration):
            continue  # the key names what this package lacks: nothing to compare
        for unit, ref_shape in units:
            for index, name, toks in defs:
                value = score(ref_shape, toks, floor)
                for num in numbers:
                    if num not in best or value > best[num].similarity:
                        best[num] = Match(index, name, unit, round(value, 4))
    return best


def copied_references(cells: list[tuple[int, str]], key: dict[str, Any]) -> dict[int, str]:
    """``{exercise: why}`` for the exercises whose references the submission's cells copy.

    Args:
        cells: ``(cell index, source)`` of the code cells the grader runs.
        key: the lab's answer key (its exercises' ``references``).
    """
    return {
        num: m.message()
        for num, m in sorted(best_matches(cells, key).items())
        if m.similarity >= THRESHOLD
    }
