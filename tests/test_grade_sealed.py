"""Issue 26: the kinds of attack that beat the grader of issue 14, each refused or contained now.

Every attack starts from the student version of the small synthetic lab of
``tests/test_grade_attacks.py`` (nothing should pass) or from its solution (where the attack is
on a neighbour, the grader or the verdict).  All are graded in one class run, two at a time.
Checked against the grader before this issue (commit 7a2bf88, same submissions): a write into
the grader's checkout made the whole class run exit 1 (kind 1); an ``int`` tag crashed it with a
traceback and no gradebook (kind 4); ``d-always-equal``, ``e-frame-float``,
``f-patch-reference``, ``i-thread-reference`` and ``j-check-filename`` earned the PASS they
target (kind 5); and ``n-leak`` put ``LABS_SECRET_TOKEN`` into the gradebook (kind 6).
Kinds 2 and 3 were checked against 7a2bf88 on lab02 (a class of three, ``--jobs 2``): the
double-forked ``setsid`` daemon outlived the grader (its ``sleep 302.75`` still running) and
replaced the class's ``gradebook.csv`` with its own text; a classmate's kernel connection file
(``/tmp/labs-grade-*/kernel.json``) was visible and readable from another submission's kernel.
Kind 4 on 7a2bf88 too: ``os.kill(os.getppid(), 9)`` in one of two submissions killed the grader
(exit 137, no gradebook for either student), and a cell printing 1 GiB drove the grader to a peak
resident size of 3.2 GB.
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from conftest import script
from labs.course.isolation import isolation_available
from labs.course.notebooks import REPO_ROOT, parse_lab
from labs.course.student import student_version
from notebook_factory import attack_lab, cell, write, write_lab_and_key

LAB = "lab99-attacks"
ISOLATED = not isolation_available()
pytestmark = pytest.mark.skipif(not ISOLATED, reason=isolation_available() or "isolated")
CHECKS_PY = REPO_ROOT / "labs" / "course" / "checks.py"

# 1. write into the grader's code (its checkout and the kernel's own copy)
WRITE_GRADER = f"""import labs.course.checks as c
for path in [c.__file__, {str(CHECKS_PY)!r}, {str(REPO_ROOT / "labs" / "course" / "grade.py")!r}]:
    try:
        with open(path, "a") as f:
            f.write("\\nraise SystemExit('planted')\\n")
        print("wrote", path)
    except OSError as err:
        print("refused", path, err)"""

# 2. a daemon that outlives the kernel and rewrites the gradebook later
DAEMON = """import os, sys, time
gradebook = sys.argv[0]
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        time.sleep(4)
        for path in [{gradebook!r}]:
            try:
                with open(path, "w") as f:
                    f.write("forged")
            except OSError:
                pass
        os.execvp("sleep", ["sleep", "302.75"])
    os._exit(0)"""

# 3. read a classmate's functions out of their running kernel
NEIGHBOUR = """import glob, os
found = {os.path.realpath(p) for p in glob.glob("/tmp/**/kernel*.json", recursive=True)}
print("other kernels visible:", len(found) - 1)
if len(found) > 1:
    def double(x):
        return 2 * x"""

# 5. forge the verdict inside the kernel
ALWAYS_EQUAL = """class Anything:
    def __eq__(self, other):
        return True
    def __ne__(self, other):
        return False
    def __bool__(self):
        return True


def double(x):
    return Anything()"""

FRAME_FLOAT = """import sys
import numpy as np


class Sly(float):  # hands over whatever the check expects, found in the caller's frames
    def _expected(self):
        f = sys._getframe(1)
        while f is not None:
            for name in ("expected", "want", "e"):
                v = f.f_locals.get(name)
                if v is not None and not isinstance(v, (Sly, Wrapped)):
                    return v
            f = f.f_back
        return float(self)

    def detach(self):
        return Wrapped(self._expected())

    cpu = numpy = detach


class Wrapped:
    dtype = "torch.float64"

    def __init__(self, v):
        self.v = v

    def detach(self):
        return self

    cpu = detach

    def numpy(self):
        return np.asarray(self.v, dtype=float)


area = Sly(1.0)"""

PATCH_REFERENCE = """import labs.basics.memory
labs.basics.memory.inference_bytes = lambda n, dtype="bf16": n  # the check's expected value


