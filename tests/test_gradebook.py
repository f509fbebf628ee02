"""Class mode: one command grades a class folder into one gradebook, whatever the students sent;
its Canvas and Moodle exports; the same class graded in two shards and merged, byte for byte."""

from __future__ import annotations

import csv
import subprocess

import pytest

from conftest import script
from notebook_factory import attack_lab, write, write_lab_and_key

LAB = "lab99-attacks"
#: a student's exception message that redrew a FAIL row as PASS on the red team's terminal
ANSI = "\\x1b[1A\\x1b[2K\\x1b[32m  1         PASS    graded    PASS exercise 1\\x1b[0m\\u202e\\x08\\x00"
ROSTER = """folder,Student,ID,SIS User ID,SIS Login ID,Section,Email address
alice,"Liddell, Alice",101,A-1,alice,S1,alice@example.edu
bob,"Builder, Bob",102,,bob,S1,bob@example.edu
carol,"Danvers, Carol",,C-3,,S2,carol@example.edu
dave,"Bowman, Dave",104,D-4,dave,S2,
mallory,"=Evil, Mallory",105,M-5,mallory,S2,mallory@example.edu
zoe,"Zed, Zoe",106,Z-6,zoe,S1,zoe@example.edu
"""


def grade(*args, cwd):
    return subprocess.run(
        [script("labs-grade"), *map(str, args)],
        cwd=cwd, capture_output=True, text=True, timeout=300,
    )  # fmt: skip


