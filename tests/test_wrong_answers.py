"""Every exercise check rejects plausible wrong answers, not only the student stub.

Each ``tests/wrong_answers/labNN.py`` lists ``WRONG``, mistakes a student would make; the lab's
solution notebook runs once in a kernel and each mistake is swapped in (see
:mod:`labs.course.wrong_answers`).  Every exercise needs at least two.
"""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from conftest import LABS
from labs.course.notebooks import parse_lab
from labs.course.wrong_answers import check_wrong_answers

WRONG_DIR = Path(__file__).parent / "wrong_answers"
MODULES = sorted(p.stem for p in WRONG_DIR.glob("lab*.py"))


def _lab_for(module: str) -> Path:
    matches = [lab for lab in LABS if lab.name.split("-")[0] == module]
    assert len(matches) == 1, f"tests/wrong_answers/{module}.py: no single lab {module}-*.ipynb"
    return matches[0]


@pytest.mark.parametrize("module", MODULES)
def test_checks_reject_wrong_answers(module):
    lab = _lab_for(module)
    wrongs = importlib.import_module(f"wrong_answers.{module}").WRONG
    counts: dict[int, int] = {}
    for w in wrongs:
        counts[w.exercise] = counts.get(w.exercise, 0) + 1
    thin = {n: counts.get(n, 0) for n in parse_lab(lab).exercises if counts.get(n, 0) < 2}
    assert not thin, f"{lab.name}: exercises with fewer than 2 wrong answers: {thin}"
    outcomes = check_wrong_answers(lab, wrongs)
    for o in outcomes:
        print(f"{lab.name} exercise {o.wrong.exercise}: {o.wrong.why}: "
              f"{'rejected' if o.rejected else 'ACCEPTED'} ({o.detail})")  # fmt: skip
    accepted = [f"exercise {o.wrong.exercise}: {o.wrong.why} ({o.detail})" for o in outcomes
                if not o.rejected]  # fmt: skip
    assert not accepted, f"{lab.name}: checks accept these wrong answers:\n" + "\n".join(accepted)


def test_every_lab_lists_wrong_answers():
    missing = [lab.name for lab in LABS if lab.name.split("-")[0] not in MODULES]
    assert not missing, f"labs without tests/wrong_answers/labNN.py: {missing}"
