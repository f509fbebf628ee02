"""labs-release: student notebooks from solution notebooks, and its failure modes."""

from __future__ import annotations

import nbformat
import pytest

from labs.course import release
from labs.course.key import build_key, compare, load_key, source_hash
from labs.course.notebooks import NotebookError, parse_lab
from labs.course.points import key_points
from labs.course.setup_cell import setup_cell_source
from labs.course.student import student_version
from notebook_factory import CHECK, SOLUTION, cell, good_lab, lab, write


def test_parse_finds_solutions_checks_and_uses(tmp_path):
    info = parse_lab(write(tmp_path / "lab.ipynb", good_lab()))
    assert list(info.exercises) == [1, 2]
    ex1 = info.exercises[1]
    assert (ex1.solution_cells, ex1.check_cells, ex1.uses_cells) == ([2], [3], [6])
    assert ex1.what == "return twice x"


def test_student_version_replaces_each_block_by_a_stub_at_its_indentation(tmp_path):
    nb = good_lab()
    nb.cells[2].outputs = [nbformat.v4.new_output("stream", text="old output")]
    nb.cells[2].execution_count = 3
    student = student_version(parse_lab(write(tmp_path / "lab.ipynb", nb)))
    assert student.cells[2].source == (
        'def double(x):\n    """Twice x."""\n'
        "    raise NotImplementedError('Exercise 1: return twice x')"
    )
    assert student.cells[4].source == (
        "raise NotImplementedError('Exercise 2: set area to the area of a unit circle')"
    )
    assert "tags" not in student.cells[2].metadata, "students must see the cell they edit"
    assert all(c.get("outputs", []) == [] for c in student.cells if c.cell_type == "code")
    assert student.cells[3].source == CHECK and student.cells[3].metadata["tags"] == ["exercise-1"]


def test_student_version_drops_the_guard_cells_of_the_prose(tmp_path):
    """A guard asserts the book's verdict on the reference run; students are judged by checks."""
    nb = good_lab()
    guard = "# guard: lab99-twice\nassert double(2) == 4"
    nb.cells.insert(4, cell(guard, "remove-cell"))
    nb.cells.insert(5, cell("# a hidden helper, not a guard\nx = 1", "remove-cell"))
    student = student_version(parse_lab(write(tmp_path / "lab.ipynb", nb)))
    assert len(student.cells) == len(nb.cells) - 1
    assert not any("# guard:" in c.source for c in student.cells)
    assert any(c.source.startswith("# a hidden helper") for c in student.cells)


def test_no_released_student_notebook_holds_a_guard_cell():
    """The book's labs have guard cells (tests/test_claims.py); the student copies have none."""
    from conftest import LABS, STUDENT

    guarded = [lab.name for lab in LABS if "# guard:" in lab.read_text(encoding="utf-8")]
    assert guarded, "no lab has a guard cell: this test would check nothing"
    leaked = [
        p.name for p in STUDENT.glob("*.ipynb") if "# guard:" in p.read_text(encoding="utf-8")
    ]
    assert not leaked, f"guard cells in student notebooks (run labs-release): {leaked}"


def test_release_writes_students_and_normalises_sources(tmp_path):
    src = write(tmp_path / "labs" / "lab99-demo.ipynb", good_lab())
    dirs = ["--student-dir", str(tmp_path / "student"), "--key-dir", str(tmp_path / "keys")]
    assert release.main([str(src), *dirs]) == 0
    source = nbformat.read(src, as_version=4)
    assert source.cells[1].source == setup_cell_source(), "set-up cell inserted first"
    assert source.cells[1].metadata["tags"] == ["remove-input"]
    assert source.cells[3].metadata["mystnb"]["code_prompt_show"] == "Show solution"
    student = nbformat.read(tmp_path / "student" / "lab99-demo.ipynb", as_version=4)
    assert "NotImplementedError('Exercise 1: return twice x')" in student.cells[3].source
    assert "mystnb" not in student.cells[3].metadata
    # Idempotent, and --check agrees.
    assert release.main([str(src), *dirs, "--check"]) == 0
    student.cells[3].source += "\n# edited by hand"
    nbformat.write(student, tmp_path / "student" / "lab99-demo.ipynb")
    assert release.main([str(src), *dirs, "--check"]) == 1


