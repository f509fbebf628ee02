"""Shared fixtures: the repository root and the lab notebooks."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
LABS = sorted((REPO / "book" / "labs").glob("*.ipynb"))
STUDENT = REPO / "student"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


@pytest.fixture
def repo() -> Path:
    return REPO
