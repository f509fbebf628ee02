"""Which notebooks ``labs-grade --class`` grades (red team #5 and #7); no kernel runs here.

A tree of a thousand nested folders in one student's folder (even in ``.ipynb_checkpoints``)
used to raise ``RecursionError`` in the listing and cost the whole class its gradebook; six copies
of one notebook each got a full kernel run before five were thrown away as second submissions.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from labs.course import gradebook, gradescope
from labs.course.results import all_fail
from labs.course.submissions import MAX_DEPTH, discover, keep_first, walk
from labs.course.tree import remove_tree

ROOT = Path(__file__).resolve().parents[1]
LAB = "lab02-matmul-flops"
KEYS = ROOT / "instructor" / "keys"


@pytest.fixture(autouse=True)
def _no_deep_tree_left(tmp_path):
    """pytest's clean-up of old temporary folders (``shutil.rmtree``) recurses: remove the deep
    trees here, or a later pytest run of anyone on this machine dies of ``RecursionError``."""
    yield
    remove_tree(tmp_path)


def _deep(base: Path, levels: int = 1100) -> None:
    """``levels`` nested folders under ``base`` (made one at a time: no path grows too long)."""
    here = os.open(base, os.O_RDONLY | os.O_DIRECTORY) if base.exists() else None
    if here is None:
        base.mkdir(parents=True)
        here = os.open(base, os.O_RDONLY | os.O_DIRECTORY)
    for _ in range(levels):
        os.mkdir("d", dir_fd=here)
        nxt = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=here)
        os.close(here)
        here = nxt
    os.close(here)


def _class(tmp_path: Path) -> Path:
    cls = tmp_path / "class"
    for who in ("alice", "bob"):
        (cls / who).mkdir(parents=True)
        shutil.copy(ROOT / "student" / f"{LAB}.ipynb", cls / who / f"{LAB}.ipynb")
    _deep(cls / "bob" / ".ipynb_checkpoints")
    _deep(cls / "bob" / "work")
    return cls


def test_a_deep_tree_costs_the_class_nothing(tmp_path):
    cls = _class(tmp_path)
    found, refused = discover(cls)
    assert [(s, p.name) for s, p in found] == [("alice", f"{LAB}.ipynb"), ("bob", f"{LAB}.ipynb")]
    assert refused == [
        f"bob/work/{'d/' * (MAX_DEPTH - 2)}d: more than {MAX_DEPTH} folders deep (not searched)"
    ]  # fmt: skip; the hidden folder is not entered at all


def test_walk_refuses_links_and_skips_hidden_folders(tmp_path):
    (tmp_path / "a" / ".hidden").mkdir(parents=True)
    (tmp_path / "a" / ".hidden" / "x.ipynb").write_text("{}")
    (tmp_path / "a" / "y.ipynb").write_text("{}")
    (tmp_path / "a" / "link.ipynb").symlink_to(tmp_path / "a" / "y.ipynb")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    found, refused = walk(tmp_path)
    assert found == [tmp_path / "a" / "y.ipynb"]
    assert sorted(refused) == ["a/link.ipynb: a symbolic link (not graded)",
                               "b: a symbolic link (not graded)"]  # fmt: skip


def test_gradescope_finds_the_submission_beside_a_deep_tree(tmp_path):
    sub = tmp_path / "submission"
    sub.mkdir()
    shutil.copy(ROOT / "student" / f"{LAB}.ipynb", sub / f"{LAB}.ipynb")
    _deep(sub / ".ipynb_checkpoints")
    _deep(sub / "x")
    assert gradescope.find_submission(sub, LAB) == sub / f"{LAB}.ipynb"


def test_second_submissions_are_dropped_before_grading(tmp_path):
    found = [("dos", tmp_path / "dos" / f"{LAB}-{i}.ipynb") for i in range(6)]
    found += [("eve", tmp_path / "eve" / f"{LAB}.ipynb"), ("eve", tmp_path / "eve" / "notes.ipynb")]
    kept, dropped = keep_first(found, None, KEYS)
    assert kept == [found[0], found[6], found[7]]
    assert dropped == [p for _, p in found[1:6]]  # notes.ipynb: no key, kept (graded invalid)


@pytest.fixture
def fake_grading(monkeypatch):
    """``labs-grade``'s own code, with the kernels replaced by a recorder."""
    graded: list[str] = []

    def grade_notebooks(paths, *args, **kwargs):
        graded.extend(map(str, paths))
        key = json.loads((KEYS / f"{LAB}.json").read_text())
        return [all_fail(str(p), key, "graded", "recorded", key["lab"]) for p in paths]

    monkeypatch.setattr(gradebook, "grade_notebooks", grade_notebooks)
    return graded


