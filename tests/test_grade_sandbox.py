"""The grading sandbox: what a kernel can read and write, what it cannot do, and clean-up.

The kernel's file system is an allow-list (:mod:`labs.course.rootfs`): a walk of ``/`` from inside
a sealed kernel finds exactly the allowed folders, the folders leading to them and the kernel's
own few files, and writes succeed only in its private ``tmpfs``.  Issue 35's red team read another
checkout's answer key by walking the old sandbox's file system, and read every classmate's folder
name from the launcher and ``/proc/self/mountinfo``; here the class folder and a second checkout's
key are in the grader's ``/tmp`` and the kernel finds neither.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from labs.course import rootfs, seccomp
from labs.course.isolation import isolation_available
from labs.course.notebooks import REPO_ROOT
from labs.course.sandbox import Sandbox

SEALED = not isolation_available()
needs_seal = pytest.mark.skipif(not SEALED, reason=isolation_available() or "sealed")

WALK = """import json, os
allowed = json.loads({allowed!r})
mine = ("/sandbox/", "/tmp/", "/var/tmp/", "/dev/shm/", "/ipc/", "/grade/labs/", "/proc/")
found, folders = [], []
stack = ["/"]
while stack:  # every path outside the allowed folders (and their contents' first level)
    for e in sorted(os.scandir(stack.pop()), key=lambda e: e.name):
        found.append(e.path)
        if e.is_dir(follow_symlinks=False) and not e.path.startswith(mine):
            folders.append(e.path)
            if e.path not in allowed and e.path + "/" not in mine:
                stack.append(e.path)
writable = []
probes = folders + [os.path.join(a, n) for a in allowed for n in os.listdir(a)[:20]]
for folder in probes + ["/", "/proc", "/proc/self", "/dev"]:
    try:
        with open(os.path.join(folder, ".labs-probe"), "w"):
            pass
        writable.append(folder)
        os.unlink(os.path.join(folder, ".labs-probe"))
    except OSError:
        pass
print(json.dumps({{"found": found, "writable": writable}}))"""


def _json(box, code: str, timeout: float = 120):
    r = box.run(code, timeout=timeout)
    assert r.status == "ok", r
    return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """A class folder and a second checkout with an answer key, both beside a sealed kernel."""
    tmp = tmp_path_factory.mktemp("world")
    for student in ("alice", "bob"):
        (tmp / "class" / student).mkdir(parents=True)
        (tmp / "class" / student / "lab02.ipynb").write_text("{}")
    key = tmp / "other-checkout" / "instructor" / "keys" / "lab02.json"
    key.parent.mkdir(parents=True)
    key.write_text('{"secret": "the whole solution"}')
    with Sandbox(hide=[tmp / "class"]) as box:
        yield box, tmp, key


@needs_seal
def test_a_walk_of_the_root_finds_only_the_allow_list(world):
    box, tmp, _ = world
    allowed = rootfs.allowed_folders()
    seen = _json(box, WALK.format(allowed=json.dumps(allowed)))
    leading = {str(p) for a in allowed for p in Path(a).parents}  # the folders up to them
    own = {
        "/bin", "/lib", "/lib64", "/sbin", "/etc", "/etc/ld.so.cache", "/etc/localtime",
        "/etc/passwd", "/etc/group", "/etc/hosts", "/etc/nsswitch.conf", "/grade",
        "/grade/labs", "/sandbox", "/ipc", "/tmp", "/var", "/var/tmp", "/proc", "/dev",
        "/dev/shm", "/dev/fd", "/dev/stdin", "/dev/stdout", "/dev/stderr",
        *(f"/dev/{d}" for d in rootfs.DEVICES),
    }  # fmt: skip
    scratch = ("/sandbox/", "/ipc/", "/proc/", "/tmp/", "/var/tmp/", "/dev/shm/", "/grade/labs/")
    unexpected = {
        p for p in seen["found"]
        if p not in own | leading | set(allowed) and not p.startswith(scratch)
        and not any(p.startswith(a + "/") for a in allowed)
    }  # fmt: skip
    assert not unexpected, f"the kernel can see {sorted(unexpected)}"
    assert str(tmp) not in json.dumps(seen["found"])
    writable = {p for p in seen["writable"] if not p.startswith(("/sandbox", "/tmp", "/var/tmp"))}
    assert writable <= {"/dev/shm", "/ipc"}, writable  # all of them the kernel's own tmpfs


@needs_seal
def test_mountinfo_names_no_classmate_or_grader_folder(world):
    box, tmp, _ = world
    info = box.run("print(open('/proc/self/mountinfo').read())", timeout=60)
    assert info.status == "ok", info
    allowed = set(rootfs.allowed_folders()) | {"/etc/ld.so.cache"}
    for line in info.stdout.strip().splitlines():
        fields = line.split()
        root, fstype = fields[3], line.split(" - ")[1].split()[0]
        if fstype == "devtmpfs":
            assert root in {f"/{d}" for d in rootfs.DEVICES}, line
        elif fstype not in ("tmpfs", "proc"):
            assert root in allowed, f"a host folder outside the allow-list is mounted: {line}"
    text = info.stdout
    assert str(tmp) not in text and "alice" not in text and "labs-grade-" not in text
    assert f"{REPO_ROOT}/labs" not in text and f"{REPO_ROOT}/instructor" not in text


@needs_seal
def test_keys_of_another_checkout_and_the_class_folder_are_out_of_reach(world):
    box, tmp, key = world
    probe = f"""import os
