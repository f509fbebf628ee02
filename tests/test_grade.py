"""python -m labs.grade: table, results file, exit codes, and bad input."""

from __future__ import annotations

import csv
import json
import subprocess
import sys

import pytest

from conftest import REPO
from notebook_factory import cell, good_lab, lab, write


def grade(*args, cwd):
    return subprocess.run(
        [sys.executable, "-m", "labs.grade", *map(str, args)],
        cwd=cwd, capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def submission_with_a_bug():
    nb = good_lab()
    nb.cells[2].source = "def double(x):\n    return x + 1"  # a wrong answer, not a stub
    nb.cells[4].source = "area = 3.14"  # close, not close enough
    return nb


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """Grade a correct and a buggy submission in one run (one kernel start each)."""
    tmp = tmp_path_factory.mktemp("grade")
    good = write(tmp / "alice.ipynb", good_lab())
    buggy = write(tmp / "bob.ipynb", submission_with_a_bug())
    result = grade(good, buggy, "--results", tmp / "grades.csv", cwd=tmp)
    return tmp, result


def test_table_results_file_and_exit_code(graded):
    tmp, result = graded
    assert result.returncode == 1, result.stdout + result.stderr
    out = result.stdout
    assert "alice.ipynb" in out and "2/2 exercises passed" in out
    assert "bob.ipynb" in out and "0/2 exercises passed" in out
    assert "FAIL    CheckFailure: Exercise 1 (double) -- double(21): expected 42, got 22" in out
    assert "1 exercises passed" not in out
    rows = list(csv.DictReader(open(tmp / "grades.csv")))
    assert [(r["notebook"].split("/")[-1], r["exercise"], r["passed"]) for r in rows] == [
        ("alice.ipynb", "1", "True"), ("alice.ipynb", "2", "True"),
        ("bob.ipynb", "1", "False"), ("bob.ipynb", "2", "False"),
    ]  # fmt: skip
    assert rows[3]["error"].startswith("CheckFailure: Exercise 2 -- area: expected 3.14159")


def test_all_passing_exits_zero_and_writes_json(tmp_path):
    path = write(tmp_path / "ok.ipynb", good_lab())
    result = grade(path, cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    data = json.loads((tmp_path / "grade-results.json").read_text())
    (nb,) = data["notebooks"]
    assert nb["passed"] is True and [e["passed"] for e in nb["exercises"]] == [True, True]
    assert "2 passed, 0 failed" in result.stdout


def test_a_failing_cell_outside_the_checks_also_fails_the_grade(tmp_path):
    nb = good_lab()
    nb.cells.append(cell("raise RuntimeError('the student broke something else')"))
    result = grade(write(tmp_path / "s.ipynb", nb), cwd=tmp_path)
    assert result.returncode == 1
    assert "2/2 exercises passed" in result.stdout and "other failing cells: 8" in result.stdout


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda p: None, "no such notebook file"),
        (lambda p: p.write_text("{ not json"), "not a valid notebook"),
        (lambda p: write(p, lab(cell("x = 1"))), "no cell is tagged exercise-N"),
    ],
)
def test_bad_input_exits_2_with_a_clear_message(tmp_path, make, message):
    path = tmp_path / "sub.ipynb"
    make(path)
    result = grade(path, cwd=tmp_path)
    assert result.returncode == 2
    assert message in result.stderr and "sub.ipynb" in result.stderr
    assert not (tmp_path / "grade-results.json").exists()


def test_plain_nbval_works_for_instructors(tmp_path):
    path = write(tmp_path / "ok.ipynb", good_lab())
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--nbval-lax",
         "--nbval-current-env", str(path)],
        cwd=REPO, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-2000:]
    assert "7 passed" in result.stdout  # one test per code cell
