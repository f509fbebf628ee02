"""The gradebook files ``labs-grade`` writes, and reading the JSON one back.

``.csv``: one row per student x lab x exercise, columns :data:`COLUMNS` (``points`` earned and
``max_points`` as the key sets them; both empty for an exercise that is not applicable); a CSV
is often handed to students, so a graded variant (a hidden check) is in it only as ``hidden check
j of n of exercise N``. ``.json``: the instructor's file (never the student's), the same grouped
by notebook with, per exercise, the ``detail`` of its hidden checks (their inputs and expected
values), the failing cells, the key's points per lab, each notebook's ``exact`` path and student
folder name (percent-encoded; :func:`read_json` keys on them, so that two folders whose names
clean to the same text stay two students) and, for a shard of a class (:mod:`labs.course.shards`),
which shard it is. Every text cell goes through
:func:`labs.course.feedback.clean` (CSV cells also through
:func:`~labs.course.feedback.spreadsheet_cell`), so nothing the student's code printed can redraw a
terminal or run in a spreadsheet; :func:`read_json` rebuilds the results, so that merged shards
write the very bytes an unsharded run writes.
"""

from __future__ import annotations

import csv
import io
import json
import os
import tempfile
from pathlib import Path
from typing import Any
from urllib.parse import quote_from_bytes, unquote_to_bytes

from labs.course.feedback import clean, number, spreadsheet_cell
from labs.course.results import ExerciseResult, NotebookResult
from labs.course.tree import remove_tree

__all__ = ["COLUMNS", "Points", "rows", "payload", "write_gradebook", "write_atomic", "read_json"]

COLUMNS = [
    "student", "lab", "exercise", "outcome", "points", "max_points", "status", "message",
    "notebook",
]  # fmt: skip
FORMAT = "labs-grade/1"
Points = dict[str, dict[int, float]]  #: lab -> exercise -> points (from the keys)


def _student(r: NotebookResult, students: dict[str, str]) -> str:
    return students.get(r.notebook, Path(r.notebook).stem)


def _points(e: ExerciseResult, lab_points: dict[int, float]) -> tuple[str, str]:
    """``(earned, possible)`` as text; both empty for N/A."""
    if e.outcome == "N/A":
        return "", ""
    possible = lab_points.get(e.exercise, 1) if e.exercise else 0
    return number(possible if e.passed else 0), number(possible)


def rows(
    results: list[NotebookResult], students: dict[str, str], points: Points | None = None
) -> list[dict]:
    """Gradebook rows, one per exercise (``students`` maps a notebook path to its student;
    ``points`` the key's points per lab, 1 per exercise where it says nothing)."""
    points = points or {}
    out = []
    for r in results:
        for e in r.exercises:
            earned, possible = _points(e, points.get(r.lab, {}))
            out.append(
                {
                    "student": clean(_student(r, students)),
                    "lab": clean(r.lab),
                    "exercise": str(e.exercise) if e.exercise else "",
                    "outcome": e.outcome,
                    "points": earned,
                    "max_points": possible,
                    "status": e.status,
                    "message": clean(e.message),
                    "notebook": clean(r.notebook),
                }
            )
    return out


def payload(results, students, points: Points, shard: dict | None = None) -> dict[str, Any]:
    """The JSON gradebook (``shard``: where this shard of a class stands, or none)."""
    labs = sorted({r.lab for r in results if r.lab in points})
    doc: dict[str, Any] = {"format": FORMAT}
    if shard is not None:
        doc["shard"] = shard
    doc["points"] = {lab: {str(n): p for n, p in sorted(points[lab].items())} for lab in labs}
    doc["notebooks"] = [
        {
            "notebook": clean(r.notebook),
            "student": clean(_student(r, students)),
            "exact": {"notebook": _exact(r.notebook), "student": _exact(_student(r, students))},
            "lab": clean(r.lab),
            "status": r.status,
            "passed": r.passed,
            "isolation": clean(r.isolation),
            "check_cells": list(r.check_cells),
            "exercises": [
                {
                    "exercise": e.exercise,
                    "passed": e.passed,
                    "status": e.status,
                    "error": clean(e.error),
                    "message": clean(e.message),
                    "detail": clean(e.detail),
                    "points": _points(e, points.get(r.lab, {}))[0],
                    "max_points": _points(e, points.get(r.lab, {}))[1],
                }
                for e in r.exercises
            ],
            "failed_cells": {str(k): clean(v) for k, v in sorted(r.failed_cells.items())},
        }
        for r in results
    ]
    return doc