def weight_bytes(n_params, dtype="bf16"):
    return n_params"""

REWRITE_OUTPUT = """import sys, json


class Forger:
    def __init__(self, out):
        self.out = out
    def write(self, text):
        if "labs-grade-result" in text:
            head, _, _ = text.partition(" [")
            text = head + " " + json.dumps([["begin", 1, "double"], ["end"]]) + "\\n"
        return self.out.write(text)
    def flush(self):
        return self.out.flush()

sys.stdout = Forger(sys.stdout)
ip = get_ipython()
ip.input_transformers_post.append(lambda lines: [l.replace("check.", "check.") for l in lines])"""

PATCH_CONTEXTLIB = """import contextlib


def lenient(fn):
    return fn

contextlib.contextmanager = lenient"""

THREAD_REFERENCE = """from concurrent.futures import ThreadPoolExecutor
from labs.basics.memory import inference_bytes as ref


def weight_bytes(n_params, dtype="bf16"):
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(ref, n_params, dtype).result()"""

CHECK_FILENAME = """from labs.basics.memory import inference_bytes as ref
exec(compile("def weight_bytes(n, dtype='bf16'):\\n    return ref(n, dtype)\\n",
             "<labs-grade-check>", "exec"))"""

# 4. stop the class run
KILL_PARENT = "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\nos.killpg(0, 9)"
FLOOD = "import sys\nchunk = 'x' * 2**20\nfor _ in range(1024):\n    sys.stdout.write(chunk)"
MEMORY = "import numpy as np\nx = np.ones(2**33, dtype=np.uint8)"

# 6. leaks
LEAK = """import os


