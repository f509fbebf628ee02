"""Per-submission limits with cgroups: memory (shared memory and tmpfs included), processes, CPU.

Every sandbox (:class:`~labs.course.sandbox.Sandbox`) gets its own cgroup, :class:`Box`, which its
kernel and relay join *before* they start (their first act is to write their pid to the box's
``cgroup.procs``), so that every process they start is in it and none can leave (the cgroup file
system is not in the kernel's root, and its cgroup namespace makes the box its ``/``):

* **memory**: ``memory.max`` (v2) / ``memory.limit_in_bytes`` (v1) covers every page charged to the
  box: heap, memory-mapped files as they are touched, and *shared memory and tmpfs pages* (the
  kernel's ``/sandbox`` and ``/dev/shm``), which ``RLIMIT_DATA`` never saw; no swap
  (``memory.swap.max`` / ``memory.memsw.limit_in_bytes``); past the limit the kernel's processes
  are killed (v2: all of them, ``memory.oom.group``) and the grader says "out of memory";
* **processes**: ``pids.max`` (threads count too);
* **CPU**: a quota of ``cpus`` cores (``cpu.max`` / ``cpu.cfs_quota_us``) and an equal weight
  (``cpu.weight`` / ``cpu.shares``): however many processes a submission starts, together they
  get one share, so a neighbour keeps its own; :meth:`Box.cpu_seconds` is the CPU time of the
  whole box (``cpu.stat`` / ``cpuacct.usage``), which the grader's time limits count.

cgroup v2 is used where the grader's cgroup can delegate ``memory``, ``pids`` and ``cpu`` (it
creates ``labs-grade-<pid>/`` beside itself; if its own cgroup must give up its processes to
enable them, the grader moves itself into ``labs-grade-<pid>/grader``, as systemd's delegation
rules ask); cgroup v1 where the four controllers ``memory``, ``pids``, ``cpu`` and ``cpuacct`` are
mounted and writable.  :func:`layout` says why neither works otherwise, and the sandbox runs
without these limits, saying so.
"""

from __future__ import annotations

import os
import secrets
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["Layout", "Box", "layout", "NEEDED"]

NEEDED = ("memory", "pids", "cpu")  #: controllers a box needs (v1 also cpuacct, for its CPU time)
PERIOD = 100_000  #: µs of the CPU quota's period


@dataclass
class Layout:
    """Where boxes go: ``version`` 1 or 2, and the grader's own cgroup folder per controller."""

    version: int
    own: dict[str, Path]  #: controller -> the grader's cgroup folder (v2: one folder for all)
    parent: dict[str, Path] = field(default_factory=dict)  #: where boxes are made (set by prepare)

    def prepare(self) -> None:
        """Make (v2: and delegate to) the folder boxes are created in; raise ``OSError`` if not."""
        if self.parent:
            return
        for folder in set(self.own.values()):
            for stale in folder.glob("labs-grade-*"):  # the boxes of graders that died
                pid = stale.name.split("-")[2]
                if pid.isdigit() and not Path(f"/proc/{pid}").exists():
                    _rmdir(stale)
        if self.version == 1:
            self.parent = dict(self.own)
            return
        own = self.own["cgroup"]
        parent = own / f"labs-grade-{os.getpid()}"
        parent.mkdir(exist_ok=True)
        wanted = " ".join(f"+{c}" for c in NEEDED)
        if not set(NEEDED) <= set(_read(own / "cgroup.subtree_control").split()):
            try:
                _write(own / "cgroup.subtree_control", wanted)
            except OSError:  # processes in our cgroup: move ourselves below it (a leaf), retry
                (parent / "grader").mkdir(exist_ok=True)
                _write(parent / "grader" / "cgroup.procs", str(os.getpid()))
                _write(own / "cgroup.subtree_control", wanted)
        _write(parent / "cgroup.subtree_control", wanted)
        self.parent = {"cgroup": parent}


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def _write(path: Path, text: str) -> None:
    with open(path, "w") as f:  # one write(2), as cgroup files want
        f.write(text)


def _rmdir(path: Path) -> None:
    for child in [p for p in path.iterdir() if p.is_dir()] if path.is_dir() else []:
        _rmdir(child)
    try:
        path.rmdir()
    except OSError:
        pass


def layout(
    proc: Path = Path("/proc/self"), mounts: Path | None = None
) -> tuple[Layout | None, str]:
    """The cgroup layout usable here, or ``(None, why not)``; reads ``proc``'s ``cgroup`` and
    ``mountinfo`` (a fake folder in tests)."""
    try:
        lines = (proc / "cgroup").read_text().splitlines()
        info = (mounts or proc / "mountinfo").read_text().splitlines()
    except OSError as err:
        return None, f"no cgroups here ({err.strerror})"
    v1, v2 = {}, None
    for line in info:
        left, _, right = line.partition(" - ")
        fields, sup = left.split(), right.split()
        if len(fields) < 5 or len(sup) < 3:
            continue
        if sup[0] == "cgroup2":
            v2 = Path(fields[4])
        elif sup[0] == "cgroup":
            for opt in sup[2].split(","):
                v1.setdefault(opt, Path(fields[4]))
    paths = {}
    for line in lines:
        num, ctrls, path = line.split(":", 2)
        for c in ctrls.split(",") if ctrls else ["cgroup"]:
            paths[c] = path.lstrip("/")
    why = []
    if v2 is not None and "cgroup" in paths:
        own = v2 / paths["cgroup"]
        have = set(_read(own / "cgroup.controllers").split())
        if set(NEEDED) <= have and os.access(own, os.W_OK):
            return Layout(2, {"cgroup": own}), ""
        why.append(f"cgroup v2 at {v2} offers {' '.join(sorted(have)) or 'no controllers'}")
    need = (*NEEDED, "cpuacct")
    own1 = {c: v1[c] / paths[c] for c in need if c in v1 and c in paths}
    if len(own1) == len(need) and all(os.access(p, os.W_OK) for p in own1.values()):
        return Layout(1, own1), ""
    missing = [c for c in need if c not in own1 or not os.access(own1[c], os.W_OK)]
    if v1:
        why.append(f"cgroup v1 lacks writable {', '.join(missing)}")
    return None, "; ".join(why) or "no cgroup file system mounted"


