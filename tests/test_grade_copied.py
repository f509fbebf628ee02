"""A submission that pastes a reference implementation from ``labs`` fails that exercise
(red team findings 1 and 2): :mod:`labs.course.copied`, calibrated on every lab."""

from __future__ import annotations

import ast
import base64
import inspect
import json
import re
import zlib
from pathlib import Path

import pytest

from conftest import REPO
from labs.course.copied import (
    MIN_TOKENS,
    THRESHOLD,
    _reference_units,
    best_matches,
    copied_references,
    definitions,
    score,
    tokens,
)
from labs.course.grade import grade_notebooks
from labs.course.key import compare, load_key, plan
from labs.course.notebooks import load_notebook
from notebook_factory import cell, good_lab, write, write_lab_and_key

KEYS = sorted((REPO / "instructor" / "keys").glob("*.json"))


def _cells(nb, key) -> list[tuple[int, str]]:
    """The code cells the grader runs (as :func:`labs.course.grade.grade_notebook` scans them)."""
    checks, _ = compare(nb, key)
    return [(s.index, s.source) for s in plan(nb, key, checks) if s.check is None]


def _source(dotted: str) -> str:
    module, _, name = dotted.rpartition(".")
    return inspect.getsource(getattr(__import__(module, fromlist=["_"]), name))


def _disguise(source: str, suffix: str = "_mine") -> str:
    """The red team's style: the reference's text, renamed, its docstring and annotations gone,
    a comment added; nothing else changed."""
    out = re.sub(r'^(\s*)""".*?"""\n', "", source, count=1, flags=re.S | re.M)
    out = re.sub(r"^(\s*)def (\w+)", rf"\1def \2{suffix}", out, flags=re.M)
    out = re.sub(r"^class (\w+)", rf"class \1{suffix}", out, flags=re.M)
    out = re.sub(r"(\w+): (int|float|str|bool|Any|Sequence\[int\])([,)])", r"\1\3", out)
    return "# pasted from my own pip install of labs\n" + out


def test_renaming_comments_docstrings_and_layout_change_nothing():
    a = 'def f(m, k, n):\n    """Doc."""\n    total = 2 * m * k  # c\n    return total * n\n'
    b = "def g(x: int, y, z) -> int:\n    t = (2 * x\n         * y)\n    return t * z"
    assert tokens(ast.parse(a).body[0]) == tokens(ast.parse(b).body[0])
    c = "def g(x, y, z):\n    t = 2 * x * y\n    return x * z"  # a different data flow
    assert score(definitions(a)[0][1], definitions(c)[0][1], 0.0) < 1.0


def test_definitions_are_found_nested_in_strings_and_in_encoded_blobs():
    body = "def inner(a, b):\n    return [a[i] + b[i] for i in range(len(a))]\n"
    nested = "class Outer:\n    def method(self):\n        " + body.replace("\n", "\n        ")
    names = [n for n, _ in definitions(nested)]
    assert names == ["Outer", "Outer.method", "Outer.method.inner"]
    in_exec = f"exec({body!r})"
    blob = base64.b64encode(zlib.compress(body.encode())).decode()
    in_blob = f"import base64, zlib\nexec(zlib.decompress(base64.b64decode({blob!r})))"
    magic = "%%capture\n" + body
    for source in (in_exec, in_blob, magic):
        (found,) = definitions(source)
        assert found[1] == definitions(body)[0][1], source


@pytest.mark.parametrize("path", KEYS, ids=lambda p: p.stem)
def test_no_lab_solution_or_student_notebook_is_flagged(path):
    key = load_key(path)
    for nb_path in (REPO / "book" / "labs" / f"{key['lab']}.ipynb",
                    REPO / "student" / f"{key['lab']}.ipynb"):  # fmt: skip
        cells = _cells(load_notebook(nb_path), key)
        assert copied_references(cells, key) == {}, nb_path


def test_the_honest_solutions_stay_below_the_threshold_with_a_margin():
    """The calibration the instructor guide quotes: the closest honest solution of all labs."""
    closest = max(
        m.similarity
        for path in KEYS
        for key in [load_key(path)]
        for m in best_matches(
            _cells(load_notebook(REPO / "book" / "labs" / f"{key['lab']}.ipynb"), key), key, 0.0
        ).values()
    )
    assert 0.5 < closest <= THRESHOLD - 0.01, closest


def _student(lab: str, *extra: tuple[int, str]):
    """The released student notebook with cells inserted after the given indices."""
    nb = load_notebook(REPO / "student" / f"{lab}.ipynb")
    for after, source in sorted(extra, reverse=True):
        nb.cells.insert(after + 1, cell(source))
    return nb


def _first_code(nb) -> int:
    return next(i for i, c in enumerate(nb.cells) if c.cell_type == "code")


