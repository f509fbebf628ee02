"""The exercise format of the lab notebooks: parse and validate them, read and write them.

A lab notebook (``book/labs/labNN-*.ipynb``) is the *solution* notebook.  Its exercises are marked
like this (see CONTRIBUTING.md):

* solution code sits between ``# BEGIN SOLUTION exercise-N: <what to implement>`` and
  ``# END SOLUTION`` lines, in a code cell tagged ``hide-input``;
* the cells that check exercise N are tagged ``exercise-N``;
* the *graded variants* of those checks, cells tagged ``graded-exercise-N`` and ``remove-cell``
  right after them: the same assertions on inputs the student never sees, run by the book and by
  the grader, absent from the student notebook (so a visible literal or formula cannot stand in
  for the student's answer);
* later cells that use exercise N's result are tagged ``uses-exercise-N``; cells that show a
  reference implementation at work (which a graded kernel does not have) ``uses-references``.

:func:`parse_lab` checks all of this and returns where each exercise lives; every problem raises
:class:`NotebookError` naming the notebook, the cell and what to do.  The student copy derived
from a parsed lab is :mod:`labs.course.student`'s.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nbformat

__all__ = [
    "NotebookError", "Exercise", "LabInfo", "REPO_ROOT", "load_notebook", "parse_lab",
    "cell_tags", "dumps",
]  # fmt: skip

REPO_ROOT = Path(__file__).resolve().parents[2]

BEGIN_RE = re.compile(r"^(?P<indent>[ \t]*)# BEGIN SOLUTION\b(?P<rest>.*)$")
END_RE = re.compile(r"^[ \t]*# END SOLUTION\b")
BEGIN_ARGS_RE = re.compile(r"^\s+exercise-(?P<num>\d+)\s*:\s*(?P<what>\S.*?)\s*$")
TAG_RE = re.compile(r"^(?P<kind>exercise|uses-exercise|graded-exercise)-(?P<num>\d+)$")


class NotebookError(ValueError):
    """A lab notebook is missing, unreadable, or breaks the exercise format."""


@dataclass
class Exercise:
    """Where exercise ``number`` lives in a notebook (cell indices into ``nb.cells``)."""

    number: int
    what: str = ""
    solution_cells: list[int] = field(default_factory=list)
    check_cells: list[int] = field(default_factory=list)
    uses_cells: list[int] = field(default_factory=list)
    graded_cells: list[int] = field(default_factory=list)


@dataclass
class LabInfo:
    """A parsed lab: the notebook node and its exercises by number."""

    path: Path
    nb: Any
    exercises: dict[int, Exercise]


def _cell_name(path: Path, index: int, cell: Any) -> str:
    cid = cell.get("id")
    return f"{path}, cell {index}" + (f" (id {cid})" if cid else "")


def load_notebook(path: str | Path, data: bytes | None = None) -> Any:
    """Read a notebook (nbformat v4, UTF-8 with or without a BOM) from ``path`` or its bytes
    ``data``, raising :class:`NotebookError` if missing or corrupt."""
    path = Path(path)
    if data is None and not path.is_file():
        raise NotebookError(f"{path}: no such notebook file")
    try:
        nb = nbformat.reads((path.read_bytes() if data is None else data).decode("utf-8-sig"), 4)
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise NotebookError(
            f"{path}: not a valid notebook (JSON could not be read: {err})"
        ) from err
    except Exception as err:  # nbformat raises several unrelated types on malformed files
        raise NotebookError(f"{path}: not a valid notebook ({type(err).__name__}: {err})") from err
    if not isinstance(nb.get("cells"), list):
        raise NotebookError(f"{path}: not a valid notebook (no list of cells)")
    for index, cell in enumerate(nb.cells):
        _validate_cell(path, index, cell)
    return nb


def _validate_cell(path: Path, index: int, cell: Any) -> None:
    """Raise :class:`NotebookError` unless the cell has the types nbformat v4 prescribes."""
    where = f"{path}: not a valid notebook (cell {index}"
    if not isinstance(cell, dict) or not isinstance(cell.get("cell_type"), str):
        raise NotebookError(f"{where} is not a cell with a cell_type)")
    source = cell.get("source", "")
    if isinstance(source, list) and all(isinstance(x, str) for x in source):
        cell["source"] = source = "".join(source)
    if not isinstance(source, str):
        raise NotebookError(f"{where}: source is a {type(source).__name__}, not text)")
    metadata = cell.get("metadata", {})
    if not isinstance(metadata, dict):
        raise NotebookError(f"{where}: metadata is a {type(metadata).__name__}, not a mapping)")
    tags = metadata.get("tags", [])
    if tags is None:
        metadata.pop("tags")
    elif not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        raise NotebookError(f"{where}: tags must be a list of strings, got {tags!r:.60})")


def cell_tags(cell: Any) -> list[str]:
    """The tags of a notebook cell (``metadata.tags``), an empty list when it has none."""
    return list(cell.get("metadata", {}).get("tags", []))


def parse_lab(path: str | Path, nb: Any | None = None, require_solutions: bool = True) -> LabInfo:
    """Find and validate the exercises of a lab notebook.

    Args:
        path: the notebook file (also used in error messages).
        nb: the notebook node, if already loaded.
        require_solutions: ``True`` for solution notebooks (every ``exercise-N`` tag needs a
            solution block); ``False`` for student notebooks and submissions (tags only).

    Raises:
        NotebookError: unbalanced or malformed markers, a marker outside a code cell, a check tag
            without a solution block (or the reverse), a solution cell not tagged ``hide-input``,
            a check cell hidden, or a ``uses-exercise-N`` tag for an unknown exercise.
    """
    path = Path(path)
    nb = load_notebook(path) if nb is None else nb
    exercises: dict[int, Exercise] = {}
    uses: dict[int, list[int]] = {}

    def get(num: int) -> Exercise:
        return exercises.setdefault(num, Exercise(num))

    for index, cell in enumerate(nb.cells):
        where = _cell_name(path, index, cell)
        lines = cell.get("source", "").splitlines()
        open_num: int | None = None
        open_line = 0
        for lineno, line in enumerate(lines, start=1):
            begin = BEGIN_RE.match(line)
            if begin:
                if cell.cell_type != "code":
                    raise NotebookError(f"{where}: solution marker in a {cell.cell_type} cell")
                if open_num is not None:
                    raise NotebookError(
                        f"{where}, line {lineno}: BEGIN SOLUTION inside the block opened at line "
                        f"{open_line}; close it with '# END SOLUTION' first"
                    )
                args = BEGIN_ARGS_RE.match(begin.group("rest"))
                if not args:
                    raise NotebookError(
                        f"{where}, line {lineno}: write the marker as "
                        f"'# BEGIN SOLUTION exercise-N: <what to implement>', got {line.strip()!r}"
                    )
                open_num, open_line = int(args.group("num")), lineno
                ex = get(open_num)
                ex.what = ex.what or args.group("what")
                if index not in ex.solution_cells:
                    ex.solution_cells.append(index)
            elif END_RE.match(line):
                if open_num is None:
                    raise NotebookError(
                        f"{where}, line {lineno}: END SOLUTION without a BEGIN SOLUTION before it"
                    )
                open_num = None
        if open_num is not None:
            raise NotebookError(
                f"{where}, line {open_line}: BEGIN SOLUTION exercise-{open_num} is never closed; "
                "add '# END SOLUTION'"
            )
        for tag in cell_tags(cell):
            m = TAG_RE.match(tag)
            if not m:
                continue
            num = int(m.group("num"))
            if m.group("kind") == "exercise":
                if "hide-input" in cell_tags(cell) or "remove-input" in cell_tags(cell):
                    raise NotebookError(
                        f"{where}: check cell of exercise {num} is hidden; checks stay visible "
                        "(remove the hide-input/remove-input tag)"
                    )
                get(num).check_cells.append(index)
            elif m.group("kind") == "graded-exercise":
                _graded_cell(where, cell, nb, index, num)
                get(num).graded_cells.append(index)
            else:
                uses.setdefault(num, []).append(index)

    for num, ex in sorted(exercises.items()):
        if require_solutions:
            if not ex.solution_cells:
                first = ex.check_cells[0]
                raise NotebookError(
                    f"{_cell_name(path, first, nb.cells[first])}: tagged exercise-{num} but the "
                    f"notebook has no '# BEGIN SOLUTION exercise-{num}: ...' block"
                )
            for i in ex.solution_cells:
                if "hide-input" not in cell_tags(nb.cells[i]):
                    raise NotebookError(
                        f"{_cell_name(path, i, nb.cells[i])}: holds the solution of exercise {num}"
                        " but is not tagged hide-input (the book must collapse solutions)"
                    )
        if not ex.check_cells:
            first = ex.solution_cells[0]
            raise NotebookError(
                f"{_cell_name(path, first, nb.cells[first])}: exercise {num} has a solution but no "
                f"check cell; tag the cell that checks it 'exercise-{num}'"
            )
    special = {i for ex in exercises.values() for i in (*ex.solution_cells, *ex.check_cells,
                                                         *ex.graded_cells)}  # fmt: skip
    for index, cell in enumerate(nb.cells):
        if "uses-references" in cell_tags(cell) and (index in special or cell.cell_type != "code"):
            raise NotebookError(
                f"{_cell_name(path, index, cell)}: uses-references marks an ordinary code cell "
                "(the grader skips it), not a solution, check or graded cell"
            )
    for num, cells in uses.items():
        if num not in exercises:
            raise NotebookError(
                f"{_cell_name(path, cells[0], nb.cells[cells[0]])}: tagged uses-exercise-{num} but "
                f"there is no exercise {num}"
            )
        exercises[num].uses_cells.extend(cells)
    return LabInfo(path=path, nb=nb, exercises=dict(sorted(exercises.items())))


def _graded_cell(where: str, cell: Any, nb: Any, index: int, num: int) -> None:
    """A graded variant: a code cell removed from the book, right after exercise num's checks."""
    tags = cell_tags(cell)
    if cell.cell_type != "code" or "remove-cell" not in tags:
        raise NotebookError(
            f"{where}: a graded variant of exercise {num}'s check must be a code cell tagged "
            "remove-cell (the book hides it, the student notebook drops it)"
        )
    if f"exercise-{num}" in tags or BEGIN_RE.search(cell.get("source", "")):
        raise NotebookError(f"{where}: a graded variant is neither a check cell nor a solution")
    before = next(
        (c for c in reversed(nb.cells[:index]) if c.cell_type == "code"), None
    )  # the code cell right before it
    previous = set(cell_tags(before)) if before is not None else set()
    if not previous & {f"exercise-{num}", f"graded-exercise-{num}"}:
        raise NotebookError(
            f"{where}: a graded-exercise-{num} cell must come right after exercise {num}'s last "
            "check cell (or another of its graded variants)"
        )


def dumps(nb: Any) -> str:
    """The text of ``nb`` exactly as the release tool stores it (ends with one newline)."""
    text = nbformat.writes(nb)
    return text if text.endswith("\n") else text + "\n"
