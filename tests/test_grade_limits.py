"""The grading sandbox's limits and deadlines hold whatever the kernel does (issue 35, kinds 4-6).

Each attack kind of issue 35's red team, as a class of attacks: memory the old per-process limit
did not count (tmpfs and shared-memory files, shared and file mappings), processes, a CPU hog
beside an honest classmate, kernels that never answer (decoy replies, floods of messages, a
stalled socket), oversized messages (one part, or endless parts), and folders too deep for
``shutil.rmtree``.  No assertion depends on how fast this machine is: limits are checked in the
submission's own CPU time or against generous bounds.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from labs.course.isolation import BACKSTOP, protections
from labs.course.sandbox import Sandbox
from notebook_factory import attack_lab, cell, write, write_lab_and_key

OFF = [name for name, why in protections().items() if why]
needs = {
    name: pytest.mark.skipif(name in OFF, reason=protections()[name] or "on")
    for name in ("memory", "pids", "cpu", "filesystem")
}
SMALL = 384 * 2**20  # bytes: a submission with a small memory limit (tmpfs: half of it)


@needs["memory"]
def test_memory_that_rlimit_data_never_saw_is_refused_or_killed_at_the_limit():
    """tmpfs and /dev/shm files are refused past their size; a 7 GiB shared mapping is accepted
    but killed as it is touched past the cgroup's limit; the box never holds more."""
    attacks = """import json, subprocess, sys
def child(code):
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).returncode
got = {}
for name in ("/tmp/fill", "/dev/shm/fill"):
    try:
        with open(name, "wb") as f:
            for _ in range(64):
                f.write(b"x" * 2**24)  # 1 GiB in all
        got[name] = "written"
    except OSError as err:
        got[name] = err.errno
    import os; os.unlink(name)
for size in (7 << 30, 1000 << 20):  # over the file-size limit; under it, over the tmpfs size
    got[f"file mapping {size >> 20} MiB"] = child(
        f"import mmap, os\\nfd = os.open('/dev/shm/map', os.O_RDWR | os.O_CREAT)\\n"
        f"os.ftruncate(fd, {size})\\nm = mmap.mmap(fd, {size})\\n"
        f"for i in range(0, {size}, 4096):\\n    m[i] = 1")
got["shared mapping"] = child(
    "import mmap\\nm = mmap.mmap(-1, 7 << 30, mmap.MAP_SHARED)\\n"
    "for i in range(0, 7 << 30, 4096):\\n    m[i] = 1")
print(json.dumps(got))"""
    with Sandbox(memory=SMALL) as box:
        r = box.run(attacks, timeout=300)
        peak, killed = box.box.memory_peak(), box.box.out_of_memory()
    if r.status == "died":  # cgroup v2 kills the whole box on an out-of-memory (memory.oom.group)
        assert "out of memory" in r.error, r
    else:
        got = json.loads(r.stdout.strip().splitlines()[-1])
        assert got["/tmp/fill"] == got["/dev/shm/fill"] == 28, got  # ENOSPC at the tmpfs size
        assert got["file mapping 7168 MiB"] == 1, got  # EFBIG: over RLIMIT_FSIZE
        assert got["file mapping 1000 MiB"] == -7, got  # SIGBUS past the tmpfs size
        assert got["shared mapping"] == -9, got  # killed by the out-of-memory killer
    assert killed and 0 < peak <= SMALL, (peak, killed)


@needs["pids"]
def test_processes_are_limited_and_the_kernel_survives():
    with Sandbox() as box:
        r = box.run(
            "import subprocess\nprocs = []\ntry:\n    for _ in range(2000):\n"
            "        procs.append(subprocess.Popen(['sleep', '60']))\n"
            "except OSError as err:\n    print(len(procs), type(err).__name__)\n"
            "for p in procs:\n    p.kill()\n    p.wait()",
            timeout=300,
        )
        assert r.status == "ok", r
        started, error = r.stdout.split()
        assert int(started) < 512 and error == "BlockingIOError", r.stdout
        assert box.run("print('still here')", timeout=60).stdout == "still here\n"


HOG = """import subprocess, sys
for _ in range(24):  # busy processes in their own sessions, as issue 35's red team started
    subprocess.Popen([sys.executable, "-c", "while True: pass"], start_new_session=True)"""


@needs["cpu"]
def test_a_cpu_hog_beside_an_honest_classmate_costs_it_nothing(tmp_path):
    """While a neighbour's 24 busy processes run, an honest submission is graded with a cell
    limit of 5 s and passes everything: the hog's processes share one quota of one core, and the
    honest kernel's time is counted in its own CPU time."""
    from labs.course.grade import grade_notebooks

    nb = attack_lab()
    nb.cells.insert(2, cell("total = sum(i * i for i in range(3_000_000))"))  # some real work
    _, key = write_lab_and_key(tmp_path / "solution", "lab99-cpu", nb)
    honest = write(tmp_path / "class" / "honest" / "lab99-cpu.ipynb", nb)
    with Sandbox() as hog:
        assert hog.run(HOG, timeout=60).status == "ok"
        cpu0, wall0 = hog.box.cpu_seconds(), time.monotonic()
        (result,) = grade_notebooks([honest], timeout=20, key=key)
        share = (hog.box.cpu_seconds() - cpu0) / (time.monotonic() - wall0)
        assert len(hog.box.pids()) > 24  # the hog ran all along
    assert result.passed and result.status == "graded", result
    assert share <= hog.cpus * 1.1, share  # the hog's 24 processes: one core at most