class Box:
    """One sandbox's cgroup: created with its limits, joined by its processes, then removed."""

    def __init__(self, where: Layout, memory: int, pids: int, cpus: float):
        where.prepare()
        self.version = where.version
        name = f"labs-grade-{os.getpid()}-{secrets.token_hex(4)}" if where.version == 1 else (
            f"box-{secrets.token_hex(4)}")  # fmt: skip
        self.dirs = {c: p / name for c, p in where.parent.items()}
        self.memory, self.cpus = memory, cpus
        try:
            for d in dict.fromkeys(self.dirs.values()):
                d.mkdir()
            self._limit(memory, pids, cpus)
        except OSError:
            self.remove()
            raise

    def _limit(self, memory: int, pids: int, cpus: float) -> None:
        quota = max(1000, int(cpus * PERIOD))
        if self.version == 2:
            d = self.dirs["cgroup"]
            settings = {"memory.max": memory, "memory.swap.max": 0, "memory.oom.group": 1,
                        "pids.max": pids, "cpu.max": f"{quota} {PERIOD}", "cpu.weight": 100}  # fmt: skip
            for name, value in settings.items():
                if name != "memory.swap.max" or (d / name).exists():  # no swap accounting: none
                    _write(d / name, str(value))
            return
        mem, cpu = self.dirs["memory"], self.dirs["cpu"]
        _write(mem / "memory.limit_in_bytes", str(memory))
        if (mem / "memory.memsw.limit_in_bytes").exists():
            _write(mem / "memory.memsw.limit_in_bytes", str(memory))
        _write(self.dirs["pids"] / "pids.max", str(pids))
        _write(cpu / "cpu.cfs_period_us", str(PERIOD))
        _write(cpu / "cpu.cfs_quota_us", str(quota))
        _write(cpu / "cpu.shares", "1024")

    @property
    def procs(self) -> list[str]:
        """The ``cgroup.procs`` files a process writes its pid to, to join the box."""
        return [str(d / "cgroup.procs") for d in dict.fromkeys(self.dirs.values())]

    def cpu_seconds(self) -> float:
        """CPU time (user + system) of every process the box ever held, in seconds."""
        if self.version == 2:
            for line in _read(self.dirs["cgroup"] / "cpu.stat").splitlines():
                if line.startswith("usage_usec "):
                    return int(line.split()[1]) / 1e6
            return 0.0
        text = _read(self.dirs["cpuacct"] / "cpuacct.usage").strip()
        return int(text) / 1e9 if text.isdigit() else 0.0

    def out_of_memory(self) -> bool:
        """Whether the kernel's out-of-memory killer has killed something in the box."""
        d = self.dirs["cgroup" if self.version == 2 else "memory"]
        text = _read(d / ("memory.events" if self.version == 2 else "memory.oom_control"))
        return any(line.split()[1:] not in ([], ["0"]) for line in text.splitlines()
                   if line.startswith("oom_kill "))  # fmt: skip

    def memory_peak(self) -> int:
        """The most memory the box ever held, in bytes (0 where the kernel does not say)."""
        d = self.dirs["cgroup" if self.version == 2 else "memory"]
        text = _read(d / ("memory.peak" if self.version == 2 else "memory.max_usage_in_bytes"))
        return int(text) if text.strip().isdigit() else 0

    def pids(self) -> list[int]:
        d = self.dirs["cgroup" if self.version == 2 else "pids"]
        return [int(p) for p in _read(d / "cgroup.procs").split()]

    def kill(self, timeout: float = 10) -> bool:
        """SIGKILL every process in the box (none can leave it); True once it is empty."""
        deadline = time.monotonic() + timeout
        kill_file = self.dirs.get("cgroup", Path("/nonexistent")) / "cgroup.kill"
        while True:
            pids = self.pids()
            if not pids:
                return True
            if kill_file.exists():
                _write(kill_file, "1")
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            if time.monotonic() > deadline:
                return False
            time.sleep(0.02)

    def remove(self) -> None:
        """Kill what is left and delete the box's folders."""
        if any(d.exists() for d in self.dirs.values()):
            self.kill()
        for d in dict.fromkeys(self.dirs.values()):
            try:
                d.rmdir()
            except FileNotFoundError:
                pass
            except OSError:  # a process still exiting: once more after a moment
                time.sleep(0.2)
                _rmdir(d)
