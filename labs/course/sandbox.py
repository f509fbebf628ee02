"""A sealed Jupyter kernel per submission: an allow-listed root, cgroup limits, deadlines.

:class:`Sandbox` starts one kernel (a submission's, or the trusted reference run's) and, where the
machine allows it (:func:`labs.course.isolation.protections`),

* seals it (:mod:`labs.course.jail`): own user, PID, mount, network and cgroup namespaces; a root
  built from nothing (:mod:`labs.course.rootfs`: Python and the system libraries read-only, its
  copy of ``labs`` read-only, one private size-limited ``tmpfs`` for every write); no
  capabilities and a system-call filter (:mod:`labs.course.seccomp`: no mounts, no new
  namespaces, no ptrace); nothing is written to the host's disk, not even its launcher;
* limits it with a cgroup (:mod:`labs.course.cgroups`): memory (shared memory and tmpfs
  included), processes and threads, a CPU quota of ``cpus`` cores with an equal weight;
* talks to it only through a relay process (:mod:`labs.course.relay`), which refuses oversized
  messages as they arrive and ignores decoys;
* times it in its *own* CPU time: a cell given ``timeout`` seconds may use ``timeout * cpus``
  CPU-seconds (all its processes together, whatever its neighbours do) and at most
  ``BACKSTOP * timeout`` seconds of wall-clock time (a cell that sleeps or waits); :meth:`clock`
  gives the same measure for a whole notebook;
* on a timeout, a flood or at the end kills every process of the submission (its PID namespace,
  its cgroup, its session) and its relay.

Where namespaces are unavailable the kernel runs in a temporary folder of its own (removed
however deep it grows), with its rlimits; :attr:`Sandbox.isolation` and
:attr:`Sandbox.protections_off` say what is not protected.
"""

from __future__ import annotations

import json
import os
import platform
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from labs.course import rootfs
from labs.course.cgroups import Box, layout
from labs.course.isolation import (
    BACKSTOP,
    CPU_LIMIT,
    ENTER,
    ENV_ALLOW,
    FILE_LIMIT,
    JAIL,
    MEMORY_LIMIT,
    OUTPUT_LIMIT,
    PROCESS_LIMIT,
    UNSHARE,
    report,
)
from labs.course.link import Link, alive, children, read_some
from labs.course.tree import box_cpu_seconds, remove_tree

__all__ = ["Sandbox", "CellResult", "cores"]

PACKAGE_ROOT = Path(__file__).resolve().parents[2]  #: the folder holding the grader's ``labs``
BOOT = "import sys; exec(sys.stdin.read())"  # the kernel reads its launcher from a pipe


@dataclass
class CellResult:
    """What one executed code cell did."""

    status: str  #: "ok", "error", "timeout", "died" or "flood" (too much output: killed)
    error: str = ""  #: ``"Name: message"`` (first line) for errors; the reason otherwise
    stdout: str = ""  #: everything the cell printed to stdout


