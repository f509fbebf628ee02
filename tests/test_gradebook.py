"""Class mode: one command grades a class folder into one gradebook, whatever the students sent."""

from __future__ import annotations

import csv
import subprocess

import pytest

from conftest import script
from notebook_factory import attack_lab, write, write_lab_and_key

LAB = "lab99-attacks"


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
    result = grade(
        "--class", cls, "--gradebook", tmp / "gradebook.csv", "--jobs", 2,
        "--keys", key.parent, "--timeout", 6, cwd=tmp,
    )  # fmt: skip
    rows = list(csv.DictReader(open(tmp / "gradebook.csv", encoding="utf-8")))
    return result, rows


def test_exit_zero_and_one_row_per_student_lab_and_exercise(graded_class):
    result, rows = graded_class
    assert result.returncode == 0, result.stdout + result.stderr
    assert list(rows[0]) == [
        "student", "lab", "exercise", "outcome", "points", "status", "message", "notebook"
    ]  # fmt: skip
    got = {(r["student"], r["exercise"]): (r["outcome"], r["points"], r["status"]) for r in rows}
    assert len(rows) == 15 and {r["lab"] for r in rows} == {LAB}
    for n in "123":
        assert got[("alice", n)] == ("PASS", "1", "graded")
        assert got[("bob", n)] == ("FAIL", "0", "invalid")
        assert got[("carol", n)] == ("FAIL", "0", "invalid")
    assert got[("dave", "1")] == ("FAIL", "0", "tampered")
    assert got[("dave", "2")] == got[("dave", "3")] == ("PASS", "1", "graded")
    assert got[("erin", "1")] == ("PASS", "1", "graded")
    assert got[("erin", "2")] == got[("erin", "3")] == ("FAIL", "0", "timeout")


def test_messages_say_why(graded_class):
    _, rows = graded_class
    msg = {(r["student"], r["exercise"]): r["message"] for r in rows}
    assert "not a valid notebook" in msg[("bob", "1")]
    assert "not a valid notebook" in msg[("carol", "1")]
    assert msg[("dave", "1")].startswith("tampered: check cell 1 of 1 (cell 3) was changed")
    assert msg[("erin", "2")] == "not run: timeout after 6 s in cell 4"
    assert msg[("alice", "3")].startswith("PASS exercise 3: weight bytes — 3 checks")


def test_summary_and_progress(graded_class):
    result, _ = graded_class
    lines = result.stdout.splitlines()
    summary = lines[lines.index(next(x for x in lines if x.startswith("student "))) :]
    assert any(x.split()[:3] == ["alice", "1", "3/3"] for x in summary), summary
    assert any(x.startswith("bob") and f"{LAB}: invalid" in x for x in summary), summary
    assert any(x.startswith("erin") and f"{LAB}: timeout" in x for x in summary), summary
    assert "[####################] 5/5" in result.stderr
    assert "checkpoint" not in result.stdout


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

    from labs.course.notebooks import parse_lab, student_version
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