@pytest.fixture(scope="session")  # not module: see test_book.built_book
def graded_class(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("class")
    _, key = write_lab_and_key(tmp / "instructor", LAB, attack_lab())
    cls = tmp / "class"
    write(cls / "alice" / f"{LAB}.ipynb", attack_lab())  # correct
    (cls / "bob").mkdir(parents=True)
    (cls / "bob" / f"{LAB}.ipynb").write_text('{"cells": [', encoding="utf-8")  # corrupt
    (cls / "carol").mkdir()
    (cls / "carol" / f"{LAB}.ipynb").write_text("", encoding="utf-8")  # empty
    nb = attack_lab()
    nb.cells[3].source = "print('ok')"
    write(cls / "dave" / f"{LAB}.ipynb", nb)  # tampered exercise 1
    nb = attack_lab()
    nb.cells[4].source = "while True:\n    pass"  # never ends, before exercise 2
    write(cls / "erin" / f"{LAB}.ipynb", nb)
    write(cls / "alice" / ".ipynb_checkpoints" / f"{LAB}-checkpoint.ipynb", attack_lab())
    nb = attack_lab()
    nb.cells[2].source = f'def double(x):\n    raise RuntimeError("{ANSI}")'
    write(cls / "mallory" / f"{LAB}.ipynb", nb)
    (tmp / "roster.csv").write_text(ROSTER, encoding="utf-8")
    result = grade(*CLASS_ARGS(tmp, cls, key), "--gradebook", tmp / "gradebook.csv",
                   "--export", "canvas", tmp / "canvas.csv", "--export", "moodle",
                   tmp / "moodle.csv", "--roster", tmp / "roster.csv", cwd=tmp)  # fmt: skip
    rows = list(csv.DictReader(open(tmp / "gradebook.csv", encoding="utf-8")))
    return result, rows, tmp, cls, key


def CLASS_ARGS(tmp, cls, key):  # noqa: N802 - the arguments every run over this class shares
    return ["--class", cls, "--jobs", 2, "--keys", key.parent, "--timeout", 6]


def test_exit_zero_and_one_row_per_student_lab_and_exercise(graded_class):
    result, rows, *_ = graded_class
    assert result.returncode == 0, result.stdout + result.stderr
    assert list(rows[0]) == [
        "student", "lab", "exercise", "outcome", "points", "max_points", "status", "message",
        "notebook",
    ]  # fmt: skip
    got = {(r["student"], r["exercise"]): (r["outcome"], r["points"], r["status"]) for r in rows}
    assert len(rows) == 18 and {r["lab"] for r in rows} == {LAB}
    assert {r["max_points"] for r in rows} == {"1"}
    for n in "123":
        assert got[("alice", n)] == ("PASS", "1", "graded")
        assert got[("bob", n)] == ("FAIL", "0", "invalid")
        assert got[("carol", n)] == ("FAIL", "0", "invalid")
    assert got[("dave", "1")] == ("FAIL", "0", "tampered")
    assert got[("dave", "2")] == got[("dave", "3")] == ("PASS", "1", "graded")
    assert got[("erin", "1")] == ("PASS", "1", "graded")
    assert got[("erin", "2")] == got[("erin", "3")] == ("FAIL", "0", "timeout")


def test_messages_say_why(graded_class):
    _, rows, *_ = graded_class
    msg = {(r["student"], r["exercise"]): r["message"] for r in rows}
    assert "not a valid notebook" in msg[("bob", "1")]
    assert "not a valid notebook" in msg[("carol", "1")]
    assert msg[("dave", "1")].startswith("tampered: check cell 1 of 1 (cell 3) was changed")
    assert msg[("erin", "2")] == "not run: timeout after 6 s in cell 4"
    assert msg[("alice", "3")].startswith("PASS exercise 3: weight bytes — 3 checks")


def test_summary_and_progress(graded_class):
    result, *_ = graded_class
    lines = result.stdout.splitlines()
    summary = lines[lines.index(next(x for x in lines if x.startswith("student "))) :]
    assert any(x.split()[:3] == ["alice", "1", "3/3"] for x in summary), summary
    assert any(x.startswith("bob") and f"{LAB}: invalid" in x for x in summary), summary
    assert any(x.startswith("erin") and f"{LAB}: timeout" in x for x in summary), summary
    assert "[####################] 6/6" in result.stderr
    assert "checkpoint" not in result.stdout


def test_a_students_escape_sequences_are_shown_never_played(graded_class):
    result, rows, tmp, *_ = graded_class
    row = [line for line in result.stdout.splitlines() if "RuntimeError" in line]
    assert len(row) == 1 and row[0].split()[:3] == ["1", "FAIL", "graded"], row
    assert (
        "\\x1b[1A\\x1b[2K\\x1b[32m 1 PASS graded PASS" in row[0] and "\\u202e\\x08\\x00" in row[0]
    )
    for text in (result.stdout, result.stderr, *(p.read_text() for p in tmp.glob("*.csv"))):
        assert not any(ch in text for ch in "\x1b\x08\x00\u202e"), text[-500:]
    (got,) = [r for r in rows if r["student"] == "mallory" and r["exercise"] == "1"]
    assert got["outcome"] == "FAIL" and "\\x1b[1A\\x1b[2K" in got["message"]


def test_canvas_export_has_canvas_columns_and_points_possible(graded_class):
    result, _, tmp, *_ = graded_class
    rows = list(csv.reader(open(tmp / "canvas.csv", encoding="utf-8")))
    assert rows[0] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", LAB]
    assert rows[1] == ["Points Possible", "", "", "", "", "3"]
    assert rows[2:] == [
        ["Liddell, Alice", "101", "A-1", "alice", "S1", "3"],
        ["Builder, Bob", "102", "", "bob", "S1", "0"],
        ["Danvers, Carol", "", "C-3", "", "S2", "0"],
        ["Bowman, Dave", "104", "D-4", "dave", "S2", "2"],
        ["'=Evil, Mallory", "105", "M-5", "mallory", "S2", "2"],
    ]  # erin is not in the roster; zoe submitted nothing
    assert "canvas export: erin: not in the roster (not exported" in result.stderr
    assert "zoe" not in result.stderr


def test_moodle_export_has_one_identifier_and_one_column_per_grade_item(graded_class):
    result, _, tmp, *_ = graded_class
    rows = list(csv.reader(open(tmp / "moodle.csv", encoding="utf-8")))
    assert rows[0] == ["First name", "Last name", "Email address", LAB]
    assert rows[1:] == [
        ["Alice", "Liddell", "alice@example.edu", "3"],
        ["Bob", "Builder", "bob@example.edu", "0"],
        ["Carol", "Danvers", "carol@example.edu", "0"],
        ["Mallory", "'=Evil", "mallory@example.edu", "2"],
    ]
    assert "moodle export: dave: no Email address in the roster (not exported)" in result.stderr
    assert "map from 'Email address' to useremail" in result.stdout


def test_two_shards_merge_into_the_unsharded_gradebook_byte_for_byte(graded_class):
    _, _, tmp, cls, key = graded_class
    shards = []
    for k in (1, 2):
        shard = tmp / f"shard-{k}.json"
        done = grade(*CLASS_ARGS(tmp, cls, key), "--shard", f"{k}/2", "--gradebook", shard,
                     cwd=tmp)  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr
        assert f"shard {k}/2: 3 of 6 submissions" in done.stderr
        shards.append(shard)
    merged = grade("merge", *shards[::-1], "--gradebook", tmp / "merged.csv", "--export",
                   "canvas", tmp / "merged-canvas.csv", "--export", "moodle",
                   tmp / "merged-moodle.csv", "--roster", tmp / "roster.csv", cwd=tmp)  # fmt: skip
    assert merged.returncode == 0, merged.stdout + merged.stderr
    assert (tmp / "merged.csv").read_bytes() == (tmp / "gradebook.csv").read_bytes()
    assert (tmp / "merged-canvas.csv").read_bytes() == (tmp / "canvas.csv").read_bytes()
    assert (tmp / "merged-moodle.csv").read_bytes() == (tmp / "moodle.csv").read_bytes()
    partial = grade(*CLASS_ARGS(tmp, cls, key), "--shard", "1/2", "--roster", tmp / "roster.csv",
                    "--export", "canvas", tmp / "x.csv", cwd=tmp)  # fmt: skip
    assert partial.returncode == 2 and "export from the merged shards" in partial.stderr
    again = grade("merge", shards[0], cwd=tmp)
    assert again.returncode == 2 and "missing shard(s) 2/2" in again.stderr
    twice = grade("merge", shards[0], shards[0], shards[1], cwd=tmp)
    assert twice.returncode == 2 and "shard 1/2 given twice" in twice.stderr


def test_flat_folder_with_one_key(tmp_path):
    _, key = write_lab_and_key(tmp_path / "instructor", LAB, attack_lab())
    write(tmp_path / "flat" / "zoe.ipynb", attack_lab())
    result = grade("--class", tmp_path / "flat", "--key", key, cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    rows = list(csv.DictReader(open(tmp_path / "gradebook.csv", encoding="utf-8")))
    assert [(r["student"], r["outcome"]) for r in rows] == [("zoe", "PASS")] * 3


def test_usage_errors_exit_2(tmp_path):
    assert grade("--class", tmp_path / "absent", cwd=tmp_path).returncode == 2
    (tmp_path / "empty").mkdir()
    result = grade("--class", tmp_path / "empty", cwd=tmp_path)
    assert result.returncode == 2 and "no submission" in result.stderr


def test_a_class_of_30_in_one_command(tmp_path):
    """10 honest, 10 idle and 10 hostile students: correct rows for every honest and idle one."""
    import test_grade_sealed as attacks

    from labs.course.notebooks import parse_lab
    from labs.course.student import student_version
    from notebook_factory import cell

    sol, key = write_lab_and_key(tmp_path / "instructor", LAB, attack_lab())
    hostile = [attacks.ALWAYS_EQUAL, attacks.FRAME_FLOAT, attacks.PATCH_REFERENCE,
               attacks.REWRITE_OUTPUT, attacks.PATCH_CONTEXTLIB, attacks.THREAD_REFERENCE,
               attacks.CHECK_FILENAME, attacks.LEAK, attacks.NEIGHBOUR]  # fmt: skip
    # Without namespaces (macOS, CI runners that forbid them) a kernel can signal the grader:
    # that attack is only made where the sandbox is sealed.
    hostile.append(attacks.KILL_PARENT if attacks.ISOLATED else "print('ok')")
    cls = tmp_path / "class"
    for i in range(10):
        write(cls / f"honest{i:02d}" / f"{LAB}.ipynb", attack_lab())
        write(cls / f"idle{i:02d}" / f"{LAB}.ipynb", student_version(parse_lab(sol)))
        nb = attack_lab()
        nb.cells.insert(9, cell(hostile[i]))  # before exercise 3's check
        write(cls / f"hostile{i:02d}" / f"{LAB}.ipynb", nb)
    result = grade(
        "--class", cls, "--gradebook", tmp_path / "gb.csv", "--jobs", 2, "--key", key,
        "--timeout", 20, cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    rows = list(csv.DictReader(open(tmp_path / "gb.csv", encoding="utf-8")))
    assert len(rows) == 90
    for r in rows:
        if r["student"].startswith("honest"):
            assert (r["outcome"], r["status"]) == ("PASS", "graded"), r
        elif r["student"].startswith("idle"):
            assert (r["outcome"], r["status"]) == ("FAIL", "graded"), r
            assert "not implemented yet" in r["message"] or "not run successfully" in r["message"]
