"""The sandbox's parts that need no kernel: cgroup files (v1 and v2, on a fake cgroup file
system), the system-call filter (run on a small BPF interpreter), the allow-list's plan, and the
removal of folders too deep for ``shutil.rmtree``."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import pytest

from labs.course import rootfs, seccomp
from labs.course.cgroups import Box, layout
from labs.course.tree import remove_tree


def _fake_proc(tmp_path: Path, cgroup: str, mountinfo: str) -> Path:
    proc = tmp_path / "proc"
    proc.mkdir()
    (proc / "cgroup").write_text(cgroup)
    (proc / "mountinfo").write_text(mountinfo)
    return proc


def _v2(tmp_path: Path, controllers="cpuset cpu io memory pids", subtree=""):
    root = tmp_path / "cg"
    own = root / "user.slice" / "grader.scope"
    own.mkdir(parents=True)
    (own / "cgroup.controllers").write_text(controllers)
    (own / "cgroup.subtree_control").write_text(subtree)
    (own / "cgroup.procs").write_text(f"{os.getpid()}\n")
    info = f"30 25 0:26 / {root} rw,nosuid - cgroup2 cgroup2 rw\n"
    return own, _fake_proc(tmp_path, "0::/user.slice/grader.scope\n", info)


def test_cgroup_v2_delegates_and_writes_every_limit(tmp_path):
    own, proc = _v2(tmp_path)
    where, why = layout(proc)
    assert (where.version, why) == (2, "")
    box = Box(where, memory=2**30, pids=64, cpus=1.5)
    parent = own / f"labs-grade-{os.getpid()}"
    assert (own / "cgroup.subtree_control").read_text() == "+memory +pids +cpu"
    assert (parent / "cgroup.subtree_control").read_text() == "+memory +pids +cpu"
    d = box.dirs["cgroup"]
    assert d.parent == parent and d.name.startswith("box-")
    files = {f.name: f.read_text() for f in d.iterdir()}
    assert files == {"memory.max": str(2**30), "memory.oom.group": "1", "pids.max": "64",
                     "cpu.max": "150000 100000", "cpu.weight": "100"}  # fmt: skip
    assert box.procs == [str(d / "cgroup.procs")]
    (d / "cpu.stat").write_text("usage_usec 1500000\nuser_usec 1000000\n")
    (d / "memory.events").write_text("low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\n")
    (d / "memory.peak").write_text("1048576\n")
    assert box.cpu_seconds() == 1.5 and box.out_of_memory() and box.memory_peak() == 2**20


def test_cgroup_v2_moves_the_grader_into_a_leaf_when_its_own_group_is_busy(tmp_path):
    own, proc = _v2(tmp_path)
    (own / "cgroup.subtree_control").unlink()
    (own / "cgroup.subtree_control").mkdir()  # writing it fails, as with processes in it (EBUSY)
    where, _ = layout(proc)
    with pytest.raises(OSError):
        Box(where, memory=2**30, pids=64, cpus=1)
    leaf = own / f"labs-grade-{os.getpid()}" / "grader" / "cgroup.procs"
    assert leaf.read_text() == str(os.getpid())  # it tried the systemd way before giving up


def test_cgroup_v2_without_the_controllers_says_so(tmp_path):
    _, proc = _v2(tmp_path, controllers="cpuset io")
    where, why = layout(proc)
    assert where is None and "offers cpuset io" in why


def test_cgroup_v1_writes_every_limit_and_reads_cpu_time(tmp_path):
    root = tmp_path / "cg"
    lines, info = [], []
    for i, ctrl in enumerate(("memory", "pids", "cpu", "cpuacct"), start=1):
        own = root / ctrl / "grader"
        own.mkdir(parents=True)
        lines.append(f"{i}:{ctrl}:/grader")
        info.append(f"{30 + i} 25 0:{40 + i} / {root / ctrl} rw - cgroup cgroup rw,{ctrl}")
    proc = _fake_proc(tmp_path, "\n".join(lines) + "\n", "\n".join(info) + "\n")
    where, why = layout(proc)
    assert (where.version, why) == (1, "")
    (root / "memory" / "grader" / f"labs-grade-{2**22 + 1}-dead").mkdir()  # a dead grader's box
    box = Box(where, memory=2**30, pids=64, cpus=1)
    assert not (root / "memory" / "grader" / f"labs-grade-{2**22 + 1}-dead").exists()
    read = lambda ctrl, name: (box.dirs[ctrl] / name).read_text()  # noqa: E731
    assert read("memory", "memory.limit_in_bytes") == str(2**30)
    assert read("pids", "pids.max") == "64"
    assert (read("cpu", "cpu.cfs_quota_us"), read("cpu", "cpu.cfs_period_us")) == (
        "100000",
        "100000",
    )
    assert read("cpu", "cpu.shares") == "1024"
    assert len(box.procs) == 4 and all(p.endswith("/cgroup.procs") for p in box.procs)
    (box.dirs["cpuacct"] / "cpuacct.usage").write_text("2500000000\n")
    (box.dirs["memory"] / "memory.oom_control").write_text("oom_kill_disable 0\nunder_oom 0\n")
    assert box.cpu_seconds() == 2.5 and not box.out_of_memory()
    for d in box.dirs.values():  # a real cgroup folder can be removed with its files in it
        for f in d.iterdir():
            f.unlink()
    box.remove()
    assert not any(d.exists() for d in box.dirs.values())


def test_cgroup_v1_without_a_controller_says_which(tmp_path):
    info = f"31 25 0:41 / {tmp_path} rw - cgroup cgroup rw,memory\n"
    proc = _fake_proc(tmp_path, "4:memory:/\n0::/\n", info)
    where, why = layout(proc)
    assert where is None and "pids, cpu, cpuacct" in why


def _bpf(prog, nr, arch, args=(0,) * 6):
    """Run a seccomp program (classic BPF) on one system call; return its verdict."""
    data = {0: nr, 4: arch, **{16 + 8 * i: a & 0xFFFFFFFF for i, a in enumerate(args)}}
    a, pc = 0, 0
    while True:
        code, jt, jf, k = prog[pc]
        if code == seccomp.LD_ABS_W:
            a, pc = data[k], pc + 1
        elif code == seccomp.RET:
            return k
        else:
            taken = {seccomp.JEQ: a == k, seccomp.JGE: a >= k, seccomp.JSET: a & k != 0}[code]
            pc += 1 + (jt if taken else jf)


@pytest.mark.parametrize("machine", ["x86_64", "aarch64"])
def test_the_filter_blocks_mounts_namespaces_and_ptrace_and_nothing_else(machine):
    prog = seccomp.program(machine)
    arch, col = seccomp.AUDIT[machine], 0 if machine == "x86_64" else 1
    eperm, allow = seccomp.RET_ERRNO | seccomp.EPERM, seccomp.RET_ALLOW
    for name, numbers in seccomp.BLOCKED.items():
        if numbers[col] is not None:
            assert _bpf(prog, numbers[col], arch) == eperm, name
    clone = seccomp.CLONE[machine]
    for flag in (0x10000000, 0x20000, 0x20000000, 0x40000000, 0x2000000, 0x4000000, 0x8000000):
        assert _bpf(prog, clone, arch, (flag | 17,)) == eperm, hex(flag)
    assert _bpf(prog, clone, arch, (0x01200011,)) == allow  # fork(): SIGCHLD | CHILD_*TID
    assert _bpf(prog, clone, arch, (0x003D0F00,)) == allow  # pthread_create's flags
    assert _bpf(prog, seccomp.CLONE3, arch) == seccomp.RET_ERRNO | seccomp.ENOSYS
    for nr in (0, 1, 2, 3, 9, 57, 59, 63, 202, 231, 262):  # read, write, ..., futex, exit_group
        if nr not in {n[col] for n in seccomp.BLOCKED.values()} and nr != clone:
            assert _bpf(prog, nr, arch) == allow, nr
    assert _bpf(prog, 0, 0x40000003) == seccomp.RET_KILL  # a 32-bit x86 system call
    if machine == "x86_64":
        assert _bpf(prog, 0x40000000 | 165, arch) == seccomp.RET_KILL  # x32's mount


def test_the_plan_allows_python_and_copies_labs_only(tmp_path, monkeypatch):
    site = tmp_path / "venv" / "lib" / "python3.11" / "site-packages"
    (site / "labs").mkdir(parents=True)  # a second, installed labs with its references
    monkeypatch.setattr(sys, "path", [*sys.path, str(site)])
    steps = rootfs.plan(rootfs.Path(__file__).resolve().parents[1])
    binds = {s[1] for s in steps if s[0] == "bind"}
    assert {os.path.realpath(sys.prefix), os.path.realpath(sys.base_prefix), str(site)} <= binds
    assert ["cover", str(site / "labs")] in steps
    # a venv under /tmp (a checkout there) is bound after the kernel's private /tmp covers /tmp:
    # bound before, it vanished under it (no ipykernel: "the grading kernel did not start")
    if str(site).startswith("/tmp/"):
        alias = steps.index(["alias", "/sandbox/tmp", "/tmp"])
        assert steps.index(["bind", str(site), str(site)]) > alias
    (copy,) = [s for s in steps if s[0] == "copy"]
    assert copy[2] == "/grade/labs" and copy[1].endswith("/labs")
    assert not [b for b in binds if b.startswith(("/home", "/tmp/", "/work")) and
                not b.startswith((os.path.realpath(sys.prefix), str(tmp_path)))]  # fmt: skip


def test_the_plan_refuses_to_show_a_hidden_folder(tmp_path):
    repo = rootfs.Path(__file__).resolve().parents[1]
    with pytest.raises(RuntimeError, match="would show"):
        rootfs.plan(repo, hide=[Path(sys.base_prefix) / "lib"])
    rootfs.plan(repo, hide=[tmp_path, repo])  # a folder holding the venv: only the venv shows
    with pytest.raises(FileNotFoundError, match="no labs package"):
        rootfs.plan(tmp_path)


def test_remove_tree_goes_any_depth_and_never_follows_links(tmp_path):
    outside = tmp_path / "outside.txt"
    outside.write_text("keep me")
    shm = Path("/dev/shm")  # a tmpfs where there is one: a disk takes ~5 ms per folder here
    top = Path(tempfile.mkdtemp(dir=shm if shm.is_dir() else tmp_path))
    fd = os.open(top, os.O_RDONLY)
    for _ in range(3000):  # deeper than recursion (1000) and PATH_MAX (2048 levels) allow
        os.mkdir("d", dir_fd=fd)
        nfd = os.open("d", os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = nfd
    os.symlink(outside, "link", dir_fd=fd)
    os.mkdir("locked", dir_fd=fd)
    os.chmod("locked", 0, dir_fd=fd)
    os.close(fd)
    remove_tree(top)
    assert not top.exists() and outside.read_text() == "keep me"
    remove_tree(top)  # gone already: not an error
