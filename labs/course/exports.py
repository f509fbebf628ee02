"""Gradebooks for an LMS: Canvas's and Moodle's CSV grade import, from a roster.

A roster (CSV, UTF-8) maps the class folder's names to LMS identities. Its header names columns
the way the LMSs' own gradebook exports do, so the easiest roster is the LMS's export with one
column added, ``folder`` (the student's folder name in the class folder; required, unique):

==================  ==========================================================================
roster column       used for
==================  ==========================================================================
``folder``          the class folder's name (``class/<folder>/labNN.ipynb``)
``Student``         the name Canvas shows ("Last, First"); or ``First name`` and ``Last name``
``ID``              Canvas's user ID
``SIS User ID``     Canvas's SIS user ID
``SIS Login ID``    Canvas's login ID
``Section``         Canvas's section
``Email address``   Moodle's ``useremail`` (or ``Username``: ``username``; ``ID number``:
                    ``useridnumber``)
==================  ==========================================================================

**Canvas** (Grades > Import; the importer reads ``Student, ID, SIS User ID, SIS Login ID,
Section`` and then one column per assignment, and a ``Points Possible`` row; it matches a student
by ID, then SIS User ID, then SIS Login ID): :func:`canvas` writes exactly those columns, one column
per lab named after it (Canvas matches an assignment by that title or creates it), the Points
Possible row from the keys, and each student's points per lab; a lab the student did not submit is
left blank (Canvas: no change).

**Moodle** (Grades > Import > CSV file; the form maps one column to a user field --
``useremail``, ``username`` or ``useridnumber`` -- and each other column to a grade item or a new
one; a row whose user is not found aborts the whole import; a blank grade is "no grade"):
:func:`moodle` writes ``First name``, ``Last name``, the first identifier the roster has of
``Email address``, ``Username``, ``ID number``, and one column per lab.

A graded folder missing from the roster, or a rostered student with no identifier the LMS
matches on, is left out of the export and reported (:class:`Export` ``.left_out``): the import
never guesses who a row is. Rostered students without any submission are left out too.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass, field
from pathlib import Path

from labs.course.feedback import clean, number
from labs.course.gradefile import Points, csv_text, write_atomic
from labs.course.results import NotebookResult

__all__ = ["RosterError", "FORMATS", "Export", "read_roster", "lab_scores", "canvas", "moodle",
           "write_export"]  # fmt: skip

FORMATS = ("canvas", "moodle")
CANVAS_IDS = ("ID", "SIS User ID", "SIS Login ID")
MOODLE_IDS = ("Email address", "Username", "ID number")
_ALIASES = {  # roster header (case and spaces ignored) -> canonical column
    "folder": "folder", "student": "Student", "name": "Student", "id": "ID",
    "canvas id": "ID", "sis user id": "SIS User ID", "sis login id": "SIS Login ID",
    "section": "Section", "email address": "Email address", "email": "Email address",
    "username": "Username", "id number": "ID number", "idnumber": "ID number",
    "first name": "First name", "last name": "Last name",
}  # fmt: skip


class RosterError(ValueError):
    """The roster cannot be read or is ambiguous (a usage error: exit 2)."""


@dataclass
class Export:
    """An LMS gradebook: its header and rows, and who was left out and why."""

    header: list[str]
    records: list[list[str]]
    left_out: list[str] = field(default_factory=list)  #: one escaped sentence per student
    note: str = ""  #: how to import it


def read_roster(path: Path) -> tuple[list[str], dict[str, dict[str, str]]]:
    """``(columns, {folder: {column: value}})`` of a roster CSV (columns canonical, in order)."""
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as err:
        raise RosterError(f"--roster {path}: cannot read it ({err})") from err
    reader = csv.reader(io.StringIO(text, newline=""))
    header = next(reader, None)
    if not header:
        raise RosterError(f"--roster {path}: empty; the first line names the columns")
    columns = [_ALIASES.get(" ".join(h.lower().split()), h.strip()) for h in header]
    if "folder" not in columns:
        raise RosterError(
            f"--roster {path}: no 'folder' column (the student's folder name in the class "
            f"folder); columns found: {', '.join(map(clean, header))}"
        )
    people: dict[str, dict[str, str]] = {}
    for line_no, row in enumerate(reader, start=2):
        if not any(cell.strip() for cell in row):
            continue
        person = {c: (row[i].strip() if i < len(row) else "") for i, c in enumerate(columns)}
        folder = person["folder"]
        if not folder:
            raise RosterError(f"--roster {path}, line {line_no}: the folder cell is empty")
        if folder in people:
            raise RosterError(f"--roster {path}, line {line_no}: folder {clean(folder)!r} twice")
        people[folder] = person
    return columns, people


def lab_scores(results: list[NotebookResult], students: dict[str, str], points: Points):
    """``({student: {lab: points earned}}, {lab: points possible})`` from graded results.

    An exercise that is not applicable counts in neither.
    """
    scores: dict[str, dict[str, float]] = {}
    possible: dict[str, float] = {}
    for r in results:
        if not r.lab:
            continue
        who = students.get(r.notebook, Path(r.notebook).stem)
        lab_points = points.get(r.lab, {})
        earned = sum(lab_points.get(e.exercise, 1) for e in r.exercises if e.passed)
        scores.setdefault(who, {})[r.lab] = earned
        total = sum(lab_points.get(e.exercise, 1) for e in r.exercises if e.outcome != "N/A")
        possible[r.lab] = max(possible.get(r.lab, 0), total)
    return scores, possible


def _included(scores, people, ids, what) -> tuple[list[str], list[str]]:
    """Rostered students with a score and one of ``ids``; the sentences for the others."""
    left = [
        f"{clean(s)}: not in the roster (not exported; add a row with folder={clean(s)})"
        for s in sorted(scores)
        if s not in people
    ]
    keep = []
    for folder, person in people.items():
        if folder not in scores:
            continue
        if not any(person.get(c) for c in ids):
            left.append(f"{clean(folder)}: no {what} in the roster (not exported)")
            continue
        keep.append(folder)
    return keep, left


def canvas(results, students, points: Points, roster) -> Export:
    """Canvas's gradebook import: student columns, one column per lab, a Points Possible row."""
    columns, people = roster
    scores, possible = lab_scores(results, students, points)
    labs = sorted(possible)
    keep, left = _included(scores, people, CANVAS_IDS, "ID, SIS User ID or SIS Login ID")
    header = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", *labs]
    records = [["Points Possible", "", "", "", "", *(number(possible[lab]) for lab in labs)]]
    for folder in keep:
        p = people[folder]
        name = p.get("Student") or ", ".join(
            x for x in (p.get("Last name", ""), p.get("First name", "")) if x
        )
        got = scores[folder]
        records.append(
            [name or folder, p.get("ID", ""), p.get("SIS User ID", ""), p.get("SIS Login ID", ""),
             p.get("Section", ""), *(number(got[lab]) if lab in got else "" for lab in labs)]
        )  # fmt: skip
    note = "Canvas: Grades > Import; labs become assignments by title, points from the first row"
    return Export(header, records, left, note)


