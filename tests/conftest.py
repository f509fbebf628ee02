"""Shared fixtures: the repository root and the lab notebooks."""

from __future__ import annotations

import os
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
# and the many short modules fill the time after them.
FIRST = ("test_book.py", "test_lab_exercises.py", "test_grade_sealed.py", "test_wrong_answers.py")


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