def double(x):  # the grader's variables, carried into the gradebook by an exception
    raise RuntimeError(" ".join(f"{k}={v}" for k, v in os.environ.items()))"""


def _student(sol):
    return student_version(parse_lab(sol))


def _with(nb, after: int, *sources: str):
    for offset, source in enumerate(sources, start=1):
        nb.cells.insert(after + offset, cell(source))
    return nb


@pytest.fixture(scope="session")  # not module: see test_book.built_book
def graded(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("sealed")
    sol, key = write_lab_and_key(tmp / "solution", LAB, attack_lab())
    cls = tmp / "class"
    subs = {
        "a-write-grader": _with(_student(sol), 1, WRITE_GRADER),
        "b-daemon": _with(_student(sol), 1, DAEMON.format(gradebook=str(tmp / "gradebook.csv"))),
        "c-neighbour": _with(_student(sol), 2, NEIGHBOUR),
        "d-always-equal": _with(attack_lab(), 2, ALWAYS_EQUAL),
        "e-frame-float": _with(attack_lab(), 4, FRAME_FLOAT),
        "f-patch-reference": _with(attack_lab(), 8, PATCH_REFERENCE),
        "g-rewrite-output": _with(_student(sol), 1, REWRITE_OUTPUT),
        "h-patch-contextlib": _with(_student(sol), 1, PATCH_CONTEXTLIB),
        "i-thread-reference": _with(attack_lab(), 8, THREAD_REFERENCE),
        "j-check-filename": _with(attack_lab(), 8, CHECK_FILENAME),
        "k-kill-parent": _with(attack_lab(), 4, KILL_PARENT),
        "l-flood": _with(attack_lab(), 4, FLOOD),
        "m-memory": _with(attack_lab(), 4, MEMORY),
        "n-leak": _with(_student(sol), 2, LEAK),
        "o-untouched-stub": _student(sol),  # graded after a-write-grader
        '=HYPERLINK("http://x")': attack_lab(),
    }
    for name, nb in subs.items():
        write(cls / name / f"{LAB}.ipynb", nb)
    for i, (field, value) in enumerate([("tags", None), ("tags", 7), ("source", {"a": 1})]):
        nb = attack_lab()
        if field == "tags":
            nb.cells[3].metadata["tags"] = value
        else:
            nb.cells[2].source = value
        text = json.dumps(nb)
        (cls / f"p-malformed-{i}").mkdir()
        (cls / f"p-malformed-{i}" / f"{LAB}.ipynb").write_text(text, encoding="utf-8")
    write(cls / "q-twice" / f"{LAB}.ipynb", attack_lab())
    write(cls / "q-twice" / "second" / f"{LAB}-v2.ipynb", attack_lab())
    (cls / "r-symlink").mkdir()
    os.symlink(sol, cls / "r-symlink" / f"{LAB}.ipynb")
    before = hashlib.sha256(CHECKS_PY.read_bytes()).hexdigest()
    env = dict(os.environ, LABS_SECRET_TOKEN="s3cr3t-t0ken")
    result = subprocess.run(
        [script("labs-grade"), "--class", cls, "--gradebook",
         tmp / "gradebook.csv", "--jobs", "2", "--key", key, "--timeout", "20"],
        cwd=tmp, capture_output=True, text=True, timeout=600, env=env,
    )  # fmt: skip
    time.sleep(5)  # the daemon of b-daemon would have written by now
    rows = list(csv.DictReader(open(tmp / "gradebook.csv", encoding="utf-8")))
    after = hashlib.sha256(CHECKS_PY.read_bytes()).hexdigest()
    return result, rows, before == after, tmp


def _by(rows, student):
    return {r["exercise"]: (r["outcome"], r["status"], r["message"]) for r in rows
            if r["student"] == student}  # fmt: skip


def test_the_class_run_finishes_with_every_student(graded):
    result, rows, _, _ = graded
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    students = {r["student"] for r in rows}
    assert len(rows) == 3 * len(students)  # one row per student x exercise, no duplicates
    assert "second submission" in result.stderr and "r-symlink" in result.stderr


def test_1_the_graders_code_is_read_only(graded):
    _, rows, unchanged, _ = graded
    assert unchanged
    assert all(o == "FAIL" for o, _, _ in _by(rows, "a-write-grader").values())
    assert all(o == "FAIL" for o, _, _ in _by(rows, "o-untouched-stub").values())


def test_2_nothing_outlives_the_kernel(graded):
    _, _, _, tmp = graded
    assert (tmp / "gradebook.csv").read_text().startswith("student,")
    alive = [p for p in Path("/proc").iterdir() if p.name.isdigit()
             and b"302.75" in (p / "cmdline").read_bytes()] if Path("/proc").is_dir() else []  # fmt: skip
    assert not alive


def test_3_no_route_to_classmates(graded):
    _, rows, _, _ = graded
    assert _by(rows, "c-neighbour")["1"][0] == "FAIL"


def test_4_one_submission_cannot_stop_the_class(graded):
    _, rows, _, _ = graded
    killer = _by(rows, "k-kill-parent")
    assert killer["1"][0] == "PASS" and killer["2"][0] == "FAIL"
    flood = _by(rows, "l-flood")
    assert flood["1"][0] == "PASS" and flood["2"][1] in ("invalid", "timeout"), flood
    memory = _by(rows, "m-memory")
    assert memory["1"][0] == "PASS" and memory["3"][0] == "PASS"  # MemoryError in one cell
    untagged = _by(rows, "p-malformed-0")  # tags: null on exercise 1's check cell
    assert untagged["1"][1] == "tampered" and untagged["2"][0] == untagged["3"][0] == "PASS"
    for i in (1, 2):  # tags: 7, a dict as source
        assert {s for _, s, _ in _by(rows, f"p-malformed-{i}").values()} == {"invalid"}


@pytest.mark.parametrize(
    "student",
    ["d-always-equal", "e-frame-float", "f-patch-reference", "g-rewrite-output",
     "h-patch-contextlib", "i-thread-reference", "j-check-filename"],
)  # fmt: skip
def test_5_verdicts_cannot_be_forged_in_the_kernel(graded, student):
    _, rows, _, _ = graded
    got = _by(rows, student)
    which = {"d-always-equal": "1", "e-frame-float": "2", "f-patch-reference": "3",
             "i-thread-reference": "3", "j-check-filename": "3"}.get(student)  # fmt: skip
    if which:
        assert got[which][0] == "FAIL", got
    else:
        assert all(o == "FAIL" for o, _, _ in got.values()), got
    if student == "d-always-equal":
        assert "not plain data" in got["1"][2]


def test_6_no_leaks(graded):
    result, rows, _, _ = graded
    text = "".join(r["message"] for r in rows) + result.stdout
    assert "s3cr3t-t0ken" not in text
    assert "the code under test raised RuntimeError" in _by(rows, "n-leak")["1"][2]
    assert not any(r["student"].startswith("=") for r in rows)
    assert any(r["student"].startswith("'=HYPERLINK") for r in rows)
    assert {r["student"] for r in rows if r["student"].startswith("q-")} == {"q-twice"}
