"""Every lab's checks can fail: the solution passes every exercise, the student stub fails each,
and a generic forger (:mod:`attacks.forger`) added to the stub passes none.

All are graded as an instructor grades a class (:func:`labs.course.grade.grade_notebooks`): each
notebook in its own sandboxed kernel, against the answer key in ``instructor/keys``, so a key or
student notebook that is out of date shows up here as ``tampered``.  The forger is one cell that
knows only what a student has (the lab's visible check cells) and everything a kernel can reach:
it rewrites the grader's snippets so that every value a check asks for is the visible check's
expected expression computed in the kernel, binds the stubs to functions of ``labs`` of the same
name (also recompiled from their source) or to functions made from the visible checks, plants the
old tripwire's dict and compiles its adapters under a ``<frozen ...>`` file name.  Against the
grader before issue 35 (347915e) the same cell passed 31 of the 110 exercises (the red team's,
which knew the labs, 91); the kernel's ``labs`` now lacks the references each key forbids, and
every exercise has an assertion whose expected side is such a reference or a hidden graded
variant, so it passes none.
"""

from __future__ import annotations

import ast
from pathlib import Path

import nbformat
import pytest
from attacks.forger import forger_cell

from conftest import LABS, STUDENT
from labs.course.key import check_cells_of
from labs.course.notebooks import parse_lab

TESTS = {
    "solution": "test_solution_passes_every_exercise",
    "student": "test_student_stub_fails_every_check_and_only_dependent_cells",
    "forged": "test_the_generic_forger_passes_no_exercise",
}


def _selected_labs(request, test_name: str) -> list:
    """The labs whose ``test_name`` test was selected (so ``-k lab09`` grades lab09 only)."""
    names = {
        item.callspec.params["lab"].name
        for item in request.session.items
        if item.originalname == test_name and hasattr(item, "callspec")
    }
    return [lab for lab in LABS if lab.name in names]


def _forged(lab: Path, folder: Path) -> Path:
    """The untouched student notebook of ``lab`` with the forger's cell after the set-up cell."""
    nb = nbformat.read(STUDENT / lab.name, as_version=4)
    visible = [nb.cells[i].source for cells in check_cells_of(nb).values() for i in cells]
    nb.cells.insert(1, nbformat.v4.new_code_cell(forger_cell(visible)))
    path = folder / lab.stem / lab.name
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)
    return path


@pytest.fixture(scope="session")  # not module: see test_book.built_book
def graded(request, tmp_path_factory, graded_labs):
    """Every selected solution, student and forged notebook, graded in one class run, two at a
    time: one run shares each lab's reference run (the key's solution, run once in a trusted
    kernel) between them, and ``graded_labs`` (tests/conftest.py) shares the results with any
    other module or worker that grades the same notebooks."""
    chosen = {kind: _selected_labs(request, test) for kind, test in TESTS.items()}
    folder = tmp_path_factory.mktemp("forged")
    forged = {lab.name: _forged(lab, folder) for lab in chosen["forged"]}
    paths = [
        *chosen["solution"],
        *(STUDENT / p.name for p in chosen["student"]),
        *forged.values(),
    ]
    results = graded_labs(paths) if paths else {}
    return results, forged


# The fixture grades every selected lab in one go (tools/test.sh keeps a module on one worker).
@pytest.mark.parametrize("lab", LABS, ids=lambda p: p.name)
def test_solution_passes_every_exercise(lab, graded):
    result = graded[0][str(lab)]
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
    result = graded[0][str(student)]
    assert result.status == "graded", (
        f"{student.name}: {result.status}: {[e.error for e in result.exercises]} "
        "(are student/ and instructor/keys up to date? run: labs-release)"
    )
    passing = [e.exercise for e in result.exercises if e.passed]
    assert not passing, f"{student.name}: checks of exercises {passing} pass on the stub"
    info = parse_lab(lab)  # the solution notebook knows which cells held solutions
    allowed = {
        info.nb.cells[i].get("id")
        for ex in info.exercises.values()
        for i in (*ex.check_cells, *ex.uses_cells, *ex.solution_cells)
    }
    # by cell id: the student copy leaves out the solution's guard cells, so indices shift
    cells = parse_lab(student, require_solutions=False).nb.cells
    unexpected = {i: m for i, m in result.failed_cells.items() if cells[i].get("id") not in allowed}
    assert not unexpected, (
        f"{student.name}: cells that do not depend on an exercise fail on the stub: {unexpected}. "
        "Tag them uses-exercise-N if they use exercise N's result."
    )


@pytest.mark.parametrize("lab", LABS, ids=lambda p: p.name)
def test_the_generic_forger_passes_no_exercise(lab, graded):
    results, forged = graded
    result = results[str(forged[lab.name])]
    passing = {e.exercise: e.message for e in result.exercises if e.passed}
    assert not passing, f"{lab.name}: the forger passes exercises {sorted(passing)}: {passing}"
    assert result.status == "graded", (result.status, [e.error for e in result.exercises])


