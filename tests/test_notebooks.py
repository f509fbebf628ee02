"""House rules for the book's sources: no stored outputs, valid labs, a complete TOC, fresh students."""

from __future__ import annotations

import re
import subprocess

import nbformat
import pytest
import yaml

from conftest import LABS, REPO, STUDENT, script
from labs.course.key import KEY_DIR, load_key
from labs.course.notebooks import parse_lab
from labs.course.setup_cell import setup_cell_source

ALL_NOTEBOOKS = sorted([*REPO.glob("book/**/*.ipynb"), *STUDENT.glob("*.ipynb")])


def test_there_are_labs():
    assert LABS, "book/labs holds no lab notebook"


@pytest.mark.parametrize("path", ALL_NOTEBOOKS, ids=lambda p: str(p.relative_to(REPO)))
def test_notebooks_are_stored_without_outputs(path):
    nb = nbformat.read(path, as_version=4)
    dirty = [
        i
        for i, c in enumerate(nb.cells)
        if c.cell_type == "code" and (c.outputs or c.execution_count)
    ]
    assert not dirty, f"{path}: cells {dirty} have outputs; run: labs-release"


@pytest.mark.parametrize("path", LABS, ids=lambda p: p.name)
def test_every_lab_follows_the_exercise_format(path):
    info = parse_lab(path)
    assert info.exercises, f"{path} has no exercise"
    assert sorted(info.exercises) == list(range(1, len(info.exercises) + 1)), (
        f"{path}: exercises should be numbered 1..N, got {sorted(info.exercises)}"
    )
    first_code = next(c for c in info.nb.cells if c.cell_type == "code")
    assert first_code.source == setup_cell_source(), (
        f"{path}: the first code cell must be the Colab set-up cell; run: labs-release"
    )


def test_student_folder_is_up_to_date():
    result = subprocess.run(
        [script("labs-release"), "--check"], cwd=REPO, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("path", LABS, ids=lambda p: p.name)
def test_every_lab_has_an_answer_key_and_no_student_copy_holds_solutions(path):
    """The key (instructor/keys/) carries the reference solution the grader runs in its trusted
    kernel (key format 3); the student notebook carries none, nor the graded variants of the
    checks, and no key sits in student/."""
    key_path = KEY_DIR / f"{path.stem}.json"
    assert key_path.is_file(), f"{key_path} is missing; run: labs-release"
    key = load_key(key_path)
    assert sorted(map(int, key["exercises"])) == sorted(parse_lab(path).exercises)
    assert key.get("format") == 3 and key.get("cells"), f"{key_path}: not a format-3 key"
    student = (STUDENT / path.name).read_text(encoding="utf-8")
    assert "BEGIN SOLUTION" not in student, f"student/{path.name} holds solution code"
    assert "graded-exercise-" not in student, f"student/{path.name} holds graded variants"
    for ex in key["exercises"].values():
        assert all(g["source"] not in student for g in ex["graded"]), path.name
    assert not list(STUDENT.glob("*.json")), "answer keys must not be in student/"


def _toc_files(node) -> list[str]:
    files = []
    if isinstance(node, dict):
        if "file" in node:
            files.append(node["file"])
        if "root" in node:
            files.append(node["root"])
        for value in node.values():
            files.extend(_toc_files(value))
    elif isinstance(node, list):
        for item in node:
            files.extend(_toc_files(item))
    return files


def test_toc_lists_every_page_and_only_pages_that_exist():
    toc = yaml.safe_load((REPO / "_toc.yml").read_text())
    listed = _toc_files(toc)
    assert len(listed) == len(set(listed)), "a page is listed twice in _toc.yml"
    missing = [
        f for f in listed if not any((REPO / f"{f}{ext}").is_file() for ext in (".md", ".ipynb"))
    ]
    assert not missing, f"_toc.yml lists pages that do not exist: {missing}"
    pages = {
        str(p.relative_to(REPO).with_suffix(""))
        for p in [*REPO.glob("book/**/*.md"), *REPO.glob("book/**/*.ipynb")]
        if "assets" not in p.parts
    }
    orphans = sorted(pages - set(listed))
    assert not orphans, f"pages not in _toc.yml (add them, or delete them): {orphans}"


PLACEHOLDER = re.compile(
    r"lorem ipsum|coming soon|\bTBD\b|\bTODO\b|to be written|placeholder", re.I
)
QUOTED = re.compile(
    r'"[^"]*"'
)  # a quoted word is a mention (a filter rule, an FX op name), not a gap


def test_no_placeholder_text_in_the_book():
    hits = []
    for path in [*REPO.glob("book/**/*.md"), *REPO.glob("book/**/*.ipynb")]:
        for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if PLACEHOLDER.search(QUOTED.sub("", line)):
                hits.append(f"{path.relative_to(REPO)}:{lineno}: {line.strip()[:80]}")
    assert not hits, "placeholder text:\n" + "\n".join(hits)
