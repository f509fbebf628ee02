"""Gradescope: ``labs-release --gradescope`` writes an autograder bundle whose ``run_autograder``
grades a solution, a stub, an invalid and a missing notebook into a valid ``results.json``.

The bundle runs as Gradescope runs it, under a temporary root instead of ``/autograder``: the zip
unpacked into ``ROOT/source``, the submission in ``ROOT/submission``, ``run_autograder`` started
from ``ROOT`` with ``AUTOGRADER_ROOT=ROOT``; ``setup.sh``'s virtual environment is this test's
(``ROOT/venv`` links to it). ``results.json`` is checked against the fields of Gradescope's
documented specification (https://gradescope-autograders.readthedocs.io/en/latest/specs/, section
"Output format"): :func:`schema_problems` is written from that page.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from labs.course import release
from labs.course.notebooks import parse_lab
from labs.course.student import student_version
from notebook_factory import attack_lab, write

LAB = "lab99-attacks"
POINTS = {"3": 2}  # exercise 3 is worth 2 points, the others 1

# --- Gradescope's results.json, from the specification ------------------------------------------
VISIBILITY = {"hidden", "after_due_date", "after_published", "visible"}
FORMATS = {"text", "html", "simple_format", "md", "ansi"}
TOP = {
    "score": (int, float), "execution_time": (int, float), "output": str, "output_format": str,
    "test_output_format": str, "test_name_format": str, "visibility": str,
    "stdout_visibility": str, "extra_data": dict, "tests": list, "leaderboard": list,
}  # fmt: skip
TEST = {
    "score": (int, float), "max_score": (int, float), "status": str, "name": str,
    "name_format": str, "number": str, "output": str, "output_format": str, "tags": list,
    "visibility": str, "extra_data": dict,
}  # fmt: skip


def schema_problems(doc) -> list[str]:
    """What in ``doc`` breaks Gradescope's documented results format (empty when nothing)."""
    if not isinstance(doc, dict):
        return ["results.json is not a JSON object"]
    problems = [f"unknown top-level field {k!r}" for k in doc if k not in TOP]
    for fields, where, item in [(TOP, "top level", doc)] + [
        (TEST, f"tests[{i}]", t) for i, t in enumerate(doc.get("tests", []))
    ]:
        if where != "top level":
            if not isinstance(item, dict):
                problems.append(f"{where} is not an object")
                continue
            problems += [f"{where}: unknown field {k!r}" for k in item if k not in TEST]
        for name, kind in fields.items():
            value = item.get(name)
            if value is not None and (not isinstance(value, kind) or isinstance(value, bool)):
                problems.append(f"{where}: {name} is {type(value).__name__}, not {kind}")
        for name in ("visibility", "stdout_visibility"):
            if name in item and item[name] not in VISIBILITY:
                problems.append(f"{where}: {name} {item[name]!r} not one of {sorted(VISIBILITY)}")
        for name in ("output_format", "test_output_format", "test_name_format", "name_format"):
            if name in item and item[name] not in FORMATS:
                problems.append(f"{where}: {name} {item[name]!r} not one of {sorted(FORMATS)}")
        if "status" in item and item["status"] not in ("passed", "failed"):
            problems.append(f"{where}: status {item['status']!r} is not 'passed' or 'failed'")
    tests = doc.get("tests", [])
    if "score" not in doc and not (tests and all("score" in t for t in tests)):
        problems.append("no top-level score and not every test has a score")
    if "tests" not in doc and "score" not in doc:
        problems.append("neither tests nor a top-level score")
    return problems


# --- the bundle -----------------------------------------------------------------------------------
@pytest.fixture(scope="session")  # not module: see test_book.built_book
def bundle(tmp_path_factory):
    """The lab released with points, and its Gradescope bundle (the zip and the wheel in it)."""
    tmp = tmp_path_factory.mktemp("gradescope")
    nb = attack_lab()
    nb.metadata["exercise_points"] = POINTS
    src = write(tmp / "labs" / f"{LAB}.ipynb", nb)
    out = tmp / "gradescope"
    argv = [str(src), "--student-dir", str(tmp / "student"), "--key-dir", str(tmp / "keys"),
            "--gradescope", str(out), "--gradescope-visibility", "after_published"]  # fmt: skip
    assert release.main(argv) == 0
    return tmp, out / f"{LAB}.zip"


