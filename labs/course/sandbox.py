"""A sealed Jupyter kernel per submission: own namespaces, limits, killed with all it started.

:class:`Sandbox` gives each kernel (a submission's, or the trusted reference run's)

* a fresh folder (deleted afterwards) with a work folder, ``TMPDIR`` and ``HOME`` of its own;
* its own read-only copy of the ``labs`` package, first on ``PYTHONPATH``;
* an environment built from :data:`~labs.course.isolation.ENV_ALLOW` (nothing else of the
  grader's), talking to the grader over Unix sockets in its folder (``ipc``: no TCP port);
* on Linux, where :func:`~labs.course.isolation.isolation_available` says so, the seal of
  :mod:`labs.course.jail`: user, PID, mount and network namespaces, a read-only file system with
  the repository, home folder, class folders and other kernels hidden, and rlimits;
* a per-cell output limit: a kernel that prints more is stopped (status ``flood``);
* on timeout or at the end, ``SIGKILL`` to ``unshare`` and the process group: with
  ``--kill-child`` the namespace's PID 1 dies, and with it every process it started.

Where the namespaces are unavailable the kernel keeps the folder, the package copy, the
environment, the process-group kill and the output limit, and :attr:`Sandbox.isolation` says what
is not isolated.
"""

from __future__ import annotations

import json
import os
import platform
import queue
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from labs.course.isolation import (
    ENV_ALLOW,
    FILE_LIMIT,
    JAIL,
    LAUNCH,
    MEMORY_LIMIT,
    OUTPUT_LIMIT,
    PROCESS_LIMIT,
    UNSHARE,
    isolation_available,
)
from labs.course.notebooks import REPO_ROOT

__all__ = ["Sandbox", "CellResult"]

PACKAGE_DIR = Path(__file__).resolve().parents[1]  #: the ``labs`` package being graded with


@dataclass
class CellResult:
    """What one executed code cell did."""

    status: str  #: "ok", "error", "timeout", "died" or "flood" (too much output: killed)
    error: str = ""  #: ``"Name: message"`` (first line) for errors; the reason otherwise
    stdout: str = ""  #: everything the cell printed to stdout


