"""Which protections the grading sandbox has here, and the limits every kernel gets.

:func:`protections` tries each once (cached) and says, per protection, why it is off:

* ``filesystem``, ``network``, ``processes``, ``syscalls`` need Linux namespaces: a probe runs the
  real seal (:mod:`labs.course.jail`, :mod:`labs.course.seccomp`) under ``unshare``; it fails on
  macOS and Windows, without ``unshare`` (util-linux), before Linux 5.12 (no
  ``mount_setattr``), and in containers or CI runners that forbid unprivileged user namespaces
  (Gradescope's autograder, Docker's default seccomp profile);
* ``memory``, ``pids``, ``cpu`` need cgroups (:mod:`labs.course.cgroups`): a writable v2 subtree
  with those controllers, or the v1 ``memory``, ``pids``, ``cpu`` and ``cpuacct`` hierarchies.

Whatever is off, every kernel keeps its rlimits (``RLIMIT_DATA``, ``RLIMIT_FSIZE``,
``RLIMIT_NOFILE``, no core dumps), its own process session killed as a whole, a clean
environment, the relay's output limits and deadlines, and the verdict made outside the kernel.
:func:`report` gives the one-line ``note:`` the grader prints and the machine-readable list.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from functools import lru_cache
from pathlib import Path

__all__ = [
    "protections", "report", "isolation_available", "UNSHARE", "ENTER", "ENV_ALLOW", "JAIL",
    "RELAY", "MEMORY_LIMIT", "FILE_LIMIT", "PROCESS_LIMIT", "OUTPUT_LIMIT", "CPU_LIMIT",
    "BACKSTOP", "NAMESPACED", "LIMITED",
]  # fmt: skip

_HERE = Path(__file__).parent
#: The seal and the relay, read once when the grader starts (before any kernel could touch them).
JAIL = (_HERE / "jail.py").read_text(encoding="utf-8") + "\n" + (
    _HERE / "seccomp.py").read_text(encoding="utf-8")  # fmt: skip
RELAY = (_HERE / "relay.py").read_text(encoding="utf-8")
#: ``python -I -S -c ENTER CGROUP_PROCS... -- COMMAND...``: die with the thread that started it
#: (``PR_SET_PDEATHSIG``), join the cgroups, then become COMMAND.
ENTER = (
    "import ctypes, os, sys\nif sys.platform.startswith('linux'):\n    ctypes.CDLL(None).prctl(1, 9)\n"
    "a = sys.argv[1:]\ni = a.index('--')\nfor f in a[:i]:\n    with open(f, 'w') as h:\n"
    "        h.write(str(os.getpid()))\nos.execvp(a[i + 1], a[i + 1:])"
)
#: ``unshare`` options: own user (mapped to root), network, mount, PID, cgroup, IPC (System V
#: shared memory dies with the kernel) and host-name namespaces; the kernel is PID 1 of its
#: namespace and is killed with ``unshare`` (``--kill-child``).
UNSHARE = ["--user", "--map-root-user", "--net", "--mount", "--pid", "--cgroup", "--ipc", "--uts",
           "--fork", "--kill-child"]  # fmt: skip
#: Variables a kernel may inherit from the grader (everything else is dropped).
ENV_ALLOW = (
    "PATH", "LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "LC_NUMERIC", "TZ", "TRITON_INTERPRET",
    "CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "LD_LIBRARY_PATH", "SYSTEMROOT",
)  # fmt: skip
MEMORY_LIMIT = 6 * 2**30  #: bytes per submission (cgroup: all its processes, tmpfs and shm)
FILE_LIMIT = 2**30  #: bytes per file a kernel may write (RLIMIT_FSIZE)
PROCESS_LIMIT = 512  #: processes and threads per submission (cgroup pids.max)
OUTPUT_LIMIT = 64 * 2**20  #: bytes of output per cell (and per message part) before a stop
CPU_LIMIT = 1.0  #: cores per submission (cgroup CPU quota; math libraries get this many threads)
BACKSTOP = 2.0  #: a limit of t seconds of CPU also ends after BACKSTOP * t seconds of wall clock
NAMESPACED = ("filesystem", "network", "processes", "syscalls")
LIMITED = ("memory", "pids", "cpu")


@lru_cache(maxsize=1)
def _namespaces() -> str:
    if not sys.platform.startswith("linux"):
        return f"no Linux namespaces on {sys.platform}"
    unshare = shutil.which("unshare")
    if unshare is None:
        return "the unshare command is missing (util-linux)"
    from labs.course import rootfs

    probe = "import os\nprint(sorted(os.listdir('/')), os.getpid())"
    spec = {"sealed": True, "steps": rootfs.plan(_HERE.parents[1]), "connection": "/sandbox/k",
            "kernel": {}, "cwd": rootfs.WORK, "limits": {}, "then": probe}  # fmt: skip
    program = JAIL + f"\nmain(json.loads({json.dumps(spec)!r}))\n"
    try:
        done = subprocess.run(
            [unshare, *UNSHARE, sys.executable, "-c", "import sys; exec(sys.stdin.read())"],
            input=program, capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired) as err:
        return f"unshare failed ({err})"
    if done.returncode != 0 or not done.stdout.rstrip().endswith(" 1"):
        why = (done.stderr.strip().splitlines() or [done.stdout.strip() or "refused"])[-1]
        return f"unshare with user, PID, mount, cgroup and network namespaces is refused ({why})"
    return ""


@lru_cache(maxsize=1)
def _cgroups() -> str:
    from labs.course.cgroups import Box, layout

    where, why = layout()
    if where is None:
        return why
    try:
        box = Box(where, 2**28, 16, 0.5)
    except OSError as err:
        return f"cannot create a cgroup under {next(iter(where.own.values()))} ({err})"
    try:
        done = subprocess.run([sys.executable, "-I", "-S", "-c", ENTER, *box.procs, "--",
                               sys.executable, "-I", "-S", "-c", "pass"],
                              capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
        err = done.stderr.strip().splitlines()[-1:] if done.returncode else []
    finally:
        box.remove()
    return f"cannot join a cgroup ({err[0]})" if err else ""


def protections(isolate: bool = True, cgroups: bool = True) -> dict[str, str]:
    """Each protection (:data:`NAMESPACED` + :data:`LIMITED`) -> ``""`` if on here, else why not."""
    ns = "turned off by --no-isolation" if not isolate else _namespaces()
    cg = "turned off by the caller" if not cgroups else _cgroups()
    return {**dict.fromkeys(NAMESPACED, ns), **dict.fromkeys(LIMITED, cg)}


def report(isolate: bool = True, cgroups: bool = True) -> tuple[str, list[str]]:
    """``(note, off)``: one line for the grader's output ("" when all is on), and the names of
    the protections that are off (for machine-readable results)."""
    state = protections(isolate, cgroups)
    off = [name for name, why in state.items() if why]
    if not off:
        return "", []
    parts = []
    if set(NAMESPACED) <= set(off):
        parts.append(
            f"no file-system allow-list, network, process or system-call isolation "
            f"({state['filesystem']}): a submission can read what the grader's user can, write "
            "where it may, reach the network and signal other processes"
        )
    if set(LIMITED) <= set(off):
        parts.append(
            f"no cgroup limits ({state['memory']}): memory is limited per process only "
            "(RLIMIT_DATA; shared memory and files in /tmp are not counted), processes are not, "
            "and neighbours share the CPU (time limits count the submission's own CPU time where "
            "namespaces allow it, wall-clock time otherwise)"
        )
    return "protections off here: " + "; ".join(parts), off


def isolation_available() -> str:
    """``""`` when the namespaces of the sandbox work here, else why not (one line)."""
    return _namespaces()