def run_autograder(tmp_path: Path, archive: Path, submission: dict[str, object]) -> tuple:
    """Gradescope's layout under ``tmp_path``; ``(process, results.json or None)``."""
    root = tmp_path / "autograder"
    (root / "source").mkdir(parents=True)
    with zipfile.ZipFile(archive) as zf:
        zf.extractall(root / "source")
    for name in ("setup.sh", "run_autograder"):
        (root / "source" / name).chmod(0o755)  # zipfile does not restore modes
    shutil.copy(root / "source" / "run_autograder", root / "run_autograder")
    (root / "venv").symlink_to(Path(sys.prefix))  # what setup.sh would have made
    (root / "submission").mkdir()
    (root / "results").mkdir()
    for name, content in submission.items():
        path = root / "submission" / name
        if isinstance(content, str):
            path.write_text(content, encoding="utf-8")
        else:
            write(path, content)
    env = dict(os.environ, AUTOGRADER_ROOT=str(root))
    proc = subprocess.run(
        [str(root / "run_autograder")], cwd=root, env=env, capture_output=True, text=True,
        timeout=300,
    )  # fmt: skip
    results = root / "results" / "results.json"
    return proc, json.loads(results.read_text()) if results.exists() else None, root


def test_the_zip_holds_setup_run_autograder_and_the_key_at_its_root(bundle):
    tmp, archive = bundle
    with zipfile.ZipFile(archive) as zf:
        names = set(zf.namelist())
        modes = {i.filename: i.external_attr >> 16 for i in zf.infolist()}
        setup = zf.read("setup.sh").decode()
        run = zf.read("run_autograder").decode()
    wheel = next(n for n in names if n.endswith(".whl"))
    assert names == {"setup.sh", "run_autograder", f"{LAB}.json", "labs-autograder.json", wheel}
    assert modes["setup.sh"] & 0o111 and modes["run_autograder"] & 0o111
    assert run.startswith("#!/usr/bin/env bash") and setup.startswith("#!/usr/bin/env bash")
    assert 'TORCH_SPEC="${TORCH_SPEC:-torch==2.13.0}"' in setup
    assert "download.pytorch.org/whl/cpu" in setup and f'"./{wheel}[grade,triton]"' in setup
    assert '"$TORCH_SPEC" "./' in setup, "torch is named in the same pip command as the package"
    assert 'ROOT="${AUTOGRADER_ROOT:-/autograder}"' in run and "--gradescope" in run
    for text in (setup, run):
        check = subprocess.run(["bash", "-n"], input=text, text=True, capture_output=True)
        assert check.returncode == 0, check.stderr
    key = json.loads((tmp / "keys" / f"{LAB}.json").read_text())
    assert key["exercises"]["3"]["points"] == 2
    with zipfile.ZipFile(archive) as zf, zipfile.ZipFile(io.BytesIO(zf.read(wheel))) as whl:
        meta = next(n for n in whl.namelist() if n.endswith(".dist-info/METADATA"))
        text = whl.read(meta).decode()
    assert "Provides-Extra: grade" in text  # setup.sh installs [grade,triton]
    grade = [line for line in text.splitlines() if line.endswith('extra == "grade"')]
    assert any("ipykernel" in line for line in grade) and any("nbformat" in line for line in grade)


def test_a_solution_gets_every_point(bundle, tmp_path):
    _, archive = bundle
    proc, doc, root = run_autograder(tmp_path, archive, {f"{LAB}.ipynb": attack_lab()})
    assert proc.returncode == 0 and doc is not None, proc.stdout + proc.stderr
    assert schema_problems(doc) == []
    assert [(t["number"], t["score"], t["max_score"], t["status"]) for t in doc["tests"]] == [
        ("1", 1, 1, "passed"), ("2", 1, 1, "passed"), ("3", 2, 2, "passed"),
    ]  # fmt: skip
    assert doc["score"] == 4 and isinstance(doc["execution_time"], int)
    assert {t["visibility"] for t in doc["tests"]} == {"after_published"}
    assert doc["tests"][2]["output"].split()[:3] == ["3", "PASS", "graded"]
    assert "PASS exercise 3: weight bytes" in doc["tests"][2]["output"]
    assert doc["tests"][0]["name"] == "Exercise 1: return twice x"
    assert doc["stdout_visibility"] == "hidden" and "4 of 4 points" in doc["output"]
    assert doc["extra_data"] == {"protections_off": []} or "Protections off" in doc["output"]


def test_a_stub_gets_none_and_says_why(bundle, tmp_path):
    tmp, archive = bundle
    stub = student_version(parse_lab(tmp / "labs" / f"{LAB}.ipynb"))
    proc, doc, _ = run_autograder(tmp_path, archive, {"my-lab99.ipynb": stub, "notes.txt": "hi"})
    assert proc.returncode == 0 and doc is not None, proc.stdout + proc.stderr
    assert schema_problems(doc) == []
    assert [(t["score"], t["max_score"], t["status"]) for t in doc["tests"]] == [
        (0, 1, "failed"), (0, 1, "failed"), (0, 2, "failed"),
    ]  # fmt: skip
    assert doc["score"] == 0
    assert all("FAIL" in t["output"] and "not implemented" in t["output"].lower()
               or "not run" in t["output"] for t in doc["tests"]), doc["tests"]  # fmt: skip


