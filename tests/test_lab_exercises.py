"""Every lab's checks can fail: the solution passes every exercise, the student stub fails each.

Both are graded as an instructor grades a class (:func:`labs.course.grade.grade_notebooks`): each
notebook in its own sandboxed kernel, against the answer key in ``instructor/keys``, so a key or
student notebook that is out of date shows up here as ``tampered``.
"""

from __future__ import annotations

import pytest

from conftest import LABS, STUDENT
from labs.course.notebooks import parse_lab


def _selected_labs(request, test_name: str) -> list:
    """The labs whose ``test_name`` test was selected (so ``-k lab09`` grades lab09 only)."""
    names = {
        item.callspec.params["lab"].name
        for item in request.session.items
        if item.originalname == test_name and hasattr(item, "callspec")
    }
    return [lab for lab in LABS if lab.name in names]


@pytest.fixture(scope="session")  # not module: see test_book.built_book
def graded(request, graded_labs):
    """Every selected solution and student notebook, graded once per test run, two at a time.

    One run shares each lab's reference run (the key's solution, run once in a trusted kernel)
    between the solution and the student notebook; ``graded_labs`` (tests/conftest.py) shares the
    results with any other module or worker that grades the same notebooks.
    """
    solutions = _selected_labs(request, "test_solution_passes_every_exercise")
    students = _selected_labs(
        request, "test_student_stub_fails_every_check_and_only_dependent_cells"
    )
    paths = [*solutions, *(STUDENT / p.name for p in students)]
    return graded_labs(paths) if paths else {}


# The fixture grades every selected lab in one go (tools/test.sh keeps a module on one worker).
@pytest.mark.parametrize("lab", LABS, ids=lambda p: p.name)
def test_solution_passes_every_exercise(lab, graded):
    result = graded[str(lab)]
    assert result.status == "graded", (
        f"{lab.name}: {result.status}: {[e.error for e in result.exercises if not e.passed]} "
        "(is instructor/keys up to date? run: labs-release)"
    )
    failed = {e.exercise: e.error for e in result.exercises if not e.passed}
    assert not failed, f"{lab.name}: exercises failing on the solution: {failed}"
    assert not result.failed_cells, (
        f"{lab.name}: cells failing on the solution: {result.failed_cells}"
    )


@pytest.mark.parametrize("lab", LABS, ids=lambda p: p.name)
def test_student_stub_fails_every_check_and_only_dependent_cells(lab, graded):
    student = STUDENT / lab.name
    result = graded[str(student)]
    assert result.status == "graded", (
        f"{student.name}: {result.status}: {[e.error for e in result.exercises]} "
        "(are student/ and instructor/keys up to date? run: labs-release)"
    )
    passing = [e.exercise for e in result.exercises if e.passed]
    assert not passing, f"{student.name}: checks of exercises {passing} pass on the stub"
    info = parse_lab(lab)  # the solution notebook knows which cells held solutions
    allowed = {
        i
        for ex in info.exercises.values()
        for i in (*ex.check_cells, *ex.uses_cells, *ex.solution_cells)
    }
    unexpected = {i: m for i, m in result.failed_cells.items() if i not in allowed}
    assert not unexpected, (
        f"{student.name}: cells that do not depend on an exercise fail on the stub: {unexpected}. "
        "Tag them uses-exercise-N if they use exercise N's result."
    )
