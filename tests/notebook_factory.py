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

CHECK = """from labs.checks import exercise
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
            "from labs.checks import exercise\nwith exercise(2) as check:\n"
            "    check.close(area, math.pi, 'area')",
            "exercise-2",
        ),
        cell("print(double(area))", "uses-exercise-1", "uses-exercise-2"),
        cell("print('independent cell')"),
    )
