"""A sandboxed Jupyter kernel per submission: temporary folder, no network, killed on timeout.

:class:`Sandbox` gives each submission

* a fresh temporary working directory (deleted afterwards) that is also the kernel's ``TMPDIR``;
* its own copy of the ``labs`` package, first on ``PYTHONPATH``, so ``labs.__file__`` leads to no
  solution notebook (the book's ``book/labs`` sits beside the repository's copy, not this one);
* on Linux, where ``unshare -rnm`` works (unprivileged user namespaces), a private network namespace
  with only a loopback interface (no route out) and a private mount namespace in which the book,
  the answer keys, the tests and the git history of the repository are covered by empty folders;
* a kernel environment without the grader's own variables, talking to the grader over Unix sockets
  (``ipc`` transport: no TCP port at all);
* its own process group, killed with ``SIGKILL`` on timeout or when grading ends (a cell that
  ignores ``SIGINT`` cannot outlive it).

Where ``unshare`` is missing or refused (macOS, Windows, containers that forbid user namespaces)
the kernel still gets the folder, the package copy and the process group, and :attr:`isolation`
says that the network and the repository stay reachable.
"""

from __future__ import annotations

import os
import queue
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from labs.course.notebooks import REPO_ROOT

__all__ = ["Sandbox", "CellResult", "isolation_available", "HIDDEN_FROM_SUBMISSIONS"]

PACKAGE_DIR = Path(__file__).resolve().parents[1]  #: the ``labs`` package being graded with
#: Repository folders a submission must not read (solutions, keys, wrong answers, history).
HIDDEN_FROM_SUBMISSIONS = ("book", "instructor", "tests", ".git")
_DROP_ENV = ("LABS_GRADE", "PYTEST", "JPY_", "JUPYTER_RUNTIME", "COV_CORE", "PWD", "OLDPWD")

_SETUP = r'''"""Set up the grading sandbox's namespaces (written by labs.course.sandbox)."""
import ctypes, fcntl, os, socket, struct, sys


def _setup(hide):
    # Bring up loopback in the new network namespace (servers on 127.0.0.1 keep working).
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        ifreq = fcntl.ioctl(s, 0x8913, struct.pack("16sh", b"lo", 0))  # SIOCGIFFLAGS
        flags = struct.unpack("16sh", ifreq)[1]
        fcntl.ioctl(s, 0x8914, struct.pack("16sh", b"lo", flags | 0x1))  # SIOCSIFFLAGS, IFF_UP
    libc = ctypes.CDLL(None, use_errno=True)
    for path in hide:
        if os.path.isdir(path):
            if libc.mount(b"none", path.encode(), b"tmpfs", 0, b"size=4k,mode=0555") != 0:
                raise OSError(ctypes.get_errno(), f"cannot cover {path}")
    # A nested user + mount namespace locks those mounts: the kernel cannot unmount them.
    if libc.unshare(0x10000000 | 0x00020000) != 0:  # CLONE_NEWUSER | CLONE_NEWNS
        raise OSError(ctypes.get_errno(), "nested unshare failed")
    for name, text in (("setgroups", "deny"), ("uid_map", "0 0 1"), ("gid_map", "0 0 1")):
        with open(f"/proc/self/{name}", "w") as f:
            f.write(text)
'''

_LAUNCH = """
if {isolated!r}:
    _setup({hide!r})
sys.argv = ["ipykernel_launcher", *sys.argv[1:]]
from ipykernel import kernelapp

kernelapp.launch_new_instance()
"""


@lru_cache(maxsize=1)
def isolation_available() -> str:
    """``""`` when the namespaces of the sandbox work here, else why not (one line)."""
    if not sys.platform.startswith("linux"):
        return f"no network or filesystem isolation on {sys.platform} (needs Linux namespaces)"
    unshare = shutil.which("unshare")
    if unshare is None:
        return "no network or filesystem isolation: the unshare command is missing (util-linux)"
    with tempfile.TemporaryDirectory(prefix="labs-grade-probe-") as tmp:
        probe = _SETUP + f"_setup([{tmp!r}])\nprint(os.listdir({tmp!r}) == [])\n"
        Path(tmp, "secret").write_text("x")
        try:
            done = subprocess.run(
                [unshare, "-rnm", sys.executable, "-c", probe],
                capture_output=True, text=True, timeout=60, check=False,
            )  # fmt: skip
        except (OSError, subprocess.TimeoutExpired) as err:
            return f"no network or filesystem isolation: unshare failed ({err})"
    if done.returncode != 0 or done.stdout.strip() != "True":
        why = (done.stderr.strip().splitlines() or [done.stdout.strip() or "refused"])[-1]
        return f"no network or filesystem isolation: unshare -rnm is refused here ({why})"
    return ""


@dataclass
class CellResult:
    """What one executed code cell did."""

    status: str  #: "ok", "error", "timeout" or "died"
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
    """

    def __init__(self, isolate: bool = True, hide=(), startup_timeout: float = 60):
        self.isolation = isolation_available() if isolate else "isolation turned off"
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
        work, tmp = self.dir / "work", self.dir / "tmp"
        work.mkdir()
        tmp.mkdir()
        shutil.copytree(PACKAGE_DIR, self.package_dir, ignore=shutil.ignore_patterns("*.egg-info"))
        conn, _ = write_connection_file(
            str(self.dir / "kernel.json"),
            ip=str(self.dir / "k"),
            transport="ipc",
            key=secrets.token_hex(16).encode(),
        )
        launcher = self.dir / "launch_kernel.py"
        hide = self._hidden()
        launcher.write_text(_SETUP + _LAUNCH.format(hide=hide, isolated=not self.isolation))
        env = {k: v for k, v in os.environ.items() if not k.startswith(_DROP_ENV)}
        env.update(
            PYTHONPATH=str(self.package_dir.parent),
            PYTHONHASHSEED="0",
            TMPDIR=str(tmp),
            IPYTHONDIR=str(self.dir / "ipython"),
            PYDEVD_DISABLE_FILE_VALIDATION="1",
        )
        env.pop("MPLBACKEND", None)  # the kernel's inline backend, as in the book's build
        prefix = [] if self.isolation else [shutil.which("unshare") or "unshare", "-rnm"]
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
        """Folders to cover: the repository's instructor material and ``hide``, where safe."""
        needed = [self.dir, Path(sys.prefix), Path(sys.base_prefix), Path(sys.exec_prefix)]
        needed += [Path(os.path.expanduser("~")), PACKAGE_DIR]
        needed = [p.resolve() for p in needed]
        candidates = [REPO_ROOT / name for name in HIDDEN_FROM_SUBMISSIONS] + self.extra_hide
        out = []
        for path in candidates:
            path = path.resolve()
            if path.is_dir() and not any(n == path or path in n.parents for n in needed):
                out.append(str(path))
        return sorted(set(out))

    def _log_tail(self) -> str:
        try:
            lines = (self.dir / "kernel.log").read_text(errors="replace").strip().splitlines()
        except OSError:
            return "no log"
        return lines[-1] if lines else "no output"

    def kill(self) -> None:
        """Kill the kernel's whole process group (children included)."""
        if self.proc is not None and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait(timeout=30)

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