def test_release_writes_the_answer_key_outside_student(tmp_path):
    nb = good_lab()
    nb.metadata["exercise_references"] = {"2": ["labs.basics.memory.inference_bytes"]}
    src = write(tmp_path / "labs" / "lab99-demo.ipynb", nb)
    dirs = ["--student-dir", str(tmp_path / "student"), "--key-dir", str(tmp_path / "keys")]
    assert release.main([str(src), *dirs]) == 0
    key = load_key(tmp_path / "keys" / "lab99-demo.json")
    assert not list((tmp_path / "student").glob("*.json"))
    assert key["lab"] == "lab99-demo" and list(key["exercises"]) == ["1", "2"]
    (check,) = key["exercises"]["1"]["checks"]
    assert check["source"] == CHECK and check["sha256"] == source_hash(CHECK + "  \n")
    assert check["sha256"] == source_hash(CHECK.replace("\n", "\n\n", 1))  # a blank line
    assert check["sha256"] != source_hash(CHECK.replace("42", "43"))
    assert check["id"] == nb.cells[3].id
    assert key["exercises"]["1"]["references"] == []
    assert key["exercises"]["2"]["references"] == ["labs.basics.memory.inference_bytes"]
    # the student notebook matches its key; a stale key is caught by --check
    student = nbformat.read(tmp_path / "student" / "lab99-demo.ipynb", as_version=4)
    assert compare(student, key) == ({1: [4], 2: [6]}, {})
    (tmp_path / "keys" / "lab99-demo.json").write_text("{}", encoding="utf-8")
    assert release.main([str(src), *dirs, "--check"]) == 1


@pytest.mark.parametrize(
    ("refs", "message"),
    [
        (
            {"3": ["labs.basics.memory.inference_bytes"]},
            "names exercise '3', but the lab has exercises",
        ),
        ({"1": "labs.basics.memory.inference_bytes"}, "must be a list of dotted names inside labs"),
        ({"1": ["numpy.sum"]}, "must be a list of dotted names inside labs"),
        (
            {"1": ["labs.basics.memory.no_such_function"]},
            "not a function or class that can be imported",
        ),
    ],
)
def test_bad_exercise_references_are_named(tmp_path, refs, message):
    nb = good_lab()
    nb.metadata["exercise_references"] = refs
    src = write(tmp_path / "lab99-demo.ipynb", nb)
    with pytest.raises(NotebookError, match=message):
        release.prepare(src, tmp_path / "student", tmp_path / "keys")


def _bad(*cells):
    return lab(*cells)


BAD_LABS = {
    "begin without end": (
        _bad(
            cell("def f():\n    # BEGIN SOLUTION exercise-1: f\n    return 1", "hide-input"),
            cell(CHECK, "exercise-1"),
        ),
        r"cell 0.*line 2: BEGIN SOLUTION exercise-1 is never closed",
    ),
    "end without begin": (
        _bad(cell("x = 1\n# END SOLUTION", "hide-input")),
        r"cell 0.*line 2: END SOLUTION without a BEGIN SOLUTION",
    ),
    "nested begin": (
        _bad(
            cell(
                "# BEGIN SOLUTION exercise-1: a\n# BEGIN SOLUTION exercise-1: b\n# END SOLUTION",
                "hide-input",
            )
        ),
        r"line 2: BEGIN SOLUTION inside the block opened at line 1",
    ),
    "malformed marker": (
        _bad(cell("# BEGIN SOLUTION\nx = 1\n# END SOLUTION", "hide-input")),
        r"write the marker as '# BEGIN SOLUTION exercise-N: <what to implement>'",
    ),
    "marker in markdown": (
        _bad(cell("# BEGIN SOLUTION exercise-1: x", kind="markdown")),
        r"solution marker in a markdown cell",
    ),
    "check without solution": (
        _bad(cell("x = 1"), cell(CHECK, "exercise-3")),
        r"cell 1.*tagged exercise-3 but the notebook has no '# BEGIN SOLUTION exercise-3",
    ),
    "solution without check": (
        _bad(cell(SOLUTION, "hide-input")),
        r"cell 0.*exercise 1 has a solution but no check cell",
    ),
    "solution not collapsed": (
        _bad(cell(SOLUTION), cell(CHECK, "exercise-1")),
        r"cell 0.*not tagged hide-input",
    ),
    "hidden check": (
        _bad(cell(SOLUTION, "hide-input"), cell(CHECK, "exercise-1", "hide-input")),
        r"cell 1.*check cell of exercise 1 is hidden",
    ),
    "uses unknown exercise": (
        _bad(cell(SOLUTION, "hide-input"), cell(CHECK, "exercise-1"), cell("x", "uses-exercise-4")),
        r"cell 2.*tagged uses-exercise-4 but there is no exercise 4",
    ),
}