# Students who answer exercises with the package's own code instead of writing it: lab 17 with
# parallel3d.Layout, the general labs.parallel.mesh.Mesh and the private program behind
# parallel3d.train_step; and one route per lab that an audit of every exercise found unsealed
# (tests/BUDGET.md counts their cost). Before the keys sealed them, each of these notebooks
# passed the exercises it answers (lab 17: 3 through Layout, 2 through Mesh).
THROUGH_LABS = {
    ("lab17-3d-parallelism", "Layout"): """
def grid_rank(dp_i, tp_i, pp_i, dp, tp, pp):
    return p3.Layout(dp, tp, pp).rank(dp_i, tp_i, pp_i)

def grid_coords(rank, dp, tp, pp):
    return p3.Layout(dp, tp, pp).coords(rank)

def grid_groups(kind, dp, tp, pp):
    return p3.Layout(dp, tp, pp).groups(kind)

def make_groups(dp, tp, pp):
    return p3.Layout(dp, tp, pp).new_groups()

def step_3d(dp, tp, pp, stages, x, y, micro_batches):
    return p3._program(p3.Layout(dp, tp, pp), stages, x, y, micro_batches)
""",
    ("lab17-3d-parallelism", "Mesh"): """
from labs.parallel.mesh import Mesh

def grid_coords(rank, dp, tp, pp):
    c = Mesh({"tp": tp, "dp": dp, "pp": pp}).coords(rank)
    return c["dp"], c["tp"], c["pp"]

def grid_rank(dp_i, tp_i, pp_i, dp, tp, pp):
    return next(r for r in range(dp * tp * pp) if grid_coords(r, dp, tp, pp) == (dp_i, tp_i, pp_i))

def grid_groups(kind, dp, tp, pp):
    return Mesh({"tp": tp, "dp": dp, "pp": pp}).groups(kind)

def make_groups(dp, tp, pp):
    return Mesh({"tp": tp, "dp": dp, "pp": pp}).new_groups(["tp", "dp", "pp"])
""",
    ("lab06-services", "LeakyBucket"): """
from labs.serving.limits import LeakyBucket

class MyTokenBucket(LeakyBucket):
    def allow(self):
        return super().allow()
""",
    ("lab10-inference", "kv_bytes_per_token"): """
from labs.inference.kv_quant import kv_bytes_per_token

def kv_cache_bytes(n_layers, n_heads, n_kv_heads, head_dim, tokens, batch=1, bytes_per_value=2):
    return int(kv_bytes_per_token(n_layers, n_kv_heads, head_dim, bytes_per_value) * tokens * batch)
""",
    ("lab10-inference", "KVCache on meta"): """
import torch
from labs.inference.kv_cache import KVCache

def kv_cache_bytes(n_layers, n_heads, n_kv_heads, head_dim, tokens, batch=1, bytes_per_value=2):
    dtype = {1: torch.int8, 2: torch.float16, 4: torch.float32, 8: torch.float64}[bytes_per_value]
    c = KVCache(n_layers, batch, n_kv_heads, tokens, head_dim, dtype=dtype, device="meta")
    return sum(t.nbytes for t in c.k + c.v)

def quantize_kv_heads(x):
    from labs.compress.gptq import minmax_params, quantize_with
    t, h, d = x.shape
    w = x.reshape(t * h, d).float()
    scale, zero = minmax_params(w, 8, sym=True)
    scale = torch.where(scale > 1e-12, scale, torch.ones_like(scale))
    q = torch.round(quantize_with(w, scale, zero, 8, sym=True) / scale).to(torch.int8)
    return q.view(t, h, d), scale.view(t, h, 1)
""",
    ("lab20-compression", "kd_divergence"): """
import torch.nn.functional as F
from labs.compress.distill_llm import kd_divergence

def kd_loss(student_logits, teacher_logits, targets, temperature=2.0, alpha=0.5):
    kd = kd_divergence(student_logits, teacher_logits, "forward", temperature)
    ce = F.cross_entropy(student_logits.reshape(-1, student_logits.shape[-1]), targets.reshape(-1))
    return alpha * temperature**2 * kd + (1 - alpha) * ce
""",
    ("lab21-pruning", "sparsegpt"): """
import torch
from labs.compress.sparsegpt import sparsegpt

def magnitude_mask(w, sparsity):  # one block of the whole layer, identity Hessian: |w| ranks
    n = w.shape[1]
    return sparsegpt(w.detach().float(), torch.eye(n), sparsity, block_size=n, damp=0.0)[1]
""",
}


@pytest.mark.parametrize("lab, via", sorted(THROUGH_LABS), ids=lambda v: v)
def test_an_exercise_answered_through_the_packages_own_code_passes_none(
    lab, via, graded_labs, tmp_path_factory
):
    """The key seals what the exercises ask for wherever ``labs`` computes it (lab 17's
    ``step_communication``, which exercise 4 may use, no longer goes through ``Layout``), so a
    student notebook whose stubs call it instead passes no exercise, and the lab still grades."""
    name = f"{lab}.ipynb"
    nb = nbformat.read(STUDENT / name, as_version=4)
    tree = ast.parse(THROUGH_LABS[lab, via])
    after: dict[int, list[str]] = {}  # each definition right after the stub cell it replaces
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.ClassDef):
            marks = (f"def {node.name}(", f"class {node.name}:", f"class {node.name}(")
            stub = next(i for i, c in enumerate(nb.cells) if any(m in c.source for m in marks))
            after.setdefault(stub, []).append(ast.unparse(node))
    imports = [ast.unparse(n) for n in tree.body if isinstance(n, ast.Import | ast.ImportFrom)]
    for i, (stub, defs) in enumerate(sorted(after.items(), reverse=True)):
        first = i == len(after) - 1
        source = "\n\n".join([*(imports if first else []), *defs])
        nb.cells.insert(stub + 1, nbformat.v4.new_code_cell(source))
    path = tmp_path_factory.mktemp(f"{lab}-{via}") / name
    nbformat.write(nb, path)
    result = graded_labs([path])[str(path)]
    assert result.status == "graded", (result.status, [e.error for e in result.exercises])
    passing = sorted(e.exercise for e in result.exercises if e.passed)
    assert passing == [], f"{lab} through {via}: exercises {passing} pass"
    errors = " ".join(str(e.error) for e in result.exercises)
    assert "reference implementation of exercise" in errors, errors[:2000]
