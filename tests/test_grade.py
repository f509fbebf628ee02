"""labs-grade on single submissions: table, results file, exit codes, bad input."""

from __future__ import annotations

import csv
import json
import subprocess
import sys

import pytest

from conftest import REPO, script
from labs.course.grade import grade_notebooks
from labs.course.key import find_key
from labs.course.notebooks import NotebookError
from notebook_factory import cell, good_lab, lab, write, write_lab_and_key


def grade(*args, cwd):
    return subprocess.run(
        [script("labs-grade"), *map(str, args)],
        cwd=cwd, capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def submission_with_a_bug():
    nb = good_lab()
    nb.cells[2].source = "def double(x):\n    return x + 1"  # a wrong answer, not a stub
    nb.cells[4].source = "area = 3.14"  # close, not close enough
    return nb


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """Grade a correct and a buggy submission in one run (one kernel each)."""
    tmp = tmp_path_factory.mktemp("grade")
    _, key = write_lab_and_key(tmp / "instructor", "lab99-demo")
    good = write(tmp / "alice" / "lab99-demo.ipynb", good_lab())
    buggy = write(tmp / "bob" / "lab99-demo.ipynb", submission_with_a_bug())
    result = grade(good, buggy, "--results", tmp / "grades.csv", "--keys", key.parent, cwd=tmp)
    return tmp, key, result


def test_table_results_file_and_exit_code(graded):
    tmp, _, result = graded
    assert result.returncode == 0, result.stdout + result.stderr  # graded, FAILs included
    out = result.stdout
    assert "alice/lab99-demo.ipynb  [lab99-demo, graded]" in out and "2/2 exercises passed" in out
    assert "0/2 exercises passed" in out
    assert "PASS exercise 1: double — 1 check: double(21)" in out
    assert (
        "FAIL    graded    CheckFailure: Exercise 1 (double) -- double(21): expected 42, got 22"
        in out
    )
    rows = list(csv.DictReader(open(tmp / "grades.csv", encoding="utf-8")))
    assert [(r["student"], r["exercise"], r["outcome"], r["status"]) for r in rows] == [
        ("lab99-demo", "1", "PASS", "graded"), ("lab99-demo", "2", "PASS", "graded"),
        ("lab99-demo", "1", "FAIL", "graded"), ("lab99-demo", "2", "FAIL", "graded"),
    ]  # fmt: skip
    assert rows[3]["message"].startswith("CheckFailure: Exercise 2 -- area: expected 3.14159")
    assert "2 passed, 2 failed" in out


def test_strict_exits_1_on_a_failure(graded):
    tmp, key, _ = graded
    result = grade(tmp / "bob" / "lab99-demo.ipynb", "--key", key, "--strict", cwd=tmp)
    assert result.returncode == 1, result.stdout + result.stderr


def test_all_passing_writes_json(tmp_path):
    _, key = write_lab_and_key(tmp_path / "instructor", "lab99-demo")
    path = write(tmp_path / "lab99-demo.ipynb", good_lab())
    result = grade(path, "--key", key, "--strict", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    data = json.loads((tmp_path / "grade-results.json").read_text())
    (nb,) = data["notebooks"]
    assert nb["passed"] is True and [e["passed"] for e in nb["exercises"]] == [True, True]
    assert nb["status"] == "graded" and nb["lab"] == "lab99-demo"


def test_a_failing_cell_outside_the_checks_is_reported(tmp_path):
    _, key = write_lab_and_key(tmp_path / "instructor", "lab99-demo")
    nb = good_lab()
    nb.cells.append(cell("raise RuntimeError('the student broke something else')"))
    (result,) = grade_notebooks([write(tmp_path / "s.ipynb", nb)], key=key)
    assert [e.passed for e in result.exercises] == [True, True]
    assert result.failed_cells == {8: "RuntimeError: the student broke something else"}
    assert not result.passed


def test_bad_input(tmp_path):
    _, key = write_lab_and_key(tmp_path / "instructor", "lab99-demo")
    result = grade(tmp_path / "absent.ipynb", "--key", key, cwd=tmp_path)
    assert result.returncode == 2 and "absent.ipynb: no such notebook file" in result.stderr
    assert not (tmp_path / "grade-results.json").exists()
    corrupt = tmp_path / "lab99-demo.ipynb"
    corrupt.write_text("{ not json", encoding="utf-8")
    result = grade(corrupt, "--keys", key.parent, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("FAIL    invalid   invalid:") == 2
    assert "not a valid notebook" in result.stdout
    (r,) = grade_notebooks([write(tmp_path / "unknown.ipynb", lab(cell("x = 1")))])
    assert r.status == "invalid" and "answer key" in r.exercises[0].error


def test_find_key_by_lab_number(tmp_path):
    _, key = write_lab_and_key(tmp_path, "lab07-thing")
    for name in ("lab07-thing.ipynb", "lab07.ipynb", "alice_lab07_final.ipynb"):
        assert find_key(tmp_path / "x" / name, key.parent) == key
    with pytest.raises(NotebookError, match="no answer key"):
        find_key(tmp_path / "lab08.ipynb", key.parent)


def test_plain_nbval_works_for_instructors(tmp_path):
    path = write(tmp_path / "ok.ipynb", good_lab())
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--nbval-lax",
         "--nbval-current-env", str(path)],
        cwd=REPO, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-2000:]
    assert "7 passed" in result.stdout  # one test per code cell


def test_notebook_time_limit_and_a_dying_kernel(tmp_path):
    _, key = write_lab_and_key(tmp_path / "instructor", "lab99-demo")
    slow = good_lab()  # the limit counts the notebook's own CPU time (sleeping: half the wall)
    busy = "t = time.process_time()\nwhile time.process_time() < t + 2:\n    pass"
    slow.cells.insert(4, cell("import time\n" + busy))
    slow.cells.insert(5, cell(busy))
    dying = good_lab()
    dying.cells.insert(4, cell("import os\nos._exit(0)"))
    paths = [write(tmp_path / "slow.ipynb", slow), write(tmp_path / "dying.ipynb", dying)]
    slow_r, dying_r = grade_notebooks(paths, key=key, notebook_timeout=3)
    assert [(e.passed, e.status) for e in slow_r.exercises] == [
        (True, "graded"),
        (False, "timeout"),
    ]
    assert slow_r.exercises[1].error.startswith("not run: timeout: the notebook time limit of 3 s")
    assert [(e.passed, e.status) for e in dying_r.exercises] == [
        (True, "graded"),
        (False, "graded"),
    ]
    assert dying_r.exercises[1].error == (
        "not run: the kernel died in cell 4 (it crashed, exited or ran out of memory)"
    )


def harness_lab():
    """A lab whose check goes through a helper of a given cell, as lab 16's checks go through
    ``train_zero`` and lab 11's through ``triton_forward``."""
    return lab(
        cell("def run_through(f, x):\n    return f(x)"),  # the lab's given harness
        cell(
            "def triple(x):\n    # BEGIN SOLUTION exercise-1: three times x\n"
            "    return 3 * x\n    # END SOLUTION",
            "hide-input",
        ),
        cell(
            "from labs.course.checks import exercise\nwith exercise(1, 'triple') as check:\n"
            "    check.equal(run_through(triple, 7), 21, 'run_through(triple, 7)')",
            "exercise-1",
        ),
    )


@pytest.mark.parametrize("where", ["in its cell", "in a later cell", "in its cell, tag removed"])
def test_a_redefined_harness_is_the_keys_again_at_every_check(tmp_path, where):
    """A submission that rewrites the given harness so that the check's value no longer depends
    on its stub fails; the honest solution still passes through the key's harness."""
    _, key = write_lab_and_key(tmp_path / "instructor", "lab98-harness", harness_lab())
    honest = write(tmp_path / "honest.ipynb", harness_lab())
    cheat = harness_lab()
    cheat.cells[1].source = "def triple(x):\n    raise NotImplementedError('Exercise 1')"
    forged = "def run_through(f, x):\n    return 21"
    if where == "in a later cell":
        cheat.cells.insert(2, cell(forged))
    else:
        cheat.cells[0].source = forged
        if where.endswith("tag removed"):
            cheat.cells[0].metadata["tags"] = ["uses-references"]
    cheat = write(tmp_path / "cheat.ipynb", cheat)
    good, bad = grade_notebooks([honest, cheat], key=key)
    assert [e.passed for e in good.exercises] == [True], good.exercises
    assert [e.passed for e in bad.exercises] == [False], bad.exercises
    assert "not implemented yet" in bad.exercises[0].error, bad.exercises[0].error
