"""Two things the sandbox needs where the machine gives it no cgroup or no namespace.

:func:`remove_tree` deletes a kernel's folder however deep it grew (``shutil.rmtree`` recurses and
dies of ``RecursionError`` under a few thousand nested folders; the red team of issue 35 left
1.1 GiB that way), never following a symbolic link out of it.  :func:`box_cpu_seconds` adds up
the CPU time of every process in a kernel's PID namespace, the measure of its own time where no
cgroup counts it.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

__all__ = ["remove_tree", "box_cpu_seconds"]


def remove_tree(path: str | Path) -> None:
    """Delete ``path`` and everything under it, iteratively, through directory descriptors.

    One descriptor is open at a time (so depth is not limited by ``RLIMIT_NOFILE`` or
    ``PATH_MAX``); folders made unreadable are made readable again first; symbolic links are
    removed, never followed.  A ``path`` that does not exist is not an error.
    """
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        return
    except NotADirectoryError:
        os.unlink(path)
        return
    names: list[str] = []  # the folders between path and fd
    while True:
        try:
            os.fchmod(fd, stat.S_IRWXU)  # a folder made read-only inside: ours to empty
        except OSError:
            pass
        sub = None
        with os.scandir(fd) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    sub = entry.name
                    break
                os.unlink(entry.name, dir_fd=fd)
        if sub is not None:
            try:
                child = os.open(sub, flags, dir_fd=fd)
            except PermissionError:
                os.chmod(sub, stat.S_IRWXU, dir_fd=fd, follow_symlinks=False)
                continue
            os.close(fd)
            fd, names = child, [*names, sub]
            continue
        if not names:
            os.close(fd)
            os.rmdir(path)
            return
        parent = os.open("..", flags, dir_fd=fd)
        os.close(fd)
        fd = parent
        os.rmdir(names.pop(), dir_fd=fd)


def box_cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of every process in ``pid``'s PID namespace (and of the children
    they reaped); ``None`` where ``/proc`` cannot tell."""
    try:
        ns = os.readlink(f"/proc/{pid}/ns/pid")
        tick = os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError):
        return None
    total = 0
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            if os.readlink(f"/proc/{entry.name}/ns/pid") != ns:
                continue
            fields = Path(f"/proc/{entry.name}/stat").read_text().rpartition(")")[2].split()
        except OSError:
            continue
        total += sum(int(f) for f in fields[11:15])  # utime, stime, cutime, cstime
    return total / tick
