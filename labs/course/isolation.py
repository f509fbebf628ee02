"""Whether the grading sandbox can be sealed here, and the settings every sealed kernel gets.

:func:`isolation_available` runs :func:`labs.course.jail.seal` once under ``unshare`` (user, PID,
mount and network namespaces) and says why not where it fails: macOS and Windows, a missing
``unshare`` (util-linux), containers or CI runners that forbid unprivileged user namespaces, Linux
before 5.12 (no ``mount_setattr``).  The grader then prints a ``note:`` and grades without those
namespaces (see the instructor guide for what that leaves open).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from functools import lru_cache
from pathlib import Path

__all__ = [
    "isolation_available", "UNSHARE", "ENV_ALLOW", "MEMORY_LIMIT", "FILE_LIMIT", "PROCESS_LIMIT",
    "OUTPUT_LIMIT", "JAIL", "LAUNCH",
]  # fmt: skip

#: The seal, read once when the grader starts (before any kernel could touch a file).
JAIL = Path(__file__).with_name("jail.py").read_text(encoding="utf-8")
LAUNCH = """
import json, sys
if {isolated!r}:
    seal(**json.loads({spec!r}))
else:  # no user namespace: RLIMIT_NPROC would count every process of the user, so not that
    limit(dict(json.loads({spec!r})["limits"], nproc=0))
sys.argv = ["ipykernel_launcher", *sys.argv[1:]]
from ipykernel import kernelapp

kernelapp.launch_new_instance()
"""
#: ``unshare`` options: own user (mapped to root), network, mount and PID namespaces; the kernel
#: is PID 1 of its namespace and is killed with ``unshare`` (``--kill-child``).
UNSHARE = ["--user", "--map-root-user", "--net", "--mount", "--pid", "--fork", "--kill-child",
           "--mount-proc"]  # fmt: skip
#: Variables a kernel may inherit from the grader (everything else is dropped).
ENV_ALLOW = (
    "PATH", "LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "LC_NUMERIC", "TZ", "OMP_NUM_THREADS",
    "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "TRITON_INTERPRET", "CUDA_VISIBLE_DEVICES",
    "NVIDIA_VISIBLE_DEVICES", "LD_LIBRARY_PATH", "SYSTEMROOT",
)  # fmt: skip
MEMORY_LIMIT = 6 * 2**30  #: bytes of heap and private memory per kernel process (RLIMIT_DATA)
FILE_LIMIT = 2**30  #: bytes per file a kernel may write (RLIMIT_FSIZE)
PROCESS_LIMIT = 512  #: processes (RLIMIT_NPROC; not enforced when grading as root)
OUTPUT_LIMIT = 64 * 2**20  #: characters of output per cell before the kernel is stopped


@lru_cache(maxsize=1)
def isolation_available() -> str:
    """``""`` when the namespaces of the sandbox work here, else why not (one line)."""
    if not sys.platform.startswith("linux"):
        return f"no network or filesystem isolation on {sys.platform} (needs Linux namespaces)"
    unshare = shutil.which("unshare")
    if unshare is None:
        return "no network or filesystem isolation: the unshare command is missing (util-linux)"
    with tempfile.TemporaryDirectory(prefix="labs-grade-probe-") as tmp:
        box, hidden = Path(tmp, "box"), Path(tmp, "hidden")
        box.mkdir()
        hidden.mkdir()
        Path(hidden, "secret").write_text("x")
        spec = {"box": str(box), "cover": [str(hidden)], "readable": [], "limits": {}}
        probe = (
            JAIL + f"\nseal(**{spec!r})\nimport os\n"
            f"print(not os.path.exists({str(hidden / 'secret')!r}), os.getpid())\n"
        )
        try:
            done = subprocess.run(
                [unshare, *UNSHARE, sys.executable, "-c", probe],
                capture_output=True, text=True, timeout=60, check=False,
            )  # fmt: skip
        except (OSError, subprocess.TimeoutExpired) as err:
            return f"no isolation: unshare failed ({err})"
    if done.returncode != 0 or done.stdout.split() != ["True", "1"]:
        why = (done.stderr.strip().splitlines() or [done.stdout.strip() or "refused"])[-1]
        return (
            f"no isolation: unshare with user, PID, mount and network namespaces is refused ({why})"
        )
    return ""
