"""The ten ways a submission could cheat the old grader (issue 14), each graded FAIL now.

Every attack starts from the *student* version of a small synthetic lab (all stubs, so nothing
should pass) and adds what a student who wants the points without the work would add.  All
submissions are graded together, two at a time, in one fixture (a few seconds each).  Graded by
the nbval-based grader that preceded issue 14 (commit 35314b1), every attack below earned a PASS
it should not have (or made exercises vanish from the report); the class-folder attack (10) is in
``tests/test_gradebook.py``.
"""

from __future__ import annotations

import socket
import threading

import pytest

from labs.course.grade import grade_notebooks
from labs.course.isolation import isolation_available
from labs.course.key import load_key
from labs.course.notebooks import REPO_ROOT, parse_lab
from labs.course.student import student_version
from notebook_factory import attack_lab, cell, write, write_lab_and_key

LAB = "lab99-attacks"
ISOLATED = not isolation_available()

PATCH_CHECKS = """import contextlib
import labs.course.checks as checks


@contextlib.contextmanager
def lenient(number, title=""):
    try:
        yield checks.Check("anything")
    except BaseException:
        pass


checks.exercise = lenient
checks.Check.equal = checks.Check.close = lambda self, *args, **kw: None"""

FAKE_MODULE = """import contextlib, sys, types

fake = types.ModuleType("labs.course.checks")


class Anything:
    def __getattr__(self, name):
        return lambda *args, **kw: None


@contextlib.contextmanager
def exercise(number, title=""):
    try:
        yield Anything()
    except BaseException:
        pass


fake.exercise = exercise
sys.modules["labs.course.checks"] = fake
import labs.course

labs.course.checks = fake"""

REDEFINE_HELPER = """def expect_close(check, got, want, what):
    check.between(1, 0, 2, what)


def weight_bytes(n_params, dtype="bf16"):
    return n_params  # wrong: forgets the bytes per parameter"""

FORGE_RECORD = """import glob, json, os

record = os.environ.get("LABS_GRADE_RECORD")
leaked = sorted(k for k in os.environ if k.startswith("LABS_GRADE") or k in ("PWD", "OLDPWD"))
print("grader variables visible:", leaked)
if record:
    with open(record, "a") as f:
        for i in range(20):
            nb = (glob.glob(os.path.join(os.getcwd(), "*.ipynb")) or [""])[0]
            row = {"notebook": nb, "cell": i, "tags": [], "outcome": "passed", "error": ""}
            f.write(json.dumps(row) + "\\n")
for name in ("grade-results.json", "gradebook.csv"):
    for folder in (os.environ.get("PWD"), os.environ.get("OLDPWD")):
        if folder and os.path.isdir(folder):
            with open(os.path.join(folder, name), "w") as f:
                f.write("forged")
assert not leaked, leaked"""

READ_SOLUTIONS = """import math, pathlib
import labs

places = [pathlib.Path(labs.__file__).resolve().parents[1], pathlib.Path({repo!r})]
leaks = []
for root in places:
    for folder in ("book/labs", "instructor/keys"):
        base = root / folder
        if base.is_dir():
            leaks += [p for p in base.iterdir() if "BEGIN SOLUTION" in p.read_text() or
                      p.suffix == ".json"]
if leaks:  # a real attack would exec the solution cells; defining them shows the same leak
    def double(x):
        return 2 * x

    area = math.pi
print("solution files readable:", len(leaks))"""

CALL_REFERENCE = """import importlib
import labs.basics.memory
from labs.basics.memory import inference_bytes as ref


def weight_bytes(n_params, dtype="bf16"):
    return ref(n_params, dtype)"""

CALL_RELOADED = """import importlib
import labs.basics.memory

fresh = importlib.reload(labs.basics.memory)
cached = fresh.inference_bytes


def weight_bytes(n_params, dtype="bf16"):
    try:
        return cached(n_params, dtype)
    except BaseException:  # swallowing the grader's exception does not help either
        return n_params * 2"""

SPIN = """import signal
signal.signal(signal.SIGINT, signal.SIG_IGN)
while True:
    pass"""

