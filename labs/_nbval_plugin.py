"""A pytest plugin used by ``python -m labs.grade``: record each notebook cell's outcome.

It is loaded with ``-p labs._nbval_plugin`` next to nbval and writes one JSON line per executed
cell to the file named by the environment variable ``LABS_GRADE_RECORD``.
"""

from __future__ import annotations

import json
import os
import re

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_EXC_LINE = re.compile(
    r"^([A-Za-z_][\w.]*(?:Error|Exception|Failure|Interrupt|Exit|Warning))(:.*)?$"
)
_cells: dict[str, tuple[str, int, list[str]]] = {}


def first_error_line(text: str) -> str:
    """The most informative line of a failing cell's report: its last ``SomeError: ...`` line."""
    lines = [_ANSI.sub("", line).rstrip() for line in text.splitlines()]
    found = [line.strip() for line in lines if _EXC_LINE.match(line.strip())]
    if found:
        return found[-1]
    nonblank = [line.strip() for line in lines if line.strip()]
    return nonblank[-1] if nonblank else "failed"


def pytest_collection_modifyitems(session, config, items):
    for item in items:
        cell = getattr(item, "cell", None)
        if cell is None:
            continue
        index = getattr(item, "cell_num", None)
        tags = list(cell.get("metadata", {}).get("tags", []))
        _cells[item.nodeid] = (str(item.fspath), int(index) if index is not None else -1, tags)


def pytest_runtest_logreport(report):
    if report.when != "call" and not (report.when == "setup" and report.failed):
        return
    info = _cells.get(report.nodeid)
    path = os.environ.get("LABS_GRADE_RECORD")
    if info is None or not path:
        return
    notebook, index, tags = info
    error = first_error_line(str(report.longrepr)) if report.failed else ""
    record = {
        "notebook": notebook,
        "cell": index,
        "tags": tags,
        "outcome": report.outcome,
        "error": error,
    }
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(record) + "\n")