DECOYS = """import threading, time, uuid
k = get_ipython().kernel
send = k.session.send
def readdress(stream, kind, content=None, parent=None, *args, **kw):
    if isinstance(parent, dict) and "header" in parent:  # every reply goes to another request
        parent = dict(parent, header=dict(parent["header"], msg_id=uuid.uuid4().hex))
    return send(stream, kind, content, parent, *args, **kw)
k.session.send = readdress
fake = {"header": {"msg_id": "decoy", "session": "x", "username": "x", "msg_type": "x",
                   "version": "5.3", "date": "2020-01-01T00:00:00Z"}}
def decoys(pause):
    while True:
        send(k.iopub_socket, "stream", {"name": "stdout", "text": "x" * 1000}, parent=fake)
        send(k.iopub_socket, "status", {"execution_state": "idle"}, parent=fake)
        time.sleep(pause)
threading.Thread(target=decoys, args=(PAUSE,), daemon=True).start()"""


@pytest.mark.parametrize("pause", [0.3, 0.0], ids=["decoys", "flood"])
def test_readdressed_replies_and_decoys_end_at_the_deadline(pause):
    with Sandbox() as box:
        start = time.monotonic()
        r = box.run(DECOYS.replace("PAUSE", str(pause)), timeout=3)
        took = time.monotonic() - start
        assert r.status in ("timeout", "flood"), r
        assert not box.alive()
    assert took < BACKSTOP * 3 + 60, took  # generous: the deadline, not the kernel, ended it


def test_a_kernel_that_stops_answering_ends_at_the_deadline():
    with Sandbox() as box:
        start = time.monotonic()
        r = box.run("import time\ntime.sleep(10**6)", timeout=2)
        assert (r.status, r.error) == ("timeout", "timeout after 2 s")
        assert time.monotonic() - start < BACKSTOP * 2 + 60


GRADER = """import json, sys
from labs.course.sandbox import Sandbox
ONE = "print('x' * (200 << 20))"  # one message part of 200 MiB
PARTS = '''k = get_ipython().kernel
part = b"x" * (60 << 20)
k.iopub_thread.socket.send_multipart([b"<IDS|MSG>"] + [part] * 40, copy=False)
import time
time.sleep(600)'''  # one message of 40 parts: 2.4 GiB that libzmq buffers whole
out = {}
for name, code in (("one part", ONE), ("many parts", PARTS)):
    with Sandbox() as box:
        r = box.run(code, timeout=120)
        out[name] = [r.status, r.error]
status = open("/proc/self/status").read()  # VmHWM: this process's peak (not its parent's)
out["rss"] = int(status.split("VmHWM:")[1].split()[0]) * 1024
print(json.dumps(out))"""


def test_a_huge_message_is_refused_while_it_arrives_and_the_grader_stays_small():
    """One 200 MiB part is refused by ZMQ_MAXMSGSIZE; 40 parts of 60 MiB exhaust the relay's
    own memory limit, not the grader's.  The grader's peak resident memory is measured."""
    done = subprocess.run([sys.executable, "-c", GRADER], capture_output=True, text=True,
                          timeout=900, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["one part"][0] == "flood" and got["many parts"][0] == "flood", got
    assert got["rss"] < 160 * 2**20, got  # the grader never held a message (200 MiB, 2.4 GiB)


DEEP = """import os
for _ in range(3000):
    os.mkdir("d")
    os.chdir("d")
with open("bottom", "wb") as f:
    f.write(b"x" * 2**20)
print(len(os.getcwd()))"""


@pytest.mark.parametrize("isolate", [True, False], ids=["sealed", "open"])
def test_folders_too_deep_for_rmtree_leave_nothing_behind(isolate, monkeypatch):
    if Path("/dev/shm").is_dir():  # the open sandbox's folder on a tmpfs: a disk is slow here
        monkeypatch.setattr(tempfile, "tempdir", "/dev/shm")
    before = set(Path(tempfile.gettempdir()).glob("labs-grade-*"))
    with Sandbox(isolate=isolate) as box:
        r = box.run(DEEP, timeout=120)
        assert r.status == "ok" and int(r.stdout) > 4096, r  # deeper than PATH_MAX
        folder = box.dir
    assert (folder is None) == box.sealed
    assert folder is None or not folder.exists()
    assert set(Path(tempfile.gettempdir()).glob("labs-grade-*")) <= before


def test_without_namespaces_or_cgroups_the_sandbox_says_what_is_off():
    with Sandbox(isolate=False, cgroups=False) as box:
        assert box.protections_off == [
            "filesystem", "network", "processes", "syscalls", "memory", "pids", "cpu",
        ]  # fmt: skip
        assert "no file-system allow-list" in box.isolation and "no cgroup" in box.isolation
        r = box.run("import resource\nprint(resource.getrlimit(resource.RLIMIT_DATA)[0])", 60)
        assert int(r.stdout) == box.memory  # the rlimits stay
        r = box.run("while True:\n    pass", timeout=2)
        assert r.status == "timeout"  # and the deadlines (wall clock here)


def test_the_grader_prints_one_note_naming_what_is_off(tmp_path):
    from conftest import script
    from labs.course.isolation import LIMITED, NAMESPACED, report
    from notebook_factory import good_lab

    _, key = write_lab_and_key(tmp_path / "solution", "lab99-note", good_lab())
    sub = write(tmp_path / "s" / "lab99-note.ipynb", good_lab())
    done = subprocess.run(
        [script("labs-grade"), sub, "--key", key, "--no-isolation", "--results", "r.json"],
        cwd=tmp_path, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    notes = [line for line in done.stdout.splitlines() if line.startswith("note:")]
    assert len(notes) == 1 and "(turned off by --no-isolation)" in notes[0], notes
    assert "no file-system allow-list, network, process or system-call isolation" in notes[0]
    off = report(isolate=False)[1]  # the same, as a list for machine-readable results
    assert off[: len(NAMESPACED)] == list(NAMESPACED) and set(off) <= {*NAMESPACED, *LIMITED}