def write_atomic(path: Path, text: str | bytes) -> None:
    """Write ``text`` (a string, stored as UTF-8, or bytes) to ``path`` through a temporary file
    and a rename.

    The temporary file has an unpredictable name (``tempfile.mkstemp`` in the target's folder), so
    nothing a kernel planted beforehand (a folder or a link under a guessable name) can block it.
    Whatever stood under ``path`` (a forged file, a folder) is replaced; if the write fails all the
    same, ``path`` is removed before the error is raised: a file under the real name is always
    this grader's.

    Raises:
        OSError: the file could not be written (``path`` then does not exist).
    """
    path = Path(path)
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        umask = os.umask(0o022)
        os.umask(umask)
        os.fchmod(fd, 0o666 & ~umask)  # the mode an ordinary write gives, not mkstemp's 0600
        with os.fdopen(fd, "wb") as f:
            f.write(text.encode("utf-8") if isinstance(text, str) else text)
        try:
            os.replace(tmp, path)
        except OSError:  # a folder under the real name: remove it, then rename once more
            _remove(path)
            os.replace(tmp, path)
    except OSError as err:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
        _remove(path)
        left = "STILL THERE: delete it by hand" if os.path.lexists(path) else "nothing left there"
        raise OSError(err.errno, f"{err.strerror or err} ({left})", str(path)) from err


def _remove(path: Path) -> None:
    """Remove whatever is under ``path`` (file, link or folder tree); quiet if nothing is."""
    try:
        if path.is_dir() and not path.is_symlink():
            remove_tree(path)
        else:
            path.unlink(missing_ok=True)
    except OSError:
        pass


def csv_text(header: list[str], records: list[list[str]]) -> str:
    """CSV (RFC 4180, ``\\r\\n``) with every cell guarded against formula injection."""
    buf = io.StringIO()
    writer = csv.writer(buf)
    writer.writerow(header)
    writer.writerows([spreadsheet_cell(c) for c in row] for row in records)
    return buf.getvalue()


def write_gradebook(results, students, path: Path, points: Points, shard=None) -> None:
    """Write the rows (``.csv``) or the per-notebook results (``.json``) through a rename."""
    if path.suffix.lower() == ".csv":
        table = rows(results, students, points)
        write_atomic(path, csv_text(COLUMNS, [[row[c] for c in COLUMNS] for row in table]))
    else:
        write_atomic(path, json.dumps(payload(results, students, points, shard), indent=2) + "\n")


def _exact(name: str) -> str:
    """``name`` as it is, percent-encoded (ASCII, nothing to escape, :func:`_unexact` undoes it)."""
    return quote_from_bytes(os.fsencode(name), safe="/")


def _unexact(text: Any) -> str:
    if text is None:
        return ""
    if not isinstance(text, str):
        raise TypeError(f"an exact name must be text, not {text!r:.60}")
    return os.fsdecode(unquote_to_bytes(text))


def read_json(doc: dict[str, Any]) -> tuple[list[NotebookResult], dict[str, str], Points]:
    """``(results, students, points)`` from a JSON gradebook written by :func:`write_gradebook`.

    Raises:
        ValueError: ``doc`` is not such a gradebook.
    """
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise ValueError(f"not a JSON gradebook of labs-grade (format {FORMAT!r})")
    try:
        points = {
            lab: {int(n): p for n, p in ex.items()} for lab, ex in doc.get("points", {}).items()
        }
        results, students = [], {}
        for nb in doc["notebooks"]:
            exercises = [
                ExerciseResult(
                    _unexact((nb.get("exact") or {}).get("notebook")) or nb["notebook"],
                    e["exercise"],
                    e["passed"],
                    e["error"],
                    e["status"],
                    verified=e["message"] if e["passed"] else "",
                    detail=e.get("detail", ""),
                )
                for e in nb["exercises"]
            ]
            failed = {int(k): v for k, v in nb["failed_cells"].items()}
            exact = nb.get("exact") or {}  # the folder's own name: two that clean alike stay two
            notebook = _unexact(exact.get("notebook")) or nb["notebook"]
            results.append(
                NotebookResult(
                    notebook,
                    exercises,
                    failed,
                    0,
                    list(nb["check_cells"]),
                    nb["lab"],
                    nb["status"],
                    nb["isolation"],
                )
            )
            students[notebook] = _unexact(exact.get("student")) or nb["student"]
    except (KeyError, TypeError, ValueError, AttributeError) as err:
        raise ValueError(f"a JSON gradebook of labs-grade, but malformed ({err!r})") from err
    return results, students, points