for path in [{str(key)!r}, {str(tmp / "class")!r}, {str(REPO_ROOT / "instructor" / "keys")!r},
             {str(REPO_ROOT / "book" / "labs")!r}, {str(REPO_ROOT / ".git")!r}]:
    print(path, os.path.exists(path) and bool(os.listdir(path) if os.path.isdir(path) else 1))"""
    r = box.run(probe, timeout=60)
    assert r.status == "ok", r
    lines = r.stdout.strip().splitlines()
    assert all(line.endswith(" False") for line in lines), lines


@needs_seal
def test_the_launcher_and_the_grader_leave_no_trace_in_the_kernel(world):
    box, tmp, _ = world
    probe = """import json, os
files = sorted(os.path.join(d, f) for d, _, fs in os.walk("/sandbox") for f in fs)
fds = []
for fd in os.listdir("/proc/self/fd"):
    try:
        fds.append(os.readlink(f"/proc/self/fd/{fd}"))
    except OSError:  # the descriptor listdir used
        pass
print(json.dumps({"files": files, "cmdline": open("/proc/1/cmdline").read(), "fds": fds,
                  "env": dict(os.environ), "pids": sorted(os.listdir("/proc"))}))"""
    seen = _json(box, probe)
    assert [f for f in seen["files"] if not f.startswith(("/sandbox/home/", "/sandbox/ipc/"))] == [
        "/sandbox/kernel.json"
    ], seen["files"]
    assert "seal(" not in seen["cmdline"] and "steps" not in seen["cmdline"]
    kernels_own = ("/dev/", "/proc", "/sandbox/")
    assert not [f for f in seen["fds"] if f.startswith("/") and not f.startswith(kernels_own)]
    assert not any(k.startswith("LABS") or k == "PWD" for k in seen["env"]), seen["env"]
    assert str(tmp) not in json.dumps(seen)


@needs_seal
def test_no_mount_no_new_namespace_no_ptrace_no_capabilities(world):
    box, _, _ = world
    probe = """import ctypes, json, os, platform, subprocess
libc = ctypes.CDLL(None, use_errno=True)
CLONE = {"x86_64": 56, "aarch64": 220}[platform.machine()]
def errno(ret):
    return ctypes.get_errno() if ret != 0 else 0
os.makedirs("/sandbox/work/big", exist_ok=True)
got = {
    "mount tmpfs 16g": errno(libc.mount(b"tmpfs", b"/sandbox/work/big", b"tmpfs", 0, b"size=16g")),
    "remount / rw": errno(libc.mount(None, b"/", None, 32 | 4096, None)),
    "umount /grade": errno(libc.umount2(b"/grade", 2)),
    "unshare user": errno(libc.unshare(0x10000000)),
    "unshare mount": errno(libc.unshare(0x00020000)),
    "clone user": errno(libc.syscall(CLONE, 0x10000000 | 17, 0, 0, 0, 0) != -1 and 0 or -1),
    "setns": errno(libc.setns(os.open("/proc/self/ns/net", os.O_RDONLY), 0)),
    "ptrace": errno(libc.ptrace(0, 0, 0, 0)),
    "chroot": errno(libc.chroot(b"/sandbox")),
}
for name, numbers in json.loads(BLOCKED).items():  # every other filtered call, on null arguments
    nr = numbers[0 if platform.machine() == "x86_64" else 1]
    if nr is not None and name not in ("reboot",):
        got[name] = errno(libc.syscall(nr, 0, 0, 0, 0, 0, 0))
