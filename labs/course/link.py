"""The grader's end of a kernel's relay (:mod:`labs.course.relay`): every wait has a deadline.

:class:`Link` starts the relay, sends it one cell at a time and reads its answer, never blocking:
each wait is a ``select`` of at most 0.2 s between which the caller's ``stop()`` (the cell's
CPU-time limit, the kernel's death) and the wall-clock deadline are checked.  The grader holds
at most one answer header (64 KiB) and the cell's standard output (the output limit) of any
kernel in memory, whatever the kernel sends.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from pathlib import Path

from labs.course.isolation import OUTPUT_LIMIT, RELAY

__all__ = ["Link", "children", "alive", "read_some"]

HEADER_LIMIT = 2**16  #: bytes of an answer's header line


class Link:
    """A relay process for one kernel (``enter``: the command prefix that joins its cgroup)."""

    def __init__(self, enter: list[str], pid: int, ipc: str, key: str, stderr_fd: int):
        self.proc = subprocess.Popen(
            [*enter, sys.executable, "-I", "-c", RELAY], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, pass_fds=[stderr_fd],
            start_new_session=True,
        )  # fmt: skip
        cfg = {"pid": pid, "ipc": ipc, "ports": {"shell": 1, "iopub": 2}, "key": key,
               "limit": OUTPUT_LIMIT, "stderr": stderr_fd}  # fmt: skip
        self.proc.stdin.write(json.dumps(cfg).encode() + b"\n")
        self.proc.stdin.flush()
        os.set_blocking(self.proc.stdout.fileno(), False)
        os.set_blocking(self.proc.stdin.fileno(), False)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def send(self, data: bytes, deadline: float, stop) -> bool:
        """Write ``data`` (a request line); False if ``stop()`` or the deadline came first."""
        while data:
            if stop() or time.monotonic() > deadline:
                return False
            _, ready, _ = select.select([], [self.proc.stdin], [], 0.2)
            if ready:
                try:
                    data = data[os.write(self.proc.stdin.fileno(), data) :]
                except BlockingIOError:
                    continue
                except BrokenPipeError:
                    return True  # the relay died: answer() says so
        return True

    def answer(self, deadline: float, stop) -> tuple[dict | None, bytes]:
        """The relay's answer ``(header, stdout)``, or ``(None, b"")`` if ``stop()`` or the
        deadline came first, the relay ended, or it broke the answer's size limits."""
        fd, buf, head, size = self.proc.stdout.fileno(), bytearray(), None, 0
        while True:
            if head is None and b"\n" in buf:
                line, _, rest = bytes(buf).partition(b"\n")
                try:
                    head, buf = json.loads(line), bytearray(rest)
                    size = int(head.get("stdout", 0))
                except (ValueError, AttributeError, TypeError):
                    return None, b""
                if not 0 <= size <= OUTPUT_LIMIT:
                    return None, b""
            if head is not None and len(buf) >= size:
                return head, bytes(buf[:size])
            if stop() or time.monotonic() > deadline:
                return None, b""
            ready, _, _ = select.select([fd], [], [], 0.2)
            if ready:
                chunk = os.read(fd, 1 << 20)
                if not chunk:
                    return None, b""
                buf += chunk
                if head is None and len(buf) > HEADER_LIMIT and b"\n" not in buf:
                    return None, b""

    def close(self) -> None:
        for stream in (self.proc.stdin, self.proc.stdout):
            stream.close()


def children(pid: int) -> list[int]:
    try:
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie waiting for its parent does not)."""
    try:
        return "\nState:\tZ" not in Path(f"/proc/{pid}/status").read_text()
    except OSError:
        if pid <= 0 or sys.platform.startswith("linux"):
            return False
        try:
            os.kill(pid, 0)
            return True
        except OSError:
            return False


def read_some(fd: int) -> str:
    """The last line a dead kernel wrote to its standard error (reads at most 64 KiB, no wait)."""
    os.set_blocking(fd, False)
    try:
        data = os.read(fd, 65536)
    except OSError:
        data = b""
    lines = data.decode("utf-8", "replace").strip().splitlines()
    return lines[-1][:4096] if lines else "no output"
