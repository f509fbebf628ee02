"""What the grader writes survives whatever a kernel did to the output folder (red team #3, #4).

Without namespaces (``--no-isolation``, the usual case on Gradescope) a kernel can write into the
folder the gradebook or ``results.json`` goes to: a forged full-marks file under the real name,
and a folder under the name the grader used to write through.  The grader writes through an
unpredictable temporary name and a rename; if that still fails, it removes what stands under the
real name and says so, so a forged grade never survives.  No kernel runs here: a few seconds.
"""

from __future__ import annotations

import io
import json
import os
import shutil
from pathlib import Path

import pytest

from labs.course import exports, gradefile, gradescope
from labs.course.results import ExerciseResult, NotebookResult

ROOT = Path(__file__).resolve().parents[1]
FORGED = "student,lab,exercise,outcome\nsid,lab02,1,PASS\n"


def _results():
    ex = [ExerciseResult("c/sid/lab02-matmul-flops.ipynb", 1, False, "wrong", "graded")]
    return [NotebookResult("c/sid/lab02-matmul-flops.ipynb", ex, {}, 1, [], "lab02", "graded")]


def _plant(target: Path) -> None:
    """What the red team's kernel did: a forged file, and folders under guessable temp names."""
    target.write_text(FORGED)
    for name in (f".{target.name}.tmp", f"{target.name}.tmp", f".{target.name}.swp"):
        (target.parent / name).mkdir()
        (target.parent / name / "x").write_text("blocker")


@pytest.mark.parametrize("name", ["gb.csv", "gb.json"])
def test_a_forged_gradebook_is_replaced_despite_planted_temp_folders(tmp_path, name):
    target = tmp_path / name
    _plant(target)
    gradefile.write_gradebook(_results(), {}, target, {"lab02": {1: 1.0}})
    text = target.read_text()
    assert "PASS" not in text and "FAIL" in text or '"passed": false' in text
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp") and p.is_file()]


def test_the_file_gets_the_mode_an_ordinary_write_gives(tmp_path):
    umask = os.umask(0o022)
    try:
        gradefile.write_atomic(tmp_path / "gb.csv", "ours\n")
    finally:
        os.umask(umask)
    assert (tmp_path / "gb.csv").stat().st_mode & 0o777 == 0o644


def test_a_folder_under_the_real_name_is_replaced_by_the_file(tmp_path):
    target = tmp_path / "gb.csv"
    target.mkdir()
    (target / "deep").mkdir()
    gradefile.write_atomic(target, "ours\n")
    assert target.read_text() == "ours\n"


def test_an_export_over_a_forged_file_is_the_graders(tmp_path):
    roster = tmp_path / "roster.csv"
    roster.write_text("folder,Student,ID,SIS User ID,SIS Login ID,Section\nsid,sid,1,s1,sid,A\n")
    target = tmp_path / "canvas.csv"
    _plant(target)
    exports.write_export(
        "canvas", target, _results(), {"c/sid/lab02-matmul-flops.ipynb": "sid"},
        {"lab02": {1: 1.0}}, exports.read_roster(roster),
    )  # fmt: skip
    assert "PASS" not in target.read_text()


def test_when_the_write_fails_the_forged_file_is_gone_and_the_error_says_so(tmp_path, monkeypatch):
    target = tmp_path / "gb.csv"
    target.write_text(FORGED)

    def refuse(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", refuse)
    with pytest.raises(OSError, match="nothing left there") as err:
        gradefile.write_atomic(target, "ours\n")
    assert err.value.filename == str(target)
    assert not target.exists()
    assert list(tmp_path.iterdir()) == []  # no temporary file left either


def _gradescope_root(tmp_path: Path) -> Path:
    root = tmp_path / "autograder"
    (root / "source").mkdir(parents=True)
    (root / "submission").mkdir()
    key = "lab02-matmul-flops.json"
    shutil.copy(ROOT / "instructor" / "keys" / key, root / "source" / key)
    (root / "source" / "labs-autograder.json").write_text(json.dumps({"key": key}))
    return root


def test_gradescope_results_json_replaces_a_forged_one(tmp_path):
    root = _gradescope_root(tmp_path)  # no notebook submitted: graded without any kernel
    results = root / "results"
    results.mkdir()
    (results / "results.json").write_text(json.dumps({"score": 5.0, "tests": []}))
    (results / ".results.json.tmp").mkdir()  # the red team's blocker
    out = io.StringIO()
    assert gradescope.run(root, isolate=False, out=out) == 0, out.getvalue()
    doc = json.loads((results / "results.json").read_text())
    assert doc["score"] == 0 and len(doc["tests"]) == 5


def test_gradescope_removes_a_forged_results_json_it_cannot_replace(tmp_path, monkeypatch):
    root = _gradescope_root(tmp_path)
    (root / "results").mkdir()
    forged = root / "results" / "results.json"
    forged.write_text(json.dumps({"score": 5.0, "tests": []}))
    monkeypatch.setattr(os, "replace", lambda a, b: (_ for _ in ()).throw(OSError(5, "I/O")))
    out = io.StringIO()
    assert gradescope.run(root, isolate=False, out=out) == 3
    assert not forged.exists()
    assert "cannot write" in out.getvalue()
