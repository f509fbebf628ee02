"""What a sealed grading kernel can see: its root file system, built from nothing (an allow-list).

:func:`plan` lists the steps :mod:`labs.course.jail` takes, inside the kernel's fresh namespaces,
to build its root on an empty ``tmpfs`` before ``pivot_root``.  The kernel then sees only

* **read-only**: the Python prefixes it runs on (``sys.prefix``, ``sys.base_prefix``, the
  environment's ``site-packages``), the system's programs and libraries (``/usr/bin``,
  ``/usr/lib``, ``/usr/lib64`` and the ``/bin``, ``/lib``, ``/lib64`` links, the dynamic loader's
  cache, the time zones), and ``/grade/labs``, a *copy* of the ``labs`` package the grader gives
  it (copied in, so no host path of it is mounted; any other ``labs`` in those prefixes is covered
  by an empty folder);
* **read-write**: ``/sandbox``, one private ``tmpfs`` of :data:`TMPFS_LIMIT` bytes (inside the
  kernel's memory limit where cgroups are available), holding its work folder, ``HOME``, ``/tmp``
  (also ``/var/tmp``), ``/dev/shm`` and the sockets it talks to the grader through (``/ipc``);
* ``/dev/null``, ``zero``, ``full``, ``random``, ``urandom`` (and a GPU's device files where the
  machine has one), its own ``/proc`` (its own processes only), a generated ``/etc`` (``passwd``,
  ``group``, ``hosts``).

Nothing else exists in it: no home folders, no other checkout or answer key, no class folder, no
other kernel's sockets, no launcher; ``/proc/self/mountinfo`` names only the allowed host folders.
"""

from __future__ import annotations

import glob
import os
import sys
from pathlib import Path

__all__ = ["GRADE", "BOX", "WORK", "HOME", "IPC", "HOSTNAME", "TMPFS_LIMIT", "plan",
           "allowed_folders"]  # fmt: skip

GRADE = "/grade"  #: read-only; holds the kernel's copy of ``labs`` (first on ``PYTHONPATH``)
BOX = "/sandbox"  #: the one writable tmpfs
WORK, HOME, IPC = f"{BOX}/work", f"{BOX}/home", "/ipc"  #: working folder, HOME, the sockets
HOSTNAME = "sandbox"  #: the kernel's host name (its own UTS namespace: not the machine's)
TMPFS_LIMIT = 2**30  #: bytes the kernel may write (all files together, /dev/shm included)
SYSTEM = ("/usr/bin", "/usr/lib", "/usr/lib32", "/usr/lib64", "/usr/libx32", "/usr/share/zoneinfo",
          "/bin", "/lib", "/lib32", "/lib64", "/libx32")  # fmt: skip
DEVICES = ("null", "zero", "full", "random", "urandom")
GPU_DEVICES = ("/dev/nvidia*", "/dev/nvidia-caps/*", "/dev/dri/*")
ETC = {
    "passwd": f"root:x:0:0:root:{HOME}:/bin/sh\nnobody:x:65534:65534:nobody:/:/usr/sbin/nologin\n",
    "group": "root:x:0:\nnogroup:x:65534:\n",
    "hosts": f"127.0.0.1 localhost {HOSTNAME}\n::1 localhost\n",  # gloo resolves its host name
    "nsswitch.conf": "passwd: files\ngroup: files\nhosts: files\n",
}


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def allowed_folders() -> list[str]:
    """Host folders (resolved) the kernel may read: Python's prefixes, site-packages, the system."""
    python = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    python |= {p for p in sys.path if p and ("site-packages" in p or "dist-packages" in p)}
    found = {os.path.realpath(p) for p in python if os.path.isdir(p)}
    if "/" in found:
        raise RuntimeError("the grader's Python lives at / : the sandbox cannot allow-list it")
    found |= {p for p in SYSTEM if os.path.isdir(p) and not os.path.islink(p)}
    out = sorted(found, key=len)
    return [p for i, p in enumerate(out) if not any(_inside(p, q) for q in out[:i])]


def _site_folders(folders: list[str]) -> list[str]:
    """Every site-packages or dist-packages folder inside the allowed folders."""
    found = {os.path.realpath(p) for p in sys.path if p and "-packages" in p}
    for f in folders:
        found |= {os.path.realpath(p) for p in glob.glob(f"{f}/lib*/python3*/*-packages")}
        found |= {os.path.realpath(p) for p in glob.glob(f"{f}/python3*/*-packages")}
    return sorted(p for p in found if os.path.isdir(p) and any(_inside(p, f) for f in folders))


