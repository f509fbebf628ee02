"""Seal a grading kernel in Linux namespaces before it starts (run inside ``unshare -rnmpf``).

:mod:`labs.course.sandbox` starts every kernel as
``unshare --user --map-root-user --net --mount --pid --fork --kill-child --mount-proc python
launcher.py``; the launcher runs :func:`seal` (this file's text) and then ``ipykernel``.  In its
own namespaces the kernel then has

* **processes**: its own PID namespace: it is PID 1, sees no other process, and every process it
  starts (double-forked and ``setsid()`` ones too) dies with it; it cannot signal the grader;
* **network**: only a loopback interface (servers on 127.0.0.1 work, nothing else is reachable,
  abstract Unix sockets of other kernels are in other namespaces);
* **files**: the whole file system read-only (``mount_setattr(AT_RECURSIVE, MOUNT_ATTR_RDONLY)``,
  Linux 5.12+); empty size-limited ``tmpfs`` over ``/tmp``, ``/var/tmp``, ``/dev/shm``, the home
  folder, the repository (book, solutions, keys, tests, git history, ``_build``), the class
  folders and the grader's working folder; only its own sandbox folder writable (with a private
  ``tmpfs`` work folder, temporary folder and home) and Python read-only;
* **limits**: ``RLIMIT_DATA`` (memory: heap and private writable mappings, which numpy and
  torch allocate on the host; unlike ``RLIMIT_AS`` it leaves CUDA's address-space reservations
  alone, so GPU kernels still start), ``RLIMIT_FSIZE`` (file size), ``RLIMIT_NOFILE``,
  ``RLIMIT_NPROC`` (enforced for non-root users) and no core dumps;
* a nested user + mount namespace that locks those mounts (the kernel cannot unmount them).

Everything here uses the C library through :mod:`ctypes`; any failure raises, and the grader then
reports the sandbox as not isolated rather than running half-sealed.
"""

import ctypes
import os
import socket
import struct

MS_NOSUID, MS_NODEV, MS_BIND, MS_REC = 2, 4, 4096, 16384
MOUNT_ATTR_RDONLY, AT_RECURSIVE, SYS_MOUNT_SETATTR = 0x1, 0x8000, 442
_libc = ctypes.CDLL(None, use_errno=True) if os.name == "posix" else None


class _MountAttr(ctypes.Structure):
    _fields_ = [(n, ctypes.c_uint64) for n in ("attr_set", "attr_clr", "propagation", "userns")]


def _check(ret, what):
    if ret != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _mount(src, target, fstype, flags, data=None):
    enc = lambda s: s.encode() if s is not None else None  # noqa: E731
    _check(_libc.mount(enc(src), enc(target), enc(fstype), flags, enc(data)), f"mount {target}")


def _setattr(path, set_=0, clear=0, recursive=False):
    attr = _MountAttr(set_, clear, 0, 0)
    flags = AT_RECURSIVE if recursive else 0
    ret = _libc.syscall(SYS_MOUNT_SETATTR, -100, path.encode(), flags, ctypes.byref(attr),
                        ctypes.sizeof(attr))  # fmt: skip
    _check(ret, f"mount_setattr {path}")


def _loopback_up():
    import fcntl

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        ifreq = fcntl.ioctl(s, 0x8913, struct.pack("16sh", b"lo", 0))  # SIOCGIFFLAGS
        flags = struct.unpack("16sh", ifreq)[1]
        fcntl.ioctl(s, 0x8914, struct.pack("16sh", b"lo", flags | 0x1))  # SIOCSIFFLAGS, IFF_UP


def _inside(path, folders):
    return any(path == f or path.startswith(f.rstrip("/") + "/") for f in folders)


def seal(box, cover, readable, limits, tmpfs_mb=1024):
    """Seal this process (PID 1 of fresh namespaces) for a grading kernel.

    Args:
        box: the sandbox folder (stays writable; ``work``, ``tmp`` and ``home`` become tmpfs).
        cover: folders to replace by empty read-only tmpfs (repository, home, class folders...).
        readable: folders under a covered one to bind back read-only (Python, site-packages).
        limits: ``{"data": bytes, "fsize": bytes, "nofile": n, "nproc": n}``.
        tmpfs_mb: size of each writable tmpfs.
    """
    _loopback_up()
    scratch = ["/tmp", "/var/tmp", "/dev/shm"]
    covered = [p for p in dict.fromkeys([*scratch, *cover]) if os.path.isdir(p)]
    covered = [p for p in covered if not any(c != p and _inside(p, [c]) for c in covered)]
    keep = [p for p in [box, *readable] if os.path.isdir(p) and _inside(p, covered)]
    fds = {p: os.open(p, os.O_PATH | os.O_DIRECTORY) for p in keep}
    _setattr("/", set_=MOUNT_ATTR_RDONLY, recursive=True)
    _setattr("/proc", clear=MOUNT_ATTR_RDONLY)  # the nested namespace below writes uid_map
    for path in sorted(covered, key=len):
        mode = "1777" if path in scratch else "0555"
        _mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV, f"size={tmpfs_mb}m,mode={mode}")
        if path not in scratch:
            _setattr(path, set_=MOUNT_ATTR_RDONLY)
    for path in sorted(keep, key=len):
        parent = max((c for c in covered if _inside(path, [c])), key=len)
        if parent not in scratch:
            _setattr(parent, clear=MOUNT_ATTR_RDONLY)
        os.makedirs(path, exist_ok=True)
        if parent not in scratch:
            _setattr(parent, set_=MOUNT_ATTR_RDONLY)
        _mount(f"/proc/self/fd/{fds[path]}", path, None, MS_BIND | MS_REC)
        os.close(fds[path])
    _setattr(box, clear=MOUNT_ATTR_RDONLY)
    for name in ("work", "tmp", "home"):
        os.makedirs(os.path.join(box, name), exist_ok=True)
        _mount("tmpfs", os.path.join(box, name), "tmpfs", MS_NOSUID | MS_NODEV,
               f"size={tmpfs_mb}m,mode=0700")  # fmt: skip
    pkg = os.path.join(box, "pkg")
    if os.path.isdir(pkg):  # the kernel's copy of labs: read-only too
        _mount(pkg, pkg, None, MS_BIND | MS_REC)
        _setattr(pkg, set_=MOUNT_ATTR_RDONLY, recursive=True)
    os.chdir(os.path.join(box, "work"))  # the old working folder is on the read-only mount
    # A nested user + mount namespace locks those mounts: the kernel cannot unmount them.
    _check(_libc.unshare(0x10000000 | 0x00020000), "nested unshare")  # NEWUSER | NEWNS
    for name, text in (("setgroups", "deny"), ("uid_map", "0 0 1"), ("gid_map", "0 0 1")):
        with open(f"/proc/self/{name}", "w") as f:
            f.write(text)
    limit(limits)


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