import resource
try:
    resource.setrlimit(resource.RLIMIT_DATA, (resource.RLIM_INFINITY,) * 2)
    raised = None
except (ValueError, OSError) as err:
    raised = type(err).__name__
cmd = subprocess.run(["unshare", "-r", "true"], capture_output=True)
status = dict(line.split(":\\t") for line in open("/proc/self/status").read().splitlines()
              if ":\\t" in line)
print(json.dumps({"errno": got, "unshare command": cmd.returncode, "rlimit": raised,
    "cgroupfs": os.path.exists("/sys/fs/cgroup"), "caps": [
    status[k] for k in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb")],
    "no_new_privs": status["NoNewPrivs"], "seccomp": status["Seccomp"]}))"""
    seen = _json(box, probe.replace("BLOCKED", repr(json.dumps(seccomp.BLOCKED))))
    assert seen["errno"] == dict.fromkeys(seen["errno"], 1), seen  # EPERM, every one
    assert seen["rlimit"] is not None and not seen["cgroupfs"]  # its limits stay as they are
    assert seen["unshare command"] != 0
    assert set(seen["caps"]) == {"0000000000000000"}
    assert (seen["no_new_privs"], seen["seccomp"]) == ("1", "2")


def test_package_environment_and_folders(world):
    box, _, _ = world
    r = box.run(
        "import os, labs\nprint(os.getcwd())\nprint(labs.__file__)\n"
        "print(sorted(k for k in os.environ if k.startswith('LABS') or k == 'PWD'))",
        timeout=60,
    )
    assert r.status == "ok", r
    cwd, package, leaked = r.stdout.splitlines()
    assert cwd == str(box.work_dir) and package == str(box.package_dir / "__init__.py")
    assert leaked == "[]"
    assert box.dir is None if SEALED else box.dir.is_dir()


def test_a_new_sandbox_drops_grader_variables():
    os.environ["LABS_GRADE_RECORD"] = "/tmp/should-not-leak"
    try:
        with Sandbox() as b:
            r = b.run("import os\nprint(os.environ.get('LABS_GRADE_RECORD'))", timeout=60)
    finally:
        del os.environ["LABS_GRADE_RECORD"]
    assert r.stdout.strip() == "None"


@needs_seal
def test_no_network_but_loopback_works(world):
    box, _, _ = world
    r = box.run(
        "import socket\ntry:\n    socket.create_connection(('192.0.2.1', 80), timeout=2)\n"
        "except OSError as err:\n    print(type(err).__name__)\n"
        "s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen()\n"
        "socket.create_connection(s.getsockname(), timeout=2).close(); print('loopback')\n"
        "print(socket.gethostname(), socket.gethostbyname(socket.gethostname()))",  # for gloo
        timeout=60,
    )
    assert r.status == "ok", r
    assert r.stdout.split() == ["OSError", "loopback", "sandbox", "127.0.0.1"]


def _sleepers(marker: str) -> list[int]:
    """Host pids of live ``sleep <marker>`` processes (the kernel sees its own pid numbers)."""
    from labs.course.link import alive

    found = []
    for proc in Path("/proc").iterdir():
        try:
            if (
                proc.name.isdigit()
                and (proc / "cmdline").read_bytes() == f"sleep\0{marker}\0".encode()
            ):
                found.append(int(proc.name))
        except OSError:
            continue
    return [p for p in found if alive(p)]


def test_timeout_kills_everything_the_kernel_started_even_if_sigint_is_ignored():
    with Sandbox() as b:
        b.run(
            "import os, subprocess\nsubprocess.Popen(['sleep', '301.25'])\n"
            "if os.fork() == 0:\n    os.setsid()\n    os.execvp('sleep', ['sleep', '301.25'])",
            timeout=30,
        )
        # the forked child may not have exec'd sleep yet when the cell returns: wait for both
        deadline = time.monotonic() + 30
        while len(_sleepers("301.25")) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(_sleepers("301.25")) == 2
        r = b.run(
            "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    pass",
            timeout=2,
        )
        assert (r.status, r.error) == ("timeout", "timeout after 2 s")
        assert not b.alive() and not _sleepers("301.25")
        assert b.run("print(1)", timeout=5).status == "died"
    assert b.dir is None and b.box is None  # no folder, no cgroup left
