"""tests/procgroup.py kills everything a timed-out command started (torchrun's ranks, say)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import procgroup
import pytest


def _alive(marker: str) -> list[str]:
    found = []
    for proc in Path("/proc").iterdir():
        try:
            cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if marker in cmd and "bash" not in cmd:
            found.append(proc.name)
    return found


@pytest.mark.skipif(sys.platform != "linux", reason="reads /proc")
def test_a_timeout_kills_the_children_too():
    marker = "301.4321"  # a sleep no other test starts
    cmd = ["bash", "-c", f"sleep {marker} & sleep {marker} & wait"]
    with pytest.raises(subprocess.TimeoutExpired):
        procgroup.run(cmd, timeout=1)
    deadline = time.monotonic() + 10  # SIGKILL is delivered at once; reaping by init may lag
    while _alive(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(marker)


def test_it_returns_what_subprocess_run_returns():
    done = procgroup.run([sys.executable, "-c", "print('hi')"], timeout=60, capture_output=True,
                         text=True)  # fmt: skip
    assert (done.returncode, done.stdout) == (0, "hi\n")
    with pytest.raises(subprocess.CalledProcessError):
        procgroup.run([sys.executable, "-c", "raise SystemExit(3)"], timeout=60, check=True)
