"""The last step of sealing a kernel: no capabilities, ``no_new_privs``, a system-call filter.

:func:`confine` runs in the kernel (after :mod:`labs.course.jail` has built and locked its root,
before ``ipykernel`` starts; its text is handed to the kernel with the jail's).  Afterwards:

* **no capabilities**: the effective, permitted, inheritable, ambient and bounding sets are
  emptied and the secure bits locked (``SECBIT_NOROOT``), so that being uid 0 in its user
  namespace gives the kernel nothing, not even after ``execve``;
* ``no_new_privs``: no set-uid program or file capability can give any back;
* a **seccomp filter** answers these system calls with ``EPERM`` (``ENOSYS`` for ``clone3``, so
  that the C library falls back to ``clone``, whose flags the filter can read):

  - ``mount``, ``umount2``, ``pivot_root``, ``chroot``, ``mount_setattr``, ``move_mount``,
    ``open_tree``, ``fsopen``, ``fsconfig``, ``fsmount``, ``fspick``: no file system can be
    mounted, unmounted or made writable (the red team of issue 35 mounted a 16 GiB ``tmpfs``);
  - ``unshare``, ``setns`` and ``clone`` with any ``CLONE_NEW*`` flag: no new user namespace
    (in which the kernel would hold every capability again) or any other namespace;
  - ``ptrace``, ``process_vm_readv``/``writev``, ``kcmp``: no process reads or steers another;
  - ``bpf``, ``perf_event_open``, ``userfaultfd``, ``io_uring_*``: kernel interfaces with a long
    record of privilege escalations, which no lab needs;
  - ``keyctl``, ``add_key``, ``request_key``: the kernel keyrings are not namespaced;
  - ``name_to_handle_at``, ``open_by_handle_at``: file handles can reach files outside a mount;
  - ``kexec_*``, ``*_module``, ``reboot``, ``swapon``/``swapoff``, ``acct``, ``quotactl``,
    ``syslog``, ``lookup_dcookie``, ``iopl``/``ioperm``: administration of the host;

  and kills the process for a system call of another architecture (the 32-bit and x32 entry
  points of x86-64), whose numbers the filter does not check.

The limits cannot be raised either: raising a hard rlimit needs ``CAP_SYS_RESOURCE`` in the
host's user namespace, and the cgroup files are not in the kernel's file system at all.
"""

import ctypes
import os
import platform

AUDIT = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
BLOCKED = {  # name: (x86_64, aarch64)
    "mount": (165, 40), "umount2": (166, 39), "pivot_root": (155, 41), "chroot": (161, 51),
    "mount_setattr": (442, 442), "move_mount": (429, 429), "open_tree": (428, 428),
    "fsopen": (430, 430), "fsconfig": (431, 431), "fsmount": (432, 432), "fspick": (433, 433),
    "unshare": (272, 97), "setns": (308, 268), "ptrace": (101, 117),
    "process_vm_readv": (310, 270), "process_vm_writev": (311, 271), "kcmp": (312, 272),
    "bpf": (321, 280), "perf_event_open": (298, 241), "userfaultfd": (323, 282),
    "io_uring_setup": (425, 425), "io_uring_enter": (426, 426), "io_uring_register": (427, 427),
    "keyctl": (250, 219), "add_key": (248, 217), "request_key": (249, 218),
    "name_to_handle_at": (303, 264), "open_by_handle_at": (304, 265),
    "kexec_load": (246, 104), "kexec_file_load": (320, 294), "init_module": (175, 105),
    "finit_module": (313, 273), "delete_module": (176, 106), "reboot": (169, 142),
    "swapon": (167, 224), "swapoff": (168, 225), "acct": (163, 89), "quotactl": (179, 60),
    "quotactl_fd": (443, 443), "syslog": (103, 116), "lookup_dcookie": (212, 18),
    "iopl": (172, None), "ioperm": (173, None),
}  # fmt: skip
CLONE, CLONE3 = {"x86_64": 56, "aarch64": 220}, 435
CLONE_NEW = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000
EPERM, ENOSYS = 1, 38
RET_KILL, RET_ERRNO, RET_ALLOW = 0x80000000, 0x00050000, 0x7FFF0000
LD_ABS_W, JEQ, JGE, JSET, RET = 0x20, 0x15, 0x35, 0x45, 0x06  # BPF opcodes (with BPF_K)
PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, PR_CAPBSET_DROP, PR_SET_SECUREBITS = 38, 22, 24, 28
PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, SECCOMP_MODE_FILTER = 47, 4, 2
SECURE_BITS = 0x2F  # NOROOT, NO_SETUID_FIXUP and their locks; KEEP_CAPS locked off