def moodle(results, students, points: Points, roster) -> Export:
    """Moodle's CSV grade import: names, one identifier column, one column per grade item."""
    columns, people = roster
    ident = next((c for c in MOODLE_IDS if c in columns), None)
    if ident is None:
        raise RosterError(
            "--export moodle needs an identifier column in the roster: 'Email address', "
            "'Username' or 'ID number'"
        )
    scores, possible = lab_scores(results, students, points)
    labs = sorted(possible)
    keep, left = _included(scores, people, (ident,), ident)
    header = ["First name", "Last name", ident, *labs]
    records = []
    for folder in keep:
        p = people[folder]
        first, last = p.get("First name", ""), p.get("Last name", "")
        if not (first or last) and p.get("Student"):
            last, _, first = (x.strip() for x in p["Student"].partition(","))
        got = scores[folder]
        records.append(
            [first, last, p[ident], *(number(got[lab]) if lab in got else "" for lab in labs)]
        )
    field_name = {"Email address": "useremail", "Username": "username", "ID number": "useridnumber"}
    maxima = ", ".join(f"{lab} {number(possible[lab])}" for lab in labs)
    note = (
        f"Moodle: Grades > Import > CSV file; map from '{ident}' to {field_name[ident]}, each lab "
        f"to its grade item (maximum grade: {maxima})"
    )
    return Export(header, records, left, note)


def write_export(kind: str, path: Path, results, students, points: Points, roster) -> Export:
    """Build the ``kind`` export and write it (UTF-8 CSV, cells guarded) through a rename."""
    export = (canvas if kind == "canvas" else moodle)(results, students, points, roster)
    write_atomic(path, csv_text(export.header, export.records))
    return export