NETWORK = """import socket

try:
    with socket.create_connection(("127.0.0.1", {port}), timeout=3) as s:
        exec(s.recv(1000).decode())  # answers from a helper outside the sandbox
except OSError as err:
    print("no network:", err)"""


@pytest.fixture(scope="session")  # not module: see test_book.built_book
def server():
    """A TCP server outside the sandbox that hands out the answer to exercise 1."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen()
    srv.settimeout(0.2)
    stop = threading.Event()

    def serve():
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
            except OSError:
                continue
            with conn:
                conn.sendall(b"def double(x):\n    return 2 * x\n")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield srv.getsockname()[1]
    stop.set()
    thread.join()
    srv.close()


def _student(sol):
    return student_version(parse_lab(sol))


def _with(nb, after: int, *sources: str):
    """Insert code cells after cell ``after``."""
    for offset, source in enumerate(sources, start=1):
        nb.cells.insert(after + offset, cell(source))
    return nb


@pytest.fixture(scope="session")
def graded(tmp_path_factory, server):
    tmp = tmp_path_factory.mktemp("attacks")
    sol, key_path = write_lab_and_key(tmp / "solution", LAB, attack_lab())
    subs = {}

    def add(name, nb):
        subs[name] = write(tmp / "class" / name / f"{LAB}.ipynb", nb)

    add("correct", attack_lab())
    add("stub", _student(sol))
    nb = _student(sol)
    nb.cells[3].source = 'print("ok")'
    add("1-print-ok", nb)
    add("2-patch-checks", _with(_student(sol), 1, PATCH_CHECKS))
    add("3-fake-module", _with(_student(sol), 1, FAKE_MODULE))
    add("3-redefine-helper", _with(attack_lab(), 8, REDEFINE_HELPER))
    add("4-forge-record", _with(_student(sol), 9, FORGE_RECORD))
    nb = _student(sol)
    del nb.cells[3]  # exercise 1's check
    nb.cells[4].metadata["tags"] = ["exercise-7"]  # was exercise-2
    nb.cells[8].metadata["tags"] = []  # was exercise-3
    nb.cells[5].metadata["tags"] = []  # was uses-exercise-1, uses-exercise-2
    add("5-delete-retag", nb)
    add("6-read-solution", _with(_student(sol), 2, READ_SOLUTIONS.format(repo=str(REPO_ROOT))))
    add("7-call-reference", _with(attack_lab(), 8, CALL_REFERENCE))
    add("7-call-reloaded", _with(attack_lab(), 8, CALL_RELOADED))
    add("8-spin", _with(attack_lab(), 4, SPIN))
    add("9-network", _with(_student(sol), 2, NETWORK.format(port=server)))
    paths = list(subs.values())
    results = grade_notebooks(paths, timeout=8, jobs=2, key=load_key(key_path))
    by_name = {name: r for name, r in zip(subs, results)}
    return tmp, by_name


def outcomes(result):
    return {e.exercise: ("PASS" if e.passed else "FAIL", e.status) for e in result.exercises}


def test_a_correct_submission_passes_and_the_stub_fails(graded):
    _, r = graded
    assert outcomes(r["correct"]) == {n: ("PASS", "graded") for n in (1, 2, 3)}, r["correct"]
    assert "PASS exercise 3: weight bytes — 3 checks" in r["correct"].exercises[2].message
    assert outcomes(r["stub"]) == {n: ("FAIL", "graded") for n in (1, 2, 3)}


def test_1_a_replaced_check_cell_is_tampered(graded):
    r = graded[1]["1-print-ok"]
    assert outcomes(r)[1] == ("FAIL", "tampered") and r.status == "tampered"
    assert "check cell 1 of 1 (cell 3) was changed" in r.exercises[0].error


def test_2_patching_the_check_helpers_does_not_help(graded):
    r = graded[1]["2-patch-checks"]
    assert outcomes(r) == {n: ("FAIL", "graded") for n in (1, 2, 3)}
    assert "not implemented yet" in r.exercises[0].error


def test_3_a_fake_checks_module_does_not_help(graded):
    r = graded[1]["3-fake-module"]
    assert outcomes(r) == {n: ("FAIL", "graded") for n in (1, 2, 3)}


def test_3_redefining_a_helper_of_the_checks_does_not_help(graded):
    # exercise 3 calls expect_close, defined by exercise 2's check cell: the submission's
    # lenient copy is replaced by the key's before the check runs
    r = graded[1]["3-redefine-helper"]
    assert outcomes(r)[3] == ("FAIL", "graded")
    assert "weight_bytes(10, 'fp32'): expected 40.0, got 10" in r.exercises[2].error


def test_4_the_kernel_sees_no_grader_record_or_folder(graded):
    tmp, r = graded
    res = r["4-forge-record"]
    assert outcomes(res) == {n: ("FAIL", "graded") for n in (1, 2, 3)}
    assert not res.failed_cells.get(10), res.failed_cells  # no grader variable was visible
    assert not list(tmp.rglob("grade-results.json"))


def test_5_deleted_and_retagged_checks_are_tampered_not_skipped(graded):
    r = graded[1]["5-delete-retag"]
    assert outcomes(r) == {n: ("FAIL", "tampered") for n in (1, 2, 3)}
    assert "missing" in r.exercises[0].error
    assert "lost its tag exercise-3" in r.exercises[2].error


def test_6_solutions_and_keys_are_out_of_reach(graded):
    r = graded[1]["6-read-solution"]
    if not ISOLATED:
        pytest.skip(f"absolute paths stay readable here: {isolation_available()}")
    assert outcomes(r) == {n: ("FAIL", "graded") for n in (1, 2, 3)}


def test_7_calling_the_reference_implementation_fails_the_exercise(graded):
    """The kernel's labs has no inference_bytes to call (issue 35: no tripwire needed)."""
    r = graded[1]["7-call-reference"]
    assert outcomes(r) == {1: ("PASS", "graded"), 2: ("PASS", "graded"), 3: ("FAIL", "graded")}
    assert "Exercise 3" in r.exercises[2].error
    assert "labs.basics.memory.inference_bytes is the reference implementation of exercise 3" in (
        r.exercises[2].error
    )
    r = graded[1]["7-call-reloaded"]  # reloaded from the kernel's copy: still no reference
    assert outcomes(r) == {1: ("PASS", "graded"), 2: ("PASS", "graded"), 3: ("FAIL", "graded")}
    assert "weight_bytes(10, 'fp32'): expected 40.0, got 20" in r.exercises[2].error


