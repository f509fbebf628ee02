"""Seal a grading kernel before it starts: its root from nothing, locked mounts, limits.

:mod:`labs.course.sandbox` starts every kernel as ``unshare --user --map-root-user --net --mount
--pid --cgroup --ipc --uts --fork --kill-child python -c ...`` (after joining the kernel's cgroups, see
:mod:`labs.course.cgroups`) and hands it, on its standard input, this file's text,
:mod:`labs.course.seccomp`'s and a call to :func:`main`: nothing is written to disk.  In its own
namespaces the kernel (PID 1 there) then

1. builds a new root on an empty ``tmpfs`` from the steps of :func:`labs.course.rootfs.plan`
   (read-only bind mounts of the allow-listed folders, a copy of ``labs``, one writable ``tmpfs``,
   device files, its own ``/proc``) and moves into it with ``pivot_root``; the host's root is
   unmounted, so nothing else of the host can be reached by any path;
2. brings up its own loopback interface (its network namespace has nothing else) and names
   itself ``sandbox`` (its own UTS namespace; ``/etc/hosts`` resolves the name, as ``gloo``
   needs);
3. enters a nested user and mount namespace, which *locks* every mount (read-only stays
   read-only, nothing can be unmounted to reveal what lies beneath, even with capabilities);
4. sets its rlimits (:func:`limit`), drops every capability, sets ``no_new_privs`` and installs
   the system-call filter (:func:`labs.course.seccomp.confine`);
5. starts ``ipykernel``, whose sockets live in ``/ipc`` (reached by the grader's relay through
   ``/proc/<pid>/root``, never through a host folder).

Everything here uses the C library through :mod:`ctypes`; any failure raises, the kernel exits,
and the grader reports the sandbox as not sealed rather than running half-sealed.
"""

import ctypes
import json
import os
import platform
import shutil
import socket
import struct
import sys

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_BIND, MS_REC, MS_PRIVATE = (
    1, 2, 4, 8, 4096, 16384, 1 << 18
)  # fmt: skip
ATTR_RDONLY, ATTR_NOSUID, ATTR_NODEV, ATTR_NOEXEC, AT_RECURSIVE = 0x1, 0x2, 0x4, 0x8, 0x8000
SYS_MOUNT_SETATTR = 442
SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41}.get(platform.machine(), -1)
CLONE_NEWNS, CLONE_NEWUSER, MNT_DETACH = 0x00020000, 0x10000000, 2
_libc = ctypes.CDLL(None, use_errno=True) if os.name == "posix" else None


class _MountAttr(ctypes.Structure):
    _fields_ = [(n, ctypes.c_uint64) for n in ("attr_set", "attr_clr", "propagation", "userns")]


def _check(ret, what):
    if ret != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _mount(src, target, fstype, flags, data=None):
    enc = lambda s: s.encode() if s is not None else None  # noqa: E731
    ret = _libc.mount(enc(src), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data))
    _check(ret, f"mount {target}")


def _setattr(path, set_=0, recursive=True):
    attr = _MountAttr(set_, 0, 0, 0)
    flags = AT_RECURSIVE if recursive else 0
    ret = _libc.syscall(SYS_MOUNT_SETATTR, -100, path.encode(), flags, ctypes.byref(attr),
                        ctypes.sizeof(attr))  # fmt: skip
    _check(ret, f"mount_setattr {path}")


def _target(path, is_dir):
    if is_dir:
        os.makedirs(path, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        if not os.path.lexists(path):
            os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o644))


