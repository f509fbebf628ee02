"""The student copy of a lab: solution blocks become stubs, graded variants and guards go.

:func:`student_version` replaces each solution block of a parsed lab
(:func:`labs.course.notebooks.parse_lab`) by ``raise NotImplementedError("Exercise N: ...")``,
drops the graded variants and the guard cells of the prose, and clears outputs.  The release tool
(``labs-release``) writes what it returns into ``student/``.
"""

from __future__ import annotations

import copy
import re
from typing import Any

from labs.course.notebooks import BEGIN_ARGS_RE, BEGIN_RE, END_RE, LabInfo, cell_tags

__all__ = ["student_version", "strip_outputs", "is_guard_cell"]


def strip_outputs(nb: Any) -> Any:
    """Return a copy of ``nb`` with outputs and execution counts cleared."""
    nb = copy.deepcopy(nb)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
            cell.metadata.pop("execution", None)
    nb.metadata.pop("widgets", None)
    return nb


def student_version(info: LabInfo) -> Any:
    """The student notebook of a parsed lab: solutions become ``NotImplementedError`` stubs.

    Each ``BEGIN``..``END`` block (markers included) becomes one line,
    ``raise NotImplementedError("Exercise N: <what>")``, at the indentation of the marker.  The
    ``hide-input`` tag is dropped from those cells (students must see where to write), the guard
    cells (tagged ``remove-cell``, holding ``# guard: <name>`` above asserts on the reference run)
    are dropped, and all outputs are cleared.
    """
    nb = strip_outputs(info.nb)
    solution_cells = {i for ex in info.exercises.values() for i in ex.solution_cells}
    graded = {i for ex in info.exercises.values() for i in ex.graded_cells}
    for index in sorted(solution_cells):
        cell = nb.cells[index]
        out: list[str] = []
        skipping = False
        for line in cell.source.splitlines():
            begin = BEGIN_RE.match(line)
            if begin:
                args = BEGIN_ARGS_RE.match(begin.group("rest"))
                assert args is not None  # parse_lab validated it
                message = f"Exercise {args.group('num')}: {args.group('what')}"
                out.append(f"{begin.group('indent')}raise NotImplementedError({message!r})")
                skipping = True
            elif END_RE.match(line):
                skipping = False
            elif not skipping:
                out.append(line)
        cell.source = "\n".join(out)
        cell.metadata.pop("mystnb", None)  # the "Show solution" toggle labels
        tags = [t for t in cell_tags(cell) if t != "hide-input"]
        if tags:
            cell.metadata["tags"] = tags
        else:
            cell.metadata.pop("tags", None)
    nb.cells = [c for i, c in enumerate(nb.cells) if i not in graded and not is_guard_cell(c)]
    return nb


def is_guard_cell(cell: Any) -> bool:
    """A hidden code cell holding a guard of the prose (see CLAIMS-RULES.md)."""
    source = "".join(cell.get("source", ""))  # a string, or a list of lines as stored on disk
    return (
        cell.get("cell_type") == "code"
        and "remove-cell" in cell_tags(cell)
        and any(re.match(r"\s*#\s*guard:", line) for line in source.splitlines())
    )