def test_the_cli_grades_one_copy_and_the_class_despite_a_deep_tree(tmp_path, fake_grading):
    cls = _class(tmp_path)
    for i in range(5):
        shutil.copy(cls / "bob" / f"{LAB}.ipynb", cls / "bob" / f"{LAB}-copy{i}.ipynb")
    out = tmp_path / "gb.csv"
    rc = gradebook.main(["--class", str(cls), "--gradebook", str(out), "--keys", str(KEYS)])
    assert rc == 0
    assert [Path(p).relative_to(cls).as_posix() for p in fake_grading] == [
        f"alice/{LAB}.ipynb",
        f"bob/{LAB}-copy0.ipynb",
    ]  # fmt: skip; the first by path
    assert {line.split(",")[0] for line in out.read_text().splitlines()[1:]} == {"alice", "bob"}


def test_the_cli_output_of_the_deep_tree_is_one_line(tmp_path, fake_grading, capsys):
    cls = _class(tmp_path)
    gradebook.main(["--class", str(cls), "--gradebook", str(tmp_path / "g.csv")])
    err = capsys.readouterr().err
    assert err.count("refused:") == 1 and "not searched" in err


def test_a_notebook_over_the_size_limit_is_invalid_and_never_read(tmp_path, monkeypatch):
    """Red team #6: a 1 GB notebook was read whole (2.1 GB of grader memory) before grading."""
    from labs.course import notebooks
    from labs.course.grade import grade_notebook
    from labs.course.submissions import NOTEBOOK_LIMIT

    big = tmp_path / "eve" / f"{LAB}.ipynb"
    big.parent.mkdir()
    with open(big, "wb") as f:  # sparse: no disk, no time
        f.truncate(NOTEBOOK_LIMIT + 1)
    monkeypatch.setattr(notebooks.nbformat, "reads", lambda *a, **k: pytest.fail("it was read"))
    r = grade_notebook(big, KEYS / f"{LAB}.json")  # no kernel starts for an invalid notebook
    assert {(e.outcome, e.status) for e in r.exercises} == {("FAIL", "invalid")}
    assert "over the 64 MiB limit for a notebook; not read" in r.exercises[0].error


def test_a_notebook_is_read_when_graded_and_only_if_unchanged(tmp_path):
    """The listing takes each notebook's digest; the notebook itself is read at its turn (the
    class is never all in memory), and one rewritten in between is not graded."""
    from labs.course.submissions import digest, load

    path = tmp_path / f"{LAB}.ipynb"
    text = (ROOT / "student" / f"{LAB}.ipynb").read_bytes()
    path.write_bytes(b"\xef\xbb\xbf" + text)  # a byte-order mark is fine
    sha = digest(path)
    assert isinstance(sha, str) and len(load(path, sha).cells) > 5
    path.write_bytes(text.replace(b"NotImplementedError", b"RuntimeError"))
    assert "changed while the class was graded" in str(load(path, sha))
    assert "no such notebook file" in str(digest(tmp_path / "gone.ipynb"))


def test_the_kernels_are_never_shown_the_key_folder(tmp_path, monkeypatch):
    """Red team note: a pip-installed grader's default key folder lies beside site-packages,
    which kernels may read; every key folder is in the sandbox's ``hide`` list, so a kernel that
    could see one fails to start (an error, never a leak)."""
    from labs.course import grade

    seen: dict = {}
    monkeypatch.setattr(grade, "reference_run", lambda k, **kw: None)

    def fake(p, k, **kw):
        seen.update(kw)
        return all_fail(str(p), k, "graded", "recorded", k["lab"])

    monkeypatch.setattr(grade, "grade_notebook", fake)
    keys = tmp_path / "keys"
    keys.mkdir()
    shutil.copy(KEYS / f"{LAB}.json", keys)
    sub = tmp_path / "class" / "a" / f"{LAB}.ipynb"
    grade.grade_notebooks([sub], key_dir=keys)
    assert str(keys.resolve()) in seen["hide"] and str(sub.parent.resolve()) in seen["hide"]
    grade.grade_notebooks([sub], key=keys / f"{LAB}.json")
    assert str(keys.resolve()) in seen["hide"]