def plan(labs_root: str | Path, hide=(), tmpfs: int = TMPFS_LIMIT) -> list[list]:
    """The steps that build the kernel's root (relative to it), as JSON-ready lists.

    Steps: ``["dir", path, mode]``, ``["bind", host, path]`` (read-only), ``["dev", host, path]``
    (a device file), ``["alias", path, path]`` (a folder of the new root shown elsewhere too), ``["link", target, path]``, ``["file", path, text]``, ``["copy", host,
    path]`` (a package, copied), ``["tmpfs", path, bytes, mode]``, ``["cover", path]`` (an empty
    read-only folder over it) and ``["proc", path]``.

    Args:
        labs_root: a folder holding the ``labs`` package the kernel imports (copied in).
        hide: folders that must stay invisible: a plan that would show one raises (an allowed
            folder inside a hidden one shows only itself: the venv of a hidden checkout).
        tmpfs: bytes of the writable ``/sandbox``.
    """
    labs = os.path.realpath(Path(labs_root) / "labs")
    if not os.path.isfile(os.path.join(labs, "__init__.py")):
        raise FileNotFoundError(f"no labs package in {labs_root} (expected labs/__init__.py)")
    folders = allowed_folders()
    hidden = [os.path.realpath(h) for h in hide]
    for f in folders:
        bad = [h for h in hidden if _inside(h, f)]
        if bad:
            raise RuntimeError(
                f"the sandbox would show {bad[0]}: it is inside {f}, which Python needs"
            )
    steps: list[list] = [["dir", p, 0o755] for p in ("/etc", "/dev", "/var", GRADE, BOX, IPC)]
    for name in ("/bin", "/lib", "/lib32", "/lib64", "/libx32", "/sbin"):
        if os.path.islink(name):
            steps.append(["link", os.readlink(name), name])
    # a folder under /tmp (a checkout or its venv there) is bound after the private /tmp covers it
    late = [f for f in folders if any(_inside(f, t) for t in ("/tmp", "/var/tmp", "/dev/shm"))]
    steps += [["bind", f, f] for f in folders if f not in late]
    for logical in {sys.prefix, sys.base_prefix, os.path.dirname(sys.executable)}:
        real = os.path.realpath(logical)  # a symbolic link on the way to Python: the same inside
        if logical != real and not any(_inside(logical, f) for f in folders):
            steps.append(["link", real, os.path.abspath(logical)])
    for site in _site_folders(folders):
        if os.path.isdir(os.path.join(site, "labs")):  # another labs (with its references)
            steps.append(["cover", os.path.join(site, "labs")])
    steps += [["bind", "/etc/ld.so.cache", "/etc/ld.so.cache"]] * os.path.isfile("/etc/ld.so.cache")
    if os.path.islink("/etc/localtime"):
        steps.append(["link", os.readlink("/etc/localtime"), "/etc/localtime"])
    steps += [["file", f"/etc/{name}", text] for name, text in ETC.items()]
    steps.append(["copy", labs, f"{GRADE}/labs"])
    steps.append(["tmpfs", BOX, tmpfs, 0o755])
    for sub in ("work", "home", "tmp", "shm", "ipc"):
        steps.append(["dir", f"{BOX}/{sub}", 0o1777 if sub in ("tmp", "shm") else 0o700])
    steps += [["alias", f"{BOX}/tmp", "/tmp"], ["alias", f"{BOX}/tmp", "/var/tmp"]]
    steps += [["alias", f"{BOX}/ipc", IPC], ["proc", "/proc"]]
    devices = [f"/dev/{d}" for d in DEVICES] + sorted(
        p for pattern in GPU_DEVICES for p in glob.glob(pattern) if not os.path.isdir(p)
    )
    steps += [["dev", d, d] for d in devices if os.path.exists(d)]
    if len(devices) > len(DEVICES):  # a GPU: its driver reads the PCI tree (read-only)
        steps += [["bind", p, p] for p in ("/sys/bus", "/sys/devices", "/sys/module")]
    steps.append(["alias", f"{BOX}/shm", "/dev/shm"])
    for name, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"),
                         ("stdout", "/proc/self/fd/1"), ("stderr", "/proc/self/fd/2")):  # fmt: skip
        steps.append(["link", target, f"/dev/{name}"])
    return steps + [["bind", f, f] for f in late]
