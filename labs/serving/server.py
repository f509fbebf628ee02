"""Start and stop servers as subprocesses on a free loopback port, leaving nothing behind.

``ServiceProcess`` runs ``python -m labs.serving`` and ``RedisProcess`` runs Debian's
``redis-server``; both are context managers. Each child gets its own process group
(``start_new_session``), and stopping sends SIGTERM, then SIGKILL, to the whole group::

    with ServiceProcess(api_keys=["k"], train_steps=0) as svc:
        httpx.get(svc.url + "/health")
    assert not svc.running
"""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import httpx

__all__ = ["free_port", "ServiceProcess", "RedisProcess", "redis_available"]


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free right now (the OS picks it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class _Child:
    """A subprocess in its own process group, stopped by :meth:`stop`."""

    proc: subprocess.Popen | None = None

    def _spawn(self, cmd: list[str], env: dict | None = None) -> None:
        self._log = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(
            cmd, stdout=self._log, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
        atexit.register(self.stop)  # also when a notebook's kernel shuts down mid-way

    def output(self) -> str:
        """What the child printed so far (for error messages)."""
        self._log.seek(0)
        return self._log.read().decode(errors="replace")[-3000:]

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM the process group, SIGKILL it if it is still there after ``timeout`` s."""
        if self.proc is None:
            return
        for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, 5.0)):
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                break
            try:
                self.proc.wait(wait)
                break
            except subprocess.TimeoutExpired:
                continue
        try:  # children of the child, if any survived their parent
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


class ServiceProcess(_Child):
    """``python -m labs.serving`` on ``127.0.0.1:<free port>``, ready when ``/health/ready``
    answers 200.

    Args:
        api_keys: keys the server accepts (passed through ``$DLSYS_API_KEYS``).
        *args: extra command-line options, e.g. ``"--max-batch-size", "1"``.
        quiet: pass ``--quiet`` (no access log; the default, since the log fills a temp file).
        checkpoint: a checkpoint to load; otherwise ``train_steps`` steps of training.
        startup_timeout: seconds to wait for ``/health``.
        wait: return only once the server answers; with ``False`` call :meth:`wait_ready` later
            (start several servers at once, then wait for all).
    """

    def __init__(
        self,
        api_keys: list[str],
        *args: str,
        checkpoint: str | None = None,
        train_steps: int = 150,
        port: int | None = None,
        startup_timeout: float = 90.0,
        wait: bool = True,
        quiet: bool = True,
    ):
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        cmd = [sys.executable, "-m", "labs.serving", "--host", "127.0.0.1"]
        cmd += ["--port", str(self.port), "--train-steps", str(train_steps), *args]
        cmd += ["--quiet"] if quiet else []
        if checkpoint:
            cmd += ["--checkpoint", str(checkpoint)]
        env = {**os.environ, "DLSYS_API_KEYS": ",".join(api_keys)}
        env.pop("DLSYS_API_KEYS_FILE", None)
        self._spawn(cmd, env)
        if wait:
            self.wait_ready(startup_timeout)

    def wait_ready(self, timeout: float = 90.0) -> ServiceProcess:
        """Block until ``/health/ready`` answers 200; stop the child and raise if it does not."""
        try:
            self._wait_ready(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.running:
                raise RuntimeError(f"the service exited during start-up:\n{self.output()}")
            try:
                if httpx.get(self.url + "/health/ready", timeout=1.0).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        raise TimeoutError(f"the service was not ready within {timeout} s:\n{self.output()}")


def redis_available() -> bool:
    """Whether ``redis-server`` is installed (Debian: ``apt-get install redis-server``)."""
    return shutil.which("redis-server") is not None


class RedisProcess(_Child):
    """A throw-away ``redis-server`` on loopback: no persistence, no config file."""

    def __init__(self, startup_timeout: float = 10.0):
        if not redis_available():
            raise RuntimeError("redis-server is not installed (apt-get install redis-server)")
        self.port = free_port()
        self.uri = f"redis://127.0.0.1:{self.port}"
        cmd = ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1"]
        self._spawn(cmd + ["--save", "", "--appendonly", "no", "--daemonize", "no"])
        deadline = time.monotonic() + startup_timeout
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as s:
                    s.sendall(b"PING\r\n")
                    if s.recv(16).startswith(b"+PONG"):
                        return
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise TimeoutError(f"redis-server did not answer within {startup_timeout} s")
