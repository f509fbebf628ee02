"""Run a command in its own process group and, past its timeout, kill the whole group.

``subprocess.run(..., timeout=...)`` kills only the process it started: under ``torchrun`` that
is the launcher, and its worker ranks live on (an orphaned rank was found holding a core an hour
after a timed-out test). Tests that start torchrun use :func:`run` instead; it takes the same
arguments and raises the same exceptions.
"""

from __future__ import annotations

import os
import signal
import subprocess
from typing import Any


def kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL every process of ``proc``'s group (started with ``start_new_session=True``)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def run(cmd: list[str], *, timeout: float, check: bool = False, capture_output: bool = False,
        **kwargs: Any) -> subprocess.CompletedProcess:  # fmt: skip
    """Like :func:`subprocess.run`, the command and everything it started killed on timeout."""
    if capture_output:
        kwargs["stdout"] = kwargs["stderr"] = subprocess.PIPE
    with subprocess.Popen(cmd, start_new_session=True, **kwargs) as proc:
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            kill_group(proc)
            out, err = proc.communicate()
            raise subprocess.TimeoutExpired(cmd, timeout, out, err) from None
        finally:
            kill_group(proc)  # whatever the command left behind in its group
    done = subprocess.CompletedProcess(cmd, proc.returncode, out, err)
    if check:
        done.check_returncode()
    return done
