"""Shared fixtures: the repository root and the lab notebooks."""

from __future__ import annotations

import fcntl
import hashlib
import os
import pickle
import shutil
import socket
from pathlib import Path

import pytest
import torch

# Triton runs on a CPU only through its interpreter, and reads this variable when it is first
# imported: set it before any test (or torch.compile) can import triton.
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

REPO = Path(__file__).resolve().parent.parent
LABS = sorted((REPO / "book" / "labs").glob("*.ipynb"))
STUDENT = REPO / "student"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


# The longest test modules, collected first: tools/test.sh runs each module whole on one
# pytest-xdist worker (--dist loadscope) in collection order, so these start first, on both workers,
# and the many short modules fill the time after them. Longest first, by tests/BUDGET.md.
FIRST = (
    "test_book.py", "test_lab_exercises.py", "test_wrong_answers.py", "test_fsdp_train.py",
    "test_gradebook.py", "test_inference_chunked_prefill.py", "test_grade_sealed.py",
)  # fmt: skip


def pytest_collection_modifyitems(config, items):
    order = {name: i for i, name in enumerate(FIRST)}
    items.sort(key=lambda item: order.get(item.path.name, len(FIRST)))  # stable: else as found
    if not torch.cuda.is_available():  # tests marked gpu: one skip line each on a CPU machine
        skip = pytest.mark.skip(reason="needs a CUDA GPU (bash tools/gpu-check.sh runs it on one)")
        for item in items:
            if item.get_closest_marker("gpu"):
                item.add_marker(skip)


@pytest.fixture
def repo() -> Path:
    return REPO


def script(name: str) -> str:
    """The console script ``name`` (``labs-grade``, ``labs-release``) of this Python's environment.

    The tests run the course commands in their documented form; ``pip install`` puts the scripts
    beside the interpreter.
    """
    import sys

    path = Path(sys.executable).parent / name
    if not path.exists():
        pytest.fail(
            f"console script {name} not found beside {sys.executable}: reinstall the package"
        )
    return str(path)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free right now (for torchrun rendezvous in tests)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def graded_labs(tmp_path_factory):
    """``grade(paths) -> {path: NotebookResult}``: each notebook graded once per test run.

    Grading a lab (its reference run, then the notebook in a sealed kernel) is the suite's most
    expensive step, so every module and every pytest-xdist worker shares one record of it: a
    pickle beside the workers' temporary folders (the parent of each worker's base folder, common
    to one run), keyed by the notebook's and its key's contents, written under a file lock. The
    first caller grades what is missing, two kernels at a time; later callers, in any module or
    worker, read it. Nothing outlives the run.
    """
    root = tmp_path_factory.getbasetemp().parent
    store, lock = root / "graded-labs.pickle", root / "graded-labs.lock"

    def grade(paths: list[Path]) -> dict[str, object]:
        from labs.course.grade import grade_notebooks
        from labs.course.key import find_key

        def ident(p: Path) -> str:
            parts = [p.read_bytes()]
            try:
                parts.append(find_key(p).read_bytes())
            except ValueError:  # no key: graded as invalid, still cached by the notebook
                pass
            return hashlib.sha256(b"\0".join(parts)).hexdigest()

        wanted = {str(p): ident(p) for p in paths}
        with open(lock, "w") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            done = pickle.loads(store.read_bytes()) if store.exists() else {}
            missing = [Path(p) for p, h in wanted.items() if (p, h) not in done]
            if missing:
                for r in grade_notebooks(missing, jobs=2):
                    done[(r.notebook, wanted[r.notebook])] = r
                tmp = store.with_name(f".{store.name}.tmp")
                tmp.write_bytes(pickle.dumps(done))
                tmp.replace(store)
        return {p: done[(p, h)] for p, h in wanted.items()}

    return grade