class Sandbox:
    """One submission's kernel: ``with Sandbox() as box: box.run("x = 1", timeout=120)``.

    Args:
        isolate: seal the kernel in namespaces where available (default ``True``).
        hide: folders that must stay invisible (e.g. the class folder): starting raises if the
            kernel's allow-list would show any of them.
        startup_timeout: seconds to wait for the kernel to answer.
        memory: bytes for the whole submission (cgroup; per process where there is none).
        cpus: cores of CPU quota; math libraries get as many threads.
        labs_root: a folder holding the ``labs`` package the kernel imports (copied in); default
            the grader's own.
        cgroups: limit the kernel with a cgroup where available (default ``True``).
    """

    def __init__(self, isolate: bool = True, hide=(), startup_timeout: float = 60,
                 memory: int = MEMORY_LIMIT, cpus: float = CPU_LIMIT,
                 labs_root: str | Path | None = None, cgroups: bool = True):  # fmt: skip
        self.isolation, self.protections_off = report(isolate, cgroups)
        self.sealed = "filesystem" not in self.protections_off
        self.memory, self.cpus, self.hide = memory, cpus, [Path(h) for h in hide]
        self.labs_root = Path(labs_root or PACKAGE_ROOT)
        self.startup_timeout = startup_timeout
        self.dir: Path | None = None  #: the host folder (only where namespaces are unavailable)
        self.proc: subprocess.Popen | None = None
        self.relay: Link | None = None
        self.box: Box | None = None
        self.kernel_pid = 0
        self._zero = (0.0, 0.0)  # (wall, cpu) when the kernel became ready

    # -- life cycle -------------------------------------------------------------------------
    def __enter__(self) -> Sandbox:
        try:
            self.start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def package_dir(self) -> Path:
        """The kernel's copy of ``labs``, as the kernel sees it."""
        if self.sealed:
            return Path(rootfs.GRADE) / "labs"
        assert self.dir is not None
        return self.dir / "pkg" / "labs"

    @property
    def work_dir(self) -> Path:
        """The kernel's working folder, as the kernel sees it."""
        return Path(rootfs.WORK) if self.sealed else self.dir / "work"

    def _enter(self) -> list[str]:
        procs = self.box.procs if self.box else []
        return [sys.executable, "-I", "-S", "-c", ENTER, *procs, "--"]

    def start(self) -> None:
        if "memory" not in self.protections_off:
            self.box = Box(layout()[0], self.memory, PROCESS_LIMIT, self.cpus)
        key = secrets.token_hex(32)
        threads = str(max(1, round(self.cpus)))
        env = {k: v for k, v in os.environ.items() if k in ENV_ALLOW}
        env.update(PYTHONHASHSEED="0", PYDEVD_DISABLE_FILE_VALIDATION="1", OMP_NUM_THREADS=threads,
                   MKL_NUM_THREADS=threads, OPENBLAS_NUM_THREADS=threads)  # fmt: skip
        limits = {"data": self.memory, "fsize": FILE_LIMIT, "nofile": 4096}
        if self.sealed:
            steps = rootfs.plan(
                self.labs_root, self.hide, min(rootfs.TMPFS_LIMIT, self.memory // 2)
            )
            home, work, ipc, pkg = rootfs.HOME, rootfs.WORK, f"{rootfs.IPC}/k", rootfs.GRADE
            conn, tmp = f"{rootfs.BOX}/kernel.json", "/tmp"
        else:
            self.dir = Path(tempfile.mkdtemp(prefix="labs-grade-"))
            for sub in ("work", "tmp", "home", "ipc"):
                (self.dir / sub).mkdir(mode=0o700)
            shutil.copytree(self.labs_root / "labs", self.package_dir,
                            ignore=shutil.ignore_patterns("*.egg-info"))  # fmt: skip
            steps, home, work = [], str(self.dir / "home"), str(self.dir / "work")
            ipc, pkg = str(self.dir / "ipc" / "k"), str(self.package_dir.parent)
            conn, tmp = str(self.dir / "kernel.json"), str(self.dir / "tmp")
        env.update(PYTHONPATH=pkg, HOME=home, TMPDIR=tmp, IPYTHONDIR=f"{home}/.ipython",
                   MPLCONFIGDIR=f"{home}/.matplotlib")  # fmt: skip
        ports = {"shell_port": 1, "iopub_port": 2, "stdin_port": 3, "control_port": 4, "hb_port": 5}
        kernel = {"transport": "ipc", "ip": ipc, "key": key, "signature_scheme": "hmac-sha256",
                  "kernel_name": "", **ports}  # fmt: skip
        spec = {"sealed": self.sealed, "steps": steps, "connection": conn, "kernel": kernel,
                "cwd": work, "limits": limits, "hostname": rootfs.HOSTNAME}  # fmt: skip
        prefix = [shutil.which("unshare") or "unshare", *UNSHARE] if self.sealed else []
        setarch = shutil.which("setarch") if sys.platform.startswith("linux") else None
        if setarch:  # no address randomisation: hash(None) and ids agree with the reference run
            prefix = [setarch, platform.machine(), "--addr-no-randomize", *prefix]
        err_r, err_w = os.pipe()
        try:
            self.proc = subprocess.Popen(
                [*self._enter(), *prefix, sys.executable, "-c", BOOT],
                cwd=work if not self.sealed else "/", env=env, stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL, stderr=err_w, start_new_session=True,
            )  # fmt: skip
        finally:
            os.close(err_w)
        try:
            self.proc.stdin.write((JAIL + f"\nmain(json.loads({json.dumps(spec)!r}))\n").encode())
            self.proc.stdin.close()
            self.kernel_pid = self._find_kernel()
            self._start_relay(ipc, key, err_r)
        except BaseException as err:
            tail = read_some(err_r)
            os.close(err_r)
            raise RuntimeError(f"the grading kernel did not start ({err}): {tail}") from None
        os.close(err_r)
        self._zero = (time.monotonic(), self._cpu())

    def _find_kernel(self) -> int:
        """The kernel's host pid: ``unshare``'s child when sealed, else the process itself."""
        deadline = time.monotonic() + self.startup_timeout
        while self.sealed:
            found = children(self.proc.pid)
            if found:
                return found[0]
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("unshare exited")
            time.sleep(0.01)
        return self.proc.pid

    def _start_relay(self, ipc: str, key: str, err_r: int) -> None:
        self.relay = Link(self._enter(), self.kernel_pid if self.sealed else 0, ipc, key, err_r)
        deadline = time.monotonic() + self.startup_timeout
        head, _ = self.relay.answer(deadline, lambda: not self.alive() or not self.relay.alive())
        if head is None or head.get("status") != "ready":
            why = f"no answer in {self.startup_timeout:g} s" if self.alive() else "it exited"
            raise RuntimeError(why)

    # -- time -------------------------------------------------------------------------------
    def _cpu(self) -> float | None:
        """CPU seconds of everything the kernel ran (None where it cannot be measured)."""
        if self.box is not None:
            return self.box.cpu_seconds()
        return box_cpu_seconds(self.kernel_pid) if self.sealed else None

    def clock(self) -> float:
        """Seconds of this sandbox's time used since its kernel was ready: its CPU time over
        ``cpus``, or its wall-clock time over ``BACKSTOP`` when that is larger."""
        wall, cpu = time.monotonic() - self._zero[0], self._cpu()
        if cpu is None:
            return wall
        return max((cpu - self._zero[1]) / self.cpus, wall / BACKSTOP)

    # -- running code -----------------------------------------------------------------------
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None and alive(self.kernel_pid)

    def run(self, source: str, timeout: float) -> CellResult:
        """Execute ``source`` within ``timeout`` seconds of this sandbox's time (see
        :meth:`clock`); on a timeout or a flood the kernel is killed (the sandbox is spent)."""
        if not self.alive() or self.relay is None or not self.relay.alive():
            return CellResult("died", "the kernel is no longer running")
        wall0, cpu0 = time.monotonic(), self._cpu()
        deadline = wall0 + (BACKSTOP * timeout if cpu0 is not None else timeout)

        def stop() -> bool:  # the cell's own CPU time is up, or the kernel died
            cpu = self._cpu()
            return (cpu is not None and cpu - cpu0 >= timeout * self.cpus) or not self.alive()

        request = json.dumps({"code": source}).encode() + b"\n"
        if self.relay.send(request, deadline, stop):
            head, out = self.relay.answer(deadline, stop)
        else:
            head, out = None, b""
        if head is None:
            if not self.alive():
                return self._broken("")
            if not self.relay.alive():  # the relay ran out of memory: a message bomb
                return self._broken("the kernel sent more than the relay could hold")
            self.kill()
            return CellResult("timeout", f"timeout after {timeout:g} s")
        status, error = head.get("status"), str(head.get("error", ""))
        if status == "broken":
            return self._broken(error)
        if status == "flood":
            self.kill()
            return CellResult("flood", error)
        return CellResult(status, error, out.decode("utf-8", "replace"))

    def _broken(self, why: str) -> CellResult:
        alive = self.alive()
        self.kill()
        if not alive:
            if self.box is not None and self.box.out_of_memory():
                limit = f"{self.memory / 2**30:g} GiB"
                return CellResult("died", f"the kernel ran out of memory ({limit} per submission)")
            return CellResult("died", "the kernel exited or crashed")
        return CellResult("flood", f"invalid: {why} (output limit {OUTPUT_LIMIT >> 20} MiB)")

    def kill(self) -> None:
        """Kill the relay and every process of the kernel (cgroup, PID namespace, session)."""
        procs = [p for p in (self.relay and self.relay.proc, self.proc) if p is not None]
        for proc in procs:
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
        if self.box is not None:
            self.box.kill()
        for proc in procs:
            proc.wait(timeout=30)
        deadline = time.monotonic() + 10
        while self.kernel_pid and alive(self.kernel_pid) and time.monotonic() < deadline:
            time.sleep(0.02)  # the namespace dies with its PID 1

    def close(self) -> None:
        self.kill()
        if self.relay is not None:
            self.relay.close()
        if self.proc is not None and self.proc.stdin is not None:
            self.proc.stdin.close()
        if self.box is not None:
            self.box.remove()
            self.box = None
        if self.dir is not None:
            remove_tree(self.dir)
            self.dir = None


def cores() -> int:
    """CPU cores this process may run on: at most this many kernels run side by side."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS, Windows
        return os.cpu_count() or 1