class _Filter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_ushort), ("jt", ctypes.c_ubyte), ("jf", ctypes.c_ubyte),
                ("k", ctypes.c_uint32)]  # fmt: skip


class _Program(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_Filter))]


def program(machine=None):
    """The filter as ``[(code, jt, jf, k)]`` for ``machine`` (``platform.machine()``)."""
    machine = machine or platform.machine()
    if machine not in AUDIT:
        raise OSError(f"no system-call filter for {machine} (x86_64 and aarch64 only)")
    col = 0 if machine == "x86_64" else 1
    numbers = sorted({n[col] for n in BLOCKED.values() if n[col] is not None})
    prog = [(LD_ABS_W, 0, 0, 4), (JEQ, 1, 0, AUDIT[machine]), (RET, 0, 0, RET_KILL),
            (LD_ABS_W, 0, 0, 0)]  # fmt: skip
    if machine == "x86_64":  # x32 system calls (bit 30) carry the same architecture value
        prog += [(JGE, 0, 1, 0x40000000), (RET, 0, 0, RET_KILL)]
    for nr in numbers:
        prog += [(JEQ, 0, 1, nr), (RET, 0, 0, RET_ERRNO | EPERM)]
    prog += [(JEQ, 0, 1, CLONE3), (RET, 0, 0, RET_ERRNO | ENOSYS)]
    prog += [(JEQ, 0, 3, CLONE[machine]), (LD_ABS_W, 0, 0, 16),  # clone: its flags (low word)
             (JSET, 0, 1, CLONE_NEW), (RET, 0, 0, RET_ERRNO | EPERM)]  # fmt: skip
    prog.append((RET, 0, 0, RET_ALLOW))
    return prog


def _prctl(libc, *args):
    args = [ctypes.c_ulong(a) for a in args] + [ctypes.c_ulong(0)] * (5 - len(args))
    if libc.prctl(*args) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"prctl{tuple(a.value for a in args[:2])}: {os.strerror(err)}")


def drop_capabilities(libc):
    """Empty every capability set of this process and lock the secure bits."""
    _prctl(libc, PR_SET_SECUREBITS, SECURE_BITS)
    with open("/proc/sys/kernel/cap_last_cap") as f:
        last = int(f.read())
    for cap in range(last + 1):
        _prctl(libc, PR_CAPBSET_DROP, cap)
    _prctl(libc, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL)
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this process
    data = (ctypes.c_uint32 * 6)()  # effective, permitted, inheritable x 2 words: all zero
    if libc.capset(header, data) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"capset: {os.strerror(err)}")


def confine():
    """Drop capabilities, set ``no_new_privs`` and install the filter (for this process and all
    it starts; none of it can be undone)."""
    libc = ctypes.CDLL(None, use_errno=True)
    drop_capabilities(libc)
    _prctl(libc, PR_SET_NO_NEW_PRIVS, 1)
    prog = program()
    filters = (_Filter * len(prog))(*[_Filter(*f) for f in prog])
    fprog = _Program(len(prog), ctypes.cast(filters, ctypes.POINTER(_Filter)))
    if libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"seccomp: {os.strerror(err)}")
