"""Feedback is data: control characters are escaped in every output, CSV cells never run formulas.

The red team's exception message redrew a FAIL row as PASS with ANSI escapes and reached the
gradebook. Here one hostile message (ANSI, carriage return, backspace, bidi override, NUL) and one
hostile folder name go through every output format: the table, the summary, the progress bar,
the CSV and JSON gradebooks, Gradescope's results.json, and the Canvas and Moodle exports. The
whole command, on a kernel's real exception, is tested in ``tests/test_gradebook.py``.
"""

from __future__ import annotations

import csv
import io
import json
import unicodedata

import pytest

from labs.course import exports, gradefile, gradescope, report
from labs.course.feedback import clean, escape, feedback_line, number, spreadsheet_cell
from labs.course.results import ExerciseResult, NotebookResult

HOSTILE = "\x1b[2K\r  1  PASS\x08\x08\u202eLIAF\u202c\x00 \x9b31m\u2066x\u2069\ufeff"
NAME = "=cmd|' /C calc'!A0\x1b[31m"
UNSAFE = {"Cc", "Cf", "Zl", "Zp", "Cs"}


def _unsafe(text: str) -> list[str]:
    """Characters a terminal or a spreadsheet would act on (newlines between rows aside)."""
    return [ch for ch in text if unicodedata.category(ch) in UNSAFE and ch not in "\n\r"]


def test_escape_makes_every_control_visible_and_is_idempotent():
    assert escape("\x1b[31mred\x1b[0m") == "\\x1b[31mred\\x1b[0m"
    assert escape("a\rb\x08c\x00d\x7f\x9b") == "a\\rb\\x08c\\x00d\\x7f\\x9b"
    assert escape("\u202eevil\u202c \u2066\u2069 \u200b\ufeff") == (
        "\\u202eevil\\u202c \\u2066\\u2069 \\u200b\\ufeff"
    )
    assert escape("tag \U000e0041") == "tag \\U000e0041"
    assert escape("\ud800") == "\\ud800"  # a lone surrogate (undecodable bytes) cannot be written
    assert (
        escape("plain text, ü, 漢字, emoji 🙂, C:\\path")
        == "plain text, ü, 漢字, emoji 🙂, C:\\path"
    )
    assert escape(escape(HOSTILE)) == escape(HOSTILE) and not _unsafe(escape(HOSTILE))
    assert clean(" two\nlines\t and\r\nmore\u2028 ") == "two lines and more\\u2028"
    assert clean(clean(HOSTILE)) == clean(HOSTILE)


@pytest.mark.parametrize(
    ("cell", "want"),
    [
        ('=HYPERLINK("http://x")', '\'=HYPERLINK("http://x")'),
        ("+1+2", "'+1+2"),
        ("-2+3", "'-2+3"),
        ("@SUM(A1)", "'@SUM(A1)"),
        ("\uff1d1+1", "'\uff1d1+1"),  # full-width equals sign
        ("\t=1", "'=1"),  # leading whitespace folded away, then guarded
        ("\u00a0=1+1", "'\u00a0=1+1"),  # red team note: a no-break space before the formula
        ("\u3000\u00a0+cmd", "'\u3000\u00a0+cmd"),
        ("\u00a0-1", "\u00a0-1"),  # still a number
        ("-1", "-1"),  # a number stays a number
        ("2.5", "2.5"),
        ("alice", "alice"),
    ],
)
def test_spreadsheet_cells_never_start_a_formula(cell, want):
    assert spreadsheet_cell(cell) == want


def test_points_are_written_as_lms_read_them():
    assert [number(x) for x in (1, 2.0, 1.5, 0.25, 0, 1 / 3)] == [
        "1",
        "2",
        "1.5",
        "0.25",
        "0",
        "0.3333",
    ]