@pytest.mark.parametrize("case", ["missing", "invalid", "ambiguous"])
def test_a_missing_or_invalid_notebook_is_a_result(bundle, tmp_path, case):
    _, archive = bundle
    submission = {
        "missing": {"answers.py": "print(1)"},
        "invalid": {f"{LAB}.ipynb": '{"cells": ['},
        "ambiguous": {"a.ipynb": attack_lab(), "b.ipynb": attack_lab()},
    }[case]
    proc, doc, _ = run_autograder(tmp_path, archive, submission)
    assert proc.returncode == 0 and doc is not None, proc.stdout + proc.stderr
    assert schema_problems(doc) == []
    assert doc["score"] == 0 and len(doc["tests"]) == 3
    assert {t["status"] for t in doc["tests"]} == {"failed"}
    why = {"missing": "no notebook was submitted", "invalid": "not a valid notebook",
           "ambiguous": "several notebooks were submitted"}[case]  # fmt: skip
    assert why in doc["output"] or all(why in t["output"] for t in doc["tests"]), doc


def test_the_schema_check_rejects_what_gradescope_would():
    good = {"score": 1.0, "tests": [{"name": "t", "score": 1, "max_score": 1}]}
    assert schema_problems(good) == []
    assert schema_problems({"tests": [{"name": "t"}]})  # no score anywhere
    assert schema_problems({"score": 1, "visibility": "sometimes"})
    assert schema_problems({"score": 1, "tests": [{"score": "1"}]})
    assert schema_problems({"score": 1, "tests": [{"score": 1, "status": "ok"}]})
    assert schema_problems({"score": 1, "tests": [{"score": 1, "colour": "red"}]})
    assert schema_problems({"score": True})


DAEMON = """import os, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:  # a daemon in its own session, waiting to rewrite the results
        for _ in range(400):
            time.sleep(0.05)
            try:
                with open({target!r}, "w") as f:
                    f.write('{{"score": 999, "tests": []}}')
            except OSError:
                pass
        os._exit(0)
    os._exit(0)
os.wait()"""


def test_without_namespaces_it_says_which_protections_are_off_removes_the_key_and_kills_daemons(
    bundle, tmp_path
):
    """As in a container that refuses user namespaces (``--no-isolation`` stands in for it): the
    output says which protections are off, the key leaves the container before any kernel starts,
    and a daemon the submission leaves behind is killed before results.json is written."""
    from conftest import script
    from notebook_factory import cell

    _, archive = bundle
    root = tmp_path / "autograder"
    with zipfile.ZipFile(archive) as zf:
        zf.extractall(root / "source")
    target = root / "results" / "results.json"
    nb = attack_lab()
    nb.cells.insert(2, cell(DAEMON.format(target=str(target))))
    write(root / "submission" / f"{LAB}.ipynb", nb)
    proc = subprocess.run(
        [script("labs-grade"), "--gradescope", root, "--no-isolation"], cwd=root,
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    import time

    time.sleep(3)  # the daemon would have rewritten it by now
    doc = json.loads(target.read_text())
    assert schema_problems(doc) == [] and doc["score"] == 4, doc
    if "pids" in doc["extra_data"]["protections_off"]:  # no cgroup took the daemon down with
        assert "left running" in proc.stdout, proc.stdout  # its kernel: the grader killed it
    assert "Protections off on this grader: " in doc["output"]
    assert "limits still apply" in doc["output"]
    assert "filesystem" in doc["extra_data"]["protections_off"]
    assert not (root / "source" / f"{LAB}.json").exists(), "the key must leave the container"


ORPHAN = """import os, sys, time
from labs.course.gradescope import _adopt_orphans, _kill_leftovers
assert _adopt_orphans()
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:  # a daemon in a session of its own, orphaned at once
        os.execvp(sys.executable, [sys.executable, "-c", "import time; time.sleep(60)"])
    os._exit(0)
os.wait()
time.sleep(0.5)
print(_kill_leftovers())
"""


def test_a_process_left_running_is_adopted_and_killed():
    """Without namespaces or cgroups only the grader can end what a kernel leaves behind: it
    adopts orphans (child subreaper) and kills them before writing results.json."""
    done = subprocess.run(
        [sys.executable, "-c", ORPHAN], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[-1] == "1", done.stdout


def test_the_zip_is_written_under_an_unpredictable_name(bundle, tmp_path):
    """A folder planted under the temporary name the bundle once used does not block the build,
    and nothing but the bundle is left beside it."""
    from labs.course.bundle import write_bundle

    tmp, archive = bundle
    wheel = next((archive.parent / LAB).glob("*.whl"))
    out = tmp_path / "out"
    (out / f".{LAB}.zip.tmp" / "x").mkdir(parents=True)
    written = write_bundle(tmp / "keys" / f"{LAB}.json", out, wheel)
    assert written == out / f"{LAB}.zip"
    with zipfile.ZipFile(written) as zf, zipfile.ZipFile(archive) as old:
        assert sorted(zf.namelist()) == sorted(old.namelist())
    left = sorted(p.name for p in out.iterdir())
    assert left == [f".{LAB}.zip.tmp", LAB, f"{LAB}.zip"], left