@pytest.mark.parametrize("lab", ["lab02-matmul-flops", "lab03-data"])
def test_the_red_teams_pasted_references_are_flagged(lab):
    """Every reference of every exercise pasted (renamed) into one cell: each exercise FAILs,
    the message names the cell, the definition and the reference."""
    key = load_key(REPO / "instructor" / "keys" / f"{lab}.json")
    refs = sorted({r for ex in key["exercises"].values() for r in ex["references"]})
    pasted = "\n\n".join(_disguise(_source(r)) for r in refs)
    nb = _student(lab)
    at = _first_code(nb)
    nb.cells.insert(at + 1, cell("import math\nfrom collections import Counter\n\n" + pasted))
    found = copied_references(_cells(nb, key), key)
    comparable = [int(n) for n, ex in key["exercises"].items()
                  if any(_reference_units(r) for r in ex["references"])]  # fmt: skip
    assert comparable == ([1, 3, 4, 5] if lab.startswith("lab02") else [1, 2, 3, 4, 5])
    assert sorted(found) == comparable, found  # lab02 ex2's reference is a one-line formula
    for num, why in found.items():
        assert why.startswith(f"copied reference: cell {at + 1} defines "), why
        assert "(similarity 1.00): the exercise asks for your own code" in why
        assert any(f"reference {r} " in why or f"reference {r}." in why
                   for r in key["exercises"][str(num)]["references"]), why  # fmt: skip


def test_a_compressed_copy_like_the_red_teams_lab03_is_flagged():
    key = load_key(REPO / "instructor" / "keys" / "lab03-data.json")
    module = (REPO / "labs" / "data_eng" / "passk.py").read_text(encoding="utf-8")
    blob = base64.b64encode(zlib.compress(module.encode())).decode()
    source = f"import base64, zlib, types\n_B = {{'passk': {blob!r}}}\n"
    found = copied_references([(3, source)], key)
    assert list(found) == [5] and "(in a string constant)" in found[5], found


def test_dead_code_in_a_copy_does_not_hide_it():
    """Renaming in order of first use shifts after an inserted statement; the all-alike
    sequence does not."""
    key = {"exercises": {"1": {"references": ["labs.basics.flops.matmul_flops"]}}}
    lines = _disguise(_source("labs.basics.flops.matmul_flops")).splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("def ")) + 1
    padded = "\n".join([*lines[:at], "    _unused = 0", *lines[at:]])
    assert list(copied_references([(0, padded)], key)) == [1]


def test_a_deeply_nested_expression_does_not_hide_a_copy():
    """Python compiles an expression nested 1500 deep; a recursive walk would give up on the
    whole cell, and the copy next to it."""
    key = {"exercises": {"1": {"references": ["labs.basics.flops.matmul_flops"]}}}
    source = (
        "junk = " + "1 + " * 1500 + "1\n\n" + _disguise(_source("labs.basics.flops.matmul_flops"))
    )
    compile(source, "<cell>", "exec")
    assert list(copied_references([(0, source)], key)) == [1]


def test_small_references_and_other_exercises_references_are_not_compared():
    key = {"exercises": {"1": {"references": ["labs.basics.flops.matmul_flops"]},
                         "2": {"references": []}}}  # fmt: skip
    tiny = "def f(m, k, n):\n    return 2 * m * k * n\n"
    assert copied_references([(0, tiny)], key) == {}
    pasted = _disguise(_source("labs.basics.flops.matmul_flops"))
    assert list(copied_references([(0, pasted)], key)) == [1]
    assert len(definitions(pasted)[0][1][0]) >= MIN_TOKENS


def test_the_grader_fails_only_the_copied_exercise(tmp_path: Path):
    """End to end on a small lab whose exercise 1 lists matmul_flops as its reference."""
    _, key = write_lab_and_key(
        tmp_path / "instructor", "lab99-demo", references={"1": ["labs.basics.flops.matmul_flops"]}
    )
    nb = good_lab()
    nb.cells.insert(2, cell(_disguise(_source("labs.basics.flops.matmul_flops"))))
    honest = write(tmp_path / "honest" / "lab99-demo.ipynb", good_lab())
    copier = write(tmp_path / "copier" / "lab99-demo.ipynb", nb)
    ok, bad = grade_notebooks([honest, copier], key=key)
    assert [e.passed for e in ok.exercises] == [True, True]
    one, two = bad.exercises
    assert not one.passed and one.status == "graded" and two.passed
    assert one.error.startswith("copied reference: cell 2 defines matmul_flops_mine, which "
                                "matches labs' reference labs.basics.flops.matmul_flops")  # fmt: skip
    assert json.dumps(bad.exercises[0].message)  # plain text, for the gradebook