def _results():
    bad = ExerciseResult("class/x/lab99-demo.ipynb", 1, False, f"CheckFailure: {HOSTILE}")
    good = ExerciseResult("class/x/lab99-demo.ipynb", 2, True, "", verified="PASS exercise 2")
    r = NotebookResult(
        f"class/{NAME}/lab99-demo.ipynb", [bad, good], {4: HOSTILE}, lab="lab99-demo",
        isolation=f"no isolation: {HOSTILE}",
    )  # fmt: skip
    return [r], {r.notebook: NAME}, {"lab99-demo": {1: 2, 2: 1}}


def test_table_summary_and_progress_are_escaped():
    results, students, _ = _results()
    text = report.table(results) + "\n" + report.summary(results, students)
    stream = io.StringIO()
    report.Progress(1, stream)(results[0])
    text += stream.getvalue()
    assert not _unsafe(text), _unsafe(text)
    assert "\\x1b[2K\\r 1 PASS\\x08\\x08\\u202eLIAF" in text
    row = next(line for line in text.splitlines() if line.strip().startswith("1 "))
    assert row.split()[1] == "FAIL" and row == "  " + feedback_line(results[0].exercises[0])


def test_csv_and_json_gradebooks_are_escaped(tmp_path):
    results, students, points = _results()
    gradefile.write_gradebook(results, students, tmp_path / "g.csv", points)
    gradefile.write_gradebook(results, students, tmp_path / "g.json", points)
    text = (tmp_path / "g.csv").read_text(encoding="utf-8")
    assert not _unsafe(text.replace("\r\n", ""))
    rows = list(csv.DictReader(io.StringIO(text)))
    assert rows[0]["student"].startswith("'=cmd") and "\\x1b[31m" in rows[0]["student"]
    assert rows[0]["message"].startswith("CheckFailure: \\x1b[2K\\r")
    assert [(r["points"], r["max_points"]) for r in rows] == [("0", "2"), ("1", "1")]
    doc = json.loads((tmp_path / "g.json").read_text(encoding="utf-8"))
    strings = []

    def walk(x):
        if isinstance(x, str):
            strings.append(x)
        elif isinstance(x, dict):
            [walk(k) or walk(v) for k, v in x.items()]
        elif isinstance(x, list):
            [walk(v) for v in x]

    walk(doc)
    assert not any(_unsafe(s) for s in strings)
    back, who, pts = gradefile.read_json(doc)  # read back: the same rows
    assert gradefile.rows(back, who, pts) == gradefile.rows(results, students, points)


def test_gradescope_results_are_escaped():
    results, _, _ = _results()
    key = {"lab": "lab99-demo", "exercises": {"1": {"what": f"double {HOSTILE}"}, "2": {}}}
    doc = gradescope.results(key, results[0], seconds=3.2)
    texts = [
        doc["output"],
        *(t["output"] for t in doc["tests"]),
        *(t["name"] for t in doc["tests"]),
    ]
    assert not [t for t in texts if _unsafe(t.replace("\n", ""))], texts
    assert "\\x1b[2K" in doc["tests"][0]["output"] and "\\u202e" in doc["tests"][0]["name"]
    assert doc["tests"][0]["output"] == feedback_line(results[0].exercises[0])


def test_canvas_and_moodle_exports_are_escaped_and_guarded(tmp_path):
    results, students, points = _results()
    roster_file = tmp_path / "roster.csv"
    roster_file.write_text(
        "folder,Student,ID,SIS User ID,SIS Login ID,Section,Email address\n"
        f'"{NAME}","=Evil, \u202eEve",1234,@sis,+login,-sec,=x@example.com\n',
        encoding="utf-8",
    )
    roster = exports.read_roster(roster_file)
    for kind in exports.FORMATS:
        exports.write_export(kind, tmp_path / f"{kind}.csv", results, students, points, roster)
        text = (tmp_path / f"{kind}.csv").read_text(encoding="utf-8")
        assert not _unsafe(text.replace("\r\n", "")), kind
        for row in csv.reader(io.StringIO(text)):
            for cell in row:
                assert not cell.startswith(("=", "+", "-", "@")), (kind, cell)