@pytest.mark.parametrize("case", list(BAD_LABS))
def test_format_errors_name_the_notebook_cell_and_fix(tmp_path, case):
    nb, pattern = BAD_LABS[case]
    path = write(tmp_path / "bad.ipynb", nb)
    with pytest.raises(NotebookError, match=pattern) as info:
        parse_lab(path)
    assert str(path) in str(info.value)


def test_missing_and_corrupt_notebooks(tmp_path):
    with pytest.raises(NotebookError, match="no such notebook file"):
        parse_lab(tmp_path / "absent.ipynb")
    corrupt = tmp_path / "corrupt.ipynb"
    corrupt.write_text('{"cells": [', encoding="utf-8")
    with pytest.raises(NotebookError, match="corrupt.ipynb: not a valid notebook"):
        parse_lab(corrupt)
    not_nb = tmp_path / "list.ipynb"
    not_nb.write_text("[1, 2]", encoding="utf-8")
    with pytest.raises(NotebookError, match="not a valid notebook"):
        parse_lab(not_nb)


def test_a_bad_lab_leaves_nothing_half_written(tmp_path, capsys):
    good = write(tmp_path / "labs" / "lab01-good.ipynb", good_lab())
    bad = write(tmp_path / "labs" / "lab02-bad.ipynb", BAD_LABS["begin without end"][0])
    before = good.read_bytes()
    student_dir = tmp_path / "student"
    args = [str(good), str(bad), "--student-dir", str(student_dir), "--key-dir", str(tmp_path)]
    assert release.main(args) == 2
    assert "lab02-bad.ipynb, cell 0" in capsys.readouterr().err
    assert not student_dir.exists(), "no student notebook may be written when any lab is bad"
    assert good.read_bytes() == before, "sources are not touched either"
    assert not list(tmp_path.rglob("*.tmp"))


def test_the_key_holds_each_exercises_points(tmp_path):
    nb = good_lab()
    nb.metadata["exercise_points"] = {"2": 2.5}
    src = write(tmp_path / "labs" / "lab99-demo.ipynb", nb)
    dirs = ["--student-dir", str(tmp_path / "student"), "--key-dir", str(tmp_path / "keys")]
    assert release.main([str(src), *dirs]) == 0
    key = load_key(tmp_path / "keys" / "lab99-demo.json")
    assert [key["exercises"][n]["points"] for n in ("1", "2")] == [1, 2.5]
    assert key_points(key) == {1: 1, 2: 2.5}
    del key["exercises"]["2"]["points"]  # a key written before points existed: 1 each
    assert key_points(key) == {1: 1, 2: 1}
    plain = build_key(parse_lab(tmp_path / "labs" / "lab99-demo.ipynb"))  # without points
    assert set(key["exercises"]["1"]) == set(plain["exercises"]["1"]) | {"points"}
    assert {k: v for k, v in key.items() if k != "exercises"} == {
        k: v for k, v in plain.items() if k != "exercises"
    }


@pytest.mark.parametrize(
    ("points", "message"),
    [
        ({"3": 1}, "names exercise '3', but the lab has exercises"),
        ({"1": 0}, r"must be a number above 0 .* got 0"),
        ({"1": "2"}, r"must be a number above 0 .* got '2'"),
        ({"1": True}, r"must be a number above 0"),
        ({"1": float("nan")}, r"must be a number above 0"),
        ([1, 2], "must map exercise numbers to points"),
    ],
)
def test_bad_exercise_points_are_named(tmp_path, points, message):
    nb = good_lab()
    nb.metadata["exercise_points"] = points
    src = write(tmp_path / "lab99-demo.ipynb", nb)
    with pytest.raises(NotebookError, match=message):
        release.prepare(src, tmp_path / "student", tmp_path / "keys")