class Sandbox:
    """One submission's kernel: ``with Sandbox() as box: box.run("x = 1", timeout=120)``.

    Args:
        isolate: use network and mount namespaces when available (default ``True``).
        hide: more folders to cover inside the sandbox (e.g. the class folder, so that one
            submission cannot read or rewrite another); folders that hold Python, the sandbox
            or the home folder are never hidden.
        startup_timeout: seconds to wait for the kernel to answer.
        labs_root: a folder containing the ``labs`` package the kernel imports (default: the
            grader's own; a submission's kernel gets the key's sealed copy,
            :func:`labs.course.sealed_labs.seal`).
    """

    def __init__(
        self,
        isolate: bool = True,
        hide=(),
        startup_timeout: float = 60,
        memory: int = MEMORY_LIMIT,
        labs_root: Path | None = None,
    ):
        self.isolation = isolation_available() if isolate else "isolation turned off"
        self.memory = memory
        self.labs_root = Path(labs_root) if labs_root is not None else PACKAGE_DIR.parent
        self.extra_hide = [Path(h) for h in hide]
        self.startup_timeout = startup_timeout
        self.dir: Path | None = None
        self.proc: subprocess.Popen | None = None
        self.client = None

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
        """The copy of ``labs`` the kernel imports."""
        assert self.dir is not None
        return self.dir / "pkg" / "labs"

    def start(self) -> None:
        from jupyter_client import BlockingKernelClient
        from jupyter_client.connect import write_connection_file

        self.dir = Path(tempfile.mkdtemp(prefix="labs-grade-"))
        work, tmp, home = self.dir / "work", self.dir / "tmp", self.dir / "home"
        for folder in (work, tmp, home):
            folder.mkdir()
        shutil.copytree(
            self.labs_root / "labs", self.package_dir,
            ignore=shutil.ignore_patterns("*.egg-info", "__pycache__"),
        )  # fmt: skip
        conn, _ = write_connection_file(
            str(self.dir / "kernel.json"),
            ip=str(self.dir / "k"),
            transport="ipc",
            key=secrets.token_hex(16).encode(),
        )
        launcher = self.dir / "launch_kernel.py"
        spec = {
            "box": str(self.dir),
            "cover": self._hidden(),
            "readable": self._readable(),
            "limits": {"data": self.memory, "fsize": FILE_LIMIT, "nofile": 4096,
                       "nproc": PROCESS_LIMIT},
        }  # fmt: skip
        launcher.write_text(
            JAIL + LAUNCH.format(spec=json.dumps(spec), isolated=not self.isolation)
        )
        env = {k: v for k, v in os.environ.items() if k in ENV_ALLOW}
        env.update(
            PYTHONPATH=str(self.package_dir.parent),
            PYTHONHASHSEED="0",
            HOME=str(home),
            TMPDIR=str(tmp),
            IPYTHONDIR=str(home / ".ipython"),
            MPLCONFIGDIR=str(home / ".matplotlib"),
            PYDEVD_DISABLE_FILE_VALIDATION="1",
        )
        prefix = [] if self.isolation else [shutil.which("unshare") or "unshare", *UNSHARE]
        setarch = shutil.which("setarch") if sys.platform.startswith("linux") else None
        if setarch:  # no address randomisation: hash(None) and ids agree with the reference run
            prefix += [setarch, platform.machine(), "--addr-no-randomize"]
        self.proc = subprocess.Popen(
            [*prefix, sys.executable, str(launcher), "-f", conn],
            cwd=work,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=open(self.dir / "kernel.log", "wb"),  # noqa: SIM115 - closed with the process
            start_new_session=True,
        )
        client = BlockingKernelClient(connection_file=conn)
        client.load_connection_file()
        client.start_channels()
        self.client = client
        deadline = time.monotonic() + self.startup_timeout
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the grading kernel exited at start: {self._log_tail()}")
            try:
                client.wait_for_ready(timeout=2)
                return
            except RuntimeError:
                if time.monotonic() > deadline:
                    raise RuntimeError(
                        f"the grading kernel did not start in {self.startup_timeout:.0f} s: "
                        f"{self._log_tail()}"
                    ) from None

    def _hidden(self) -> list[str]:
        """Folders to cover: the repository, the home folder, the grader's folder, ``hide``."""
        candidates = [REPO_ROOT, PACKAGE_DIR.parent, Path.home(), Path.cwd(), *self.extra_hide]
        for name, module in list(sys.modules.items()):  # editable installs of labs elsewhere
            if name.startswith("__editable__") and isinstance(getattr(module, "MAPPING", 0), dict):
                candidates += [Path(v).parent for v in module.MAPPING.values()]
        system = [Path(p) for p in ("/usr", "/lib", "/lib64", "/bin", "/etc", "/opt", "/var",
                                    "/proc", "/sys", "/dev", "/run")]  # fmt: skip
        box = self.dir.resolve()
        out = set()
        for path in candidates:
            path = path.resolve()
            if not path.is_dir() or path == box or box in path.parents:
                continue
            if any(path == s or path in s.parents for s in system):
                continue  # never hide the system (the grader's folder may be / or /usr/...)
            out.add(str(path))
        return sorted(out)

    @staticmethod
    def _readable() -> list[str]:
        """Folders Python needs (bound back read-only where a covered folder holds them)."""
        paths = {sys.prefix, sys.base_prefix, sys.exec_prefix}
        paths |= {p for p in sys.path if p and Path(p).is_dir() and "site-packages" in p}
        return sorted(str(Path(p).resolve()) for p in paths)

    def _log_tail(self) -> str:
        try:
            lines = (self.dir / "kernel.log").read_text(errors="replace").strip().splitlines()
        except OSError:
            return "no log"
        return lines[-1] if lines else "no output"

    def kill(self) -> None:
        """Kill the kernel: its PID namespace (all it started) or else its process group."""
        if self.proc is not None and self.proc.poll() is None:
            inner = self._children(self.proc.pid)  # PID 1 of the namespace, under unshare
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait(timeout=30)
            deadline = time.monotonic() + 10
            while inner and time.monotonic() < deadline:  # the namespace dies with its PID 1
                inner = [p for p in inner if Path(f"/proc/{p}").exists()]
                time.sleep(0.02)

    @staticmethod
    def _children(pid: int) -> list[int]:
        try:
            text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
        except OSError:
            return []
        return [int(p) for p in text.split()]

    def close(self) -> None:
        if self.client is not None:
            self.client.stop_channels()
            self.client = None
        self.kill()
        if self.proc is not None:
            try:  # descendants that left the group are still in the session: kill by session
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            if self.proc.stderr:
                self.proc.stderr.close()
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None

    # -- running code -----------------------------------------------------------------------
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def run(self, source: str, timeout: float) -> CellResult:
        """Execute ``source``; on timeout kill the kernel (the sandbox is then spent)."""
        if not self.alive():
            return CellResult("died", "the kernel is no longer running")
        client = self.client
        msg_id = client.execute(source, store_history=False, allow_stdin=False, stop_on_error=False)
        deadline = time.monotonic() + timeout
        out: list[str] = []
        size = 0
        error = ""
        idle = False
        while not idle:
            left = deadline - time.monotonic()
            if left <= 0:
                self.kill()
                return CellResult("timeout", f"timeout after {timeout:g} s", "".join(out))
            try:
                msg = client.get_iopub_msg(timeout=min(left, 1.0))
            except queue.Empty:
                if not self.alive():
                    return CellResult("died", "the kernel died (crashed or exited)", "".join(out))
                continue
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            kind, content = msg["msg_type"], msg["content"]
            size += len(str(content)) if kind != "status" else 0
            if size > OUTPUT_LIMIT:
                self.kill()
                return CellResult(
                    "flood", f"invalid: the cell printed more than {OUTPUT_LIMIT // 2**20} MiB"
                )
            if kind == "stream" and content.get("name") == "stdout":
                out.append(content.get("text", ""))
            elif kind == "error" and not error:
                first = (content.get("evalue") or "").strip().splitlines()
                error = f"{content.get('ename', 'Error')}: {first[0] if first else ''}".rstrip(": ")
            elif kind == "status" and content.get("execution_state") == "idle":
                idle = True
        while True:  # the reply says whether the cell raised
            left = deadline - time.monotonic()
            try:
                reply = client.get_shell_msg(timeout=max(left, 1.0))
            except queue.Empty:
                self.kill()
                return CellResult("timeout", f"timeout after {timeout:g} s", "".join(out))
            if reply["parent_header"].get("msg_id") == msg_id:
                break
        if reply["content"].get("status") != "ok":
            return CellResult(
                "error", error or reply["content"].get("ename", "error"), "".join(out)
            )
        return CellResult("ok", "", "".join(out))
