"""Build small lab notebooks for the release and grade tests."""

from __future__ import annotations

from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook


def cell(source: str, *tags: str, kind: str = "code"):
    c = new_code_cell(source) if kind == "code" else new_markdown_cell(source)
    if tags:
        c.metadata["tags"] = list(tags)
    return c


def lab(*cells) -> nbformat.NotebookNode:
    return new_notebook(
        cells=list(cells),
        metadata={
            "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}
        },
    )


def write(path: Path, nb) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)
    return path


SOLUTION = '''def double(x):
    """Twice x."""
    # BEGIN SOLUTION exercise-1: return twice x
    y = x + x
    return y
    # END SOLUTION'''

CHECK = """from labs.course.checks import exercise
with exercise(1, "double") as check:
    check.equal(double(21), 42, "double(21)")"""


def good_lab():
    """A valid two-exercise lab: one function, one top-level solution, checks, a uses- cell."""
    return lab(
        cell("# A tiny lab", kind="markdown"),
        cell("import math"),
        cell(SOLUTION, "hide-input"),
        cell(CHECK, "exercise-1"),
        cell(
            "# BEGIN SOLUTION exercise-2: set area to the area of a unit circle\n"
            "area = math.pi\n# END SOLUTION",
            "hide-input",
        ),
        cell(
            "from labs.course.checks import exercise\nwith exercise(2) as check:\n"
            "    check.close(area, math.pi, 'area')",
            "exercise-2",
        ),
        cell("print(double(area))", "uses-exercise-1", "uses-exercise-2"),
        cell("print('independent cell')"),
    )


def write_lab_and_key(folder: Path, name: str, nb=None, references=None) -> tuple[Path, Path]:
    """Write a solution lab ``folder/name.ipynb`` and its answer key ``folder/keys/name.json``."""
    from labs.course.key import build_key, key_text
    from labs.course.notebooks import parse_lab

    nb = good_lab() if nb is None else nb
    if references:
        nb.metadata["exercise_references"] = references
    path = write(folder / f"{name}.ipynb", nb)
    key = folder / "keys" / f"{name}.json"
    key.parent.mkdir(parents=True, exist_ok=True)
    key.write_text(key_text(build_key(parse_lab(path))), encoding="utf-8")
    return path, key


EXPECT_CLOSE = """from labs.course.checks import exercise


def expect_close(check, got, want, what):
    check.close(got, want, what, rtol=1e-12)


with exercise(2) as check:
    expect_close(check, area, math.pi, "area")"""

BYTES_SOLUTION = '''def weight_bytes(n_params, dtype="bf16"):
    """Bytes of n_params weights stored in dtype."""
    # BEGIN SOLUTION exercise-3: bytes of the weights in dtype
    return n_params * {"fp32": 4, "bf16": 2, "int8": 1}[dtype]
    # END SOLUTION'''

BYTES_CHECK = """from labs.basics import memory
from labs.course.checks import exercise

with exercise(3, "weight bytes") as check:
    for n, dtype in [(10, "fp32"), (7, "bf16"), (3, "int8")]:
        want = memory.inference_bytes(n, dtype)  # the check may use the reference
        expect_close(check, weight_bytes(n, dtype), want, f"weight_bytes({n}, {dtype!r})")"""

#: exercise 3 asks for what labs.basics.memory.inference_bytes computes: the key forbids calling it
ATTACK_REFERENCES = {"3": ["labs.basics.memory.inference_bytes"]}


def attack_lab():
    """Three exercises; exercise 2's check cell defines a helper that exercise 3's check calls."""
    nb = good_lab()
    nb.cells[5].source = EXPECT_CLOSE
    nb.cells.append(cell(BYTES_SOLUTION, "hide-input"))
    nb.cells.append(cell(BYTES_CHECK, "exercise-3"))
    nb.metadata["exercise_references"] = ATTACK_REFERENCES
    return nb