def build(steps, stage="/tmp"):
    """Build the new root on a ``tmpfs`` at ``stage`` (see :func:`labs.course.rootfs.plan`)."""
    sources = {
        s[1]: os.open(s[1], os.O_PATH | os.O_CLOEXEC)
        for s in steps
        if s[0] in ("bind", "dev", "copy")
    }  # fmt: skip - opened before stage covers /tmp
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    _mount("tmpfs", stage, "tmpfs", MS_NOSUID | MS_NODEV, "size=64m,mode=0755")
    old = os.umask(0)
    try:
        for step in steps:
            kind = step[0]
            path = stage + step[2 if kind in ("bind", "dev", "alias", "link", "copy") else 1]
            if kind in ("dir", "tmpfs"):
                os.makedirs(path, exist_ok=True)
                if kind == "tmpfs":
                    data = f"size={step[2]},mode={step[3]:o}"
                    _mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV, data)
                os.chmod(path, step[-1] if kind == "dir" else step[3])
            elif kind in ("bind", "dev"):
                fd = sources[step[1]]
                _target(path, os.path.isdir(f"/proc/self/fd/{fd}"))
                _mount(f"/proc/self/fd/{fd}", path, None, MS_BIND | MS_REC)
                flags = ATTR_RDONLY | ATTR_NOSUID | (ATTR_NODEV if kind == "bind" else ATTR_NOEXEC)
                _setattr(path, flags)
            elif kind == "alias":
                _target(path, True)
                _mount(stage + step[1], path, None, MS_BIND)
            elif kind == "cover":
                _mount("tmpfs", path, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
                       "size=4k,mode=0555")  # fmt: skip
            elif kind == "link":
                os.makedirs(os.path.dirname(path), exist_ok=True)
                os.symlink(step[1], path)
            elif kind == "file":
                _target(path, False)
                with open(path, "w") as f:
                    f.write(step[2])
            elif kind == "copy":
                shutil.copytree(f"/proc/self/fd/{sources[step[1]]}", path, symlinks=True,
                                ignore=shutil.ignore_patterns("*.egg-info"))  # fmt: skip
            elif kind == "proc":
                _target(path, True)
                _mount("proc", path, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
            else:
                raise ValueError(f"unknown step {step!r}")
    finally:
        os.umask(old)
        for fd in sources.values():
            os.close(fd)
    os.chdir(stage)  # pivot_root(".", "."): the old root ends up on top, then is detached
    _check(_libc.syscall(SYS_PIVOT_ROOT, b".", b"."), "pivot_root")
    _check(_libc.umount2(b".", MNT_DETACH), "umount the old root")
    os.chdir("/")
    _setattr("/", ATTR_RDONLY | ATTR_NOSUID | ATTR_NODEV, recursive=False)


def loopback_up():
    """Bring up ``lo`` in the kernel's own network namespace (servers on 127.0.0.1 work)."""
    import fcntl

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        ifreq = fcntl.ioctl(s, 0x8913, struct.pack("16sh", b"lo", 0))  # SIOCGIFFLAGS
        flags = struct.unpack("16sh", ifreq)[1]
        fcntl.ioctl(s, 0x8914, struct.pack("16sh", b"lo", flags | 0x1))  # SIOCSIFFLAGS, IFF_UP


def lock():
    """A nested user + mount namespace: every mount above becomes locked (MNT_LOCK_*)."""
    _check(_libc.unshare(CLONE_NEWUSER | CLONE_NEWNS), "nested unshare")
    for name, text in (("setgroups", "deny"), ("uid_map", "0 0 1"), ("gid_map", "0 0 1")):
        with open(f"/proc/self/{name}", "w") as f:
            f.write(text)


def limit(limits):
    """Set the resource limits (also where no namespace is available; not on Windows)."""
    try:
        import resource
    except ImportError:  # Windows
        return
    for name, value in (("data", "RLIMIT_DATA"), ("fsize", "RLIMIT_FSIZE"),
                        ("nofile", "RLIMIT_NOFILE"), ("nproc", "RLIMIT_NPROC")):  # fmt: skip
        if limits.get(name) and hasattr(resource, value):
            soft, hard = resource.getrlimit(getattr(resource, value))
            want = limits[name] if hard == resource.RLIM_INFINITY else min(limits[name], hard)
            resource.setrlimit(getattr(resource, value), (want, want))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def main(spec):
    """Seal this process as ``spec`` says, then run ``ipykernel`` (or ``spec["then"]``)."""
    if spec["sealed"]:
        build(spec["steps"])
        loopback_up()
        socket.sethostname(spec.get("hostname", "sandbox"))  # its own UTS namespace
        with open(spec["connection"], "w") as f:
            json.dump(spec["kernel"], f)
        lock()
    else:
        os.makedirs(os.path.dirname(spec["connection"]), exist_ok=True)
        with open(spec["connection"], "w") as f:
            json.dump(spec["kernel"], f)
    null = os.open("/dev/null", os.O_RDWR)
    os.dup2(null, 0)
    os.close(null)
    os.chdir(spec["cwd"])
    limit(spec["limits"])
    if spec["sealed"]:
        confine()  # noqa: F821 - defined by labs.course.seccomp's text, run before this one
    import importlib

    importlib.invalidate_caches()  # the new root's folders appeared after Python started
    if spec.get("then"):
        exec(compile(spec["then"], "<probe>", "exec"), {})
        return
    sys.argv = ["ipykernel_launcher", "-f", spec["connection"]]
    from ipykernel import kernelapp

    kernelapp.launch_new_instance()