def test_8_a_cell_that_never_ends_fails_what_follows_with_timeout(graded):
    r = graded[1]["8-spin"]
    assert outcomes(r) == {1: ("PASS", "graded"), 2: ("FAIL", "timeout"), 3: ("FAIL", "timeout")}
    assert r.failed_cells[5] == "timeout after 8 s in cell 5"
    assert r.exercises[1].error == "not run: timeout after 8 s in cell 5"
    assert r.status == "timeout"


def test_9_no_network(graded):
    r = graded[1]["9-network"]
    if not ISOLATED:
        pytest.skip(isolation_available())
    assert outcomes(r)[1] == ("FAIL", "graded")


SHADOW = """import contextlib


@contextlib.contextmanager
def exercise(number, title=""):
    class Anything:
        def __getattr__(self, name):
            return lambda *args, **kw: None

    try:
        yield Anything()
    except BaseException:
        pass"""


def test_3_shadowing_exercise_when_the_checks_do_not_import_it(tmp_path):
    """The labs import ``exercise`` once, in an ordinary cell the student can edit."""
    nb = attack_lab()
    nb.cells[1].source = "import math\nfrom labs.course.checks import exercise"
    for i in (3, 5, 9):
        nb.cells[i].source = nb.cells[i].source.replace(
            "from labs.course.checks import exercise\n", ""
        )
    sol, key = write_lab_and_key(tmp_path, "lab98-shadow", nb)
    sub = write(tmp_path / "s" / "lab98.ipynb", _with(_student(sol), 1, SHADOW))
    (r,) = grade_notebooks([sub], key=key)
    assert outcomes(r) == {n: ("FAIL", "graded") for n in (1, 2, 3)}, r
    assert "not implemented yet" in r.exercises[0].error
