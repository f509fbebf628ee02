"""A check draws its random inputs from a generator it seeds itself, never from the notebook's.

The red team's honest student (issue 35): a correct solution plus one scratch cell that drew from
the notebook's ``rng`` failed lab02's exercise 2, because the check's matrices came from that same
generator object, whose state the scratch cell had moved (the grader re-seeds only the global
generators). A check cell (``exercise-N`` or ``graded-exercise-N``) that calls a drawing method on
a name it does not bind itself, or passes ``generator=`` such a name, depends on what the student
ran before it.
"""

from __future__ import annotations

import ast
import re

import pytest

from conftest import LABS
from labs.course.notebooks import parse_lab

DRAWS = {  # numpy.random.Generator / RandomState and random.Random methods that consume state
    "standard_normal", "normal", "integers", "random", "uniform", "choice", "permutation",
    "shuffle", "randint", "randn", "rand", "binomial", "poisson", "exponential", "sample",
}  # fmt: skip


def _bound(tree: ast.AST) -> set[str]:
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            names.update(a.arg for a in node.args.args + node.args.kwonlyargs)
    return names


def outside_draws(source: str) -> list[str]:
    """The draws in ``source`` from generators that ``source`` does not bind itself."""
    tree = ast.parse(source)
    bound, bad = _bound(tree), []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        if (isinstance(f, ast.Attribute) and f.attr in DRAWS and isinstance(f.value, ast.Name)
                and f.value.id not in bound and f.value.id not in ("np", "torch", "random")):  # fmt: skip
            bad.append(f"{f.value.id}.{f.attr}(...) (line {node.lineno})")
        for kw in node.keywords:
            if (
                kw.arg == "generator"
                and isinstance(kw.value, ast.Name)
                and kw.value.id not in bound
            ):
                bad.append(f"generator={kw.value.id} (line {node.lineno})")
    return bad


def test_the_rule_finds_a_draw_from_the_notebooks_generator():
    assert outside_draws("x = rng.standard_normal((2, 2))") == ["rng.standard_normal(...) (line 1)"]
    assert outside_draws("t = torch.randn(3, generator=gen)") == ["generator=gen (line 1)"]
    own = "rng = np.random.default_rng(0)\nx = rng.standard_normal(2)\ny = torch.randn(2)"
    assert outside_draws(own) == []


@pytest.mark.parametrize("lab", LABS, ids=lambda p: p.name)
def test_checks_seed_their_own_inputs(lab):
    info = parse_lab(lab)
    bad = []
    for ex in info.exercises.values():
        for i in (*ex.check_cells, *ex.graded_cells):
            src = info.nb.cells[i].source
            if re.search(r"^\s*%", src, re.M):
                continue  # a cell magic: not Python
            bad += [f"exercise {ex.number}, cell {i}: {d}" for d in outside_draws(src)]
    assert not bad, (
        f"{lab.name}: checks draw from a generator the notebook made (a student's extra draw "
        "changes the inputs): " + "; ".join(bad)
    )
