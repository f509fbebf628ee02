"""Run an unmodified ``torch.distributed`` script on emulated ranks, like ``torchrun``.

    python -m labs.dist.run --nproc_per_node 4 my_script.py [args...]

starts 4 emulated ranks (threads of this process, see :func:`labs.dist.launch`); each runs
``my_script.py`` as ``__main__``.  While the script runs, the functions of ``torch.distributed``
that the emulator provides (``init_process_group``, ``get_rank``, ``all_reduce``,
``batch_isend_irecv``, the object collectives, ...) are replaced by those of :mod:`labs.dist`, so
the script needs no edit; they are restored afterwards.  Once a rank has called
``init_process_group``, it has a real process group of the emulated backend
(:mod:`labs.dist.backend`) and torch's own functions run again (all but :data:`ALWAYS`): what
they return is what PyTorch's modules expect (DDP's comm hooks call ``get_future()``, FSDP2
waits on torch ``Work`` objects).  As with ``torchrun --tee 3``, every
line a rank prints is prefixed with ``[default<rank>]:`` (one rank's lines stay in order; the
ranks' outputs are printed one after the other when the run ends).

Each rank has its own torch, numpy and ``random`` state (``launch(..., per_rank_rng=True)``),
starting from a seed of its own as a torchrun process does (rank ``r``'s is derived from
this process's ``torch.initial_seed()`` and ``r``, see :mod:`labs.dist._rng`), so
``torch.manual_seed(rank)`` gives the numbers it gives under torchrun, and its own
``os.environ`` with the variables torchrun sets (``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE``,
``LOCAL_WORLD_SIZE``, ``MASTER_ADDR``, ...; see :mod:`labs.dist._env`).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import io
import os
import runpy
import sys
import threading
import warnings
from collections.abc import Iterator
from typing import Any

import torch.distributed as tdist

from . import _emulator as _emu
from . import _env
from ._emulator import DistError

# torch.distributed names that labs.dist implements with torch's signature
PATCHED = (
    "init_process_group", "destroy_process_group", "is_initialized", "is_available",
    "get_rank", "get_world_size", "get_backend", "new_group", "new_subgroups",
    "new_subgroups_by_enumeration", "get_process_group_ranks", "get_global_rank",
    "get_group_rank", "barrier", "monitored_barrier", "send", "recv", "isend", "irecv",
    "P2POp", "batch_isend_irecv", "broadcast", "all_reduce", "reduce", "all_gather",
    "all_gather_into_tensor", "gather", "scatter", "reduce_scatter", "reduce_scatter_tensor",
    "all_to_all", "all_to_all_single", "all_gather_object", "broadcast_object_list",
    "gather_object", "scatter_object_list", "send_object_list", "recv_object_list",
    "all_gather_single", "reduce_scatter_single",
)  # fmt: skip
# names torch 2.13 deprecates: the patched versions warn as torch does, then run
DEPRECATED = {
    "all_gather_into_tensor": "all_gather_single",
    "reduce_scatter_tensor": "reduce_scatter_single",
}


def _deprecated(name: str, new: str, fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        warnings.warn(
            f"`torch.distributed.{name}` is deprecated. Please use `torch.distributed.{new}` "
            "instead.",
            FutureWarning,
            stacklevel=2,
        )
        return fn(*args, **kwargs)

    return wrapper


# the names whose labs.dist version still adds something once torch's process group exists
ALWAYS = ("init_process_group", "get_backend", "monitored_barrier", "P2POp", "batch_isend_irecv")


def _torch_group_ready() -> bool:
    """True on an emulated rank whose torch default process group exists (labs.dist.backend),
    and on a thread that belongs to no rank (torch's own function is then the right one)."""
    ctx = _emu.current()
    if ctx is None:
        return True
    w = ctx.c10d_world
    return w is not None and w.default_pg is not None


def _plain_before_init() -> bool:
    """True on a rank of a plain program (:func:`run_script`) outside ``init_process_group`` ..
    ``destroy_process_group``: there torch's own functions answer, as under torchrun
    (``is_initialized()`` is False, a collective raises torch's ``ValueError``)."""
    ctx = _emu.current()
    return ctx is not None and ctx.plain and not _torch_group_ready()


def _by_state(name: str, ours, theirs):
    """Before ``init_process_group``, ``labs.dist``'s function; after it, torch's own, which
    reaches the rank's process group of the emulated backend (:mod:`labs.dist.backend`): its
    work handles are torch's, as PyTorch's modules (DDP comm hooks, FSDP2) expect."""

    @functools.wraps(theirs)
    def wrapper(*args, **kwargs):
        use_torch = _torch_group_ready() or _emu.current().plain
        return (theirs if use_torch else ours)(*args, **kwargs)

    wrapper.__name__ = name
    return wrapper


def _on_ranks(name: str, ours, theirs):
    """``labs.dist``'s function on emulated ranks; torch's own on any other thread (a thread
    that belongs to no rank must not reach the emulator, nor loop back through this patch)."""
    if isinstance(theirs, type):  # P2POp: a class, and labs.dist's subclasses torch's
        return ours

    @functools.wraps(theirs)
    def wrapper(*args, **kwargs):
        use_torch = _emu.current() is None or (
            name != "init_process_group" and _plain_before_init()
        )
        return (theirs if use_torch else ours)(*args, **kwargs)

    wrapper.__name__ = name
    return wrapper


@contextlib.contextmanager
def patched_torch_distributed() -> Iterator[None]:
    """Replace the :data:`PATCHED` functions of ``torch.distributed`` by ``labs.dist``'s (only
    :data:`ALWAYS` once the rank's torch process group exists, see :func:`_by_state`)."""
    from labs import dist

    saved = {name: getattr(tdist, name) for name in PATCHED if hasattr(tdist, name)}
    saved["TCPStore"] = tdist.TCPStore
    try:
        tdist.TCPStore = TCPStore
        for name in PATCHED:
            if not hasattr(tdist, name):
                continue
            ours = getattr(dist, name)
            if name in DEPRECATED and hasattr(tdist, DEPRECATED[name]):  # torch warns too
                ours = _deprecated(name, DEPRECATED[name], ours)
            if name not in ALWAYS:
                ours = _by_state(name, ours, saved[name])
            else:
                ours = _on_ranks(name, ours, saved[name])
            setattr(tdist, name, ours)
        yield
    finally:
        for name, f in saved.items():
            setattr(tdist, name, f)


class TCPStore(tdist.TCPStore):
    """torch's ``TCPStore``, for programs that build their own store (``init_process_group(
    store=...)``).  On an emulated rank the calls that wait for other ranks (the constructor,
    which waits for the clients or the server, ``get`` and ``wait``) give up the rank's turn
    while they wait, so the other ranks can get there (they are threads taking turns)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        _turn_free(super().__init__, *args, **kwargs)

    def get(self, *args: Any, **kwargs: Any) -> Any:
        return _turn_free(super().get, *args, **kwargs)

    def wait(self, *args: Any, **kwargs: Any) -> Any:
        return _turn_free(super().wait, *args, **kwargs)


def _turn_free(call: Any, *args: Any, **kwargs: Any) -> Any:
    """``call(*args, **kwargs)``, letting the other ranks run meanwhile (on a rank's thread)."""
    ctx = _emu.current()
    if ctx is None or not ctx.has_baton or threading.get_ident() != ctx.thread:
        return call(*args, **kwargs)
    ctx.world.give_baton(ctx)
    try:
        return call(*args, **kwargs)
    finally:
        ctx.world.take_baton(ctx)


class _RankStdout(io.TextIOBase):
    """A ``sys.stdout`` that collects what each emulated rank prints, by rank."""

    def __init__(self, real, world_size: int):
        self.real = real
        self.parts: list[list[str]] = [[] for _ in range(world_size)]
        self.lock = threading.Lock()

    def write(self, s: str) -> int:
        ctx = _emu.current()
        if ctx is None:
            return self.real.write(s)
        with self.lock:
            self.parts[ctx.rank].append(s)
        return len(s)

    def flush(self) -> None:
        self.real.flush()

    @property
    def encoding(self) -> str:  # what the rank's bytes are decoded with (sys.stdout's)
        return getattr(self.real, "encoding", None) or "utf-8"

    @property
    def errors(self) -> str:
        return getattr(self.real, "errors", None) or "strict"

    @property
    def buffer(self) -> _RankBytes:
        """``sys.stdout.buffer``: bytes written here are decoded and kept with the rank's text
        (``fileno()`` stays unsupported: a rank has no file descriptor of its own)."""
        return _RankBytes(self)

    def lines(self, rank: int) -> list[str]:
        return "".join(self.parts[rank]).splitlines()


class _RankBytes(io.RawIOBase):
    """The binary side of :class:`_RankStdout` (``sys.stdout.buffer.write(b"...")``)."""

    def __init__(self, text: _RankStdout):
        self.text = text

    def writable(self) -> bool:
        return True

    def write(self, b: Any) -> int:
        data = bytes(b)
        self.text.write(data.decode(self.text.encoding, "replace"))
        return len(data)

    def flush(self) -> None:
        self.text.flush()


def _plain_rank(path: str, module: bool) -> None:
    """One rank of a plain program: torch's process-group life cycle applies to it."""
    _emu.current().plain = True
    if module:  # python -m labs.dist.run ... -m package.module
        runpy.run_module(path, run_name="__main__")
    else:
        runpy.run_path(path, run_name="__main__")


def run_script(path: str, nproc: int, argv: list[str] | None = None, timeout: float = 600.0,
               prefix: bool = True, module: bool = False) -> list[list[str]]:  # fmt: skip
    """Run the script at ``path`` on ``nproc`` emulated ranks; return each rank's printed lines
    (and print them, prefixed ``[default<rank>]:``, when ``prefix``).  ``module``: ``path`` is
    a module name, run as ``python -m`` runs it (``sys.path[0]`` the current folder)."""
    from labs import dist

    out = _RankStdout(sys.stdout, nproc)
    old_argv, old_stdout, old_path = sys.argv, sys.stdout, list(sys.path)
    sys.argv = [path, *(argv or [])]
    sys.stdout = out
    # the script's folder first on sys.path, as for ``python script.py`` (a sibling imports)
    sys.path[:1] = [os.getcwd() if module else os.path.dirname(os.path.abspath(path))]
    try:
        with patched_torch_distributed(), _env.rank_environ(nproc):
            dist.launch(_plain_rank, nproc, path, module, timeout=timeout, per_rank_rng=True)
    finally:
        sys.argv, sys.stdout = old_argv, old_stdout
        sys.path[:] = old_path
        lines = [out.lines(r) for r in range(nproc)]
        if prefix:
            for r, ls in enumerate(lines):
                for line in ls:
                    print(f"[default{r}]:{line}")
    return lines


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m labs.dist.run", description=__doc__.split("\n")[0])
    ap.add_argument("--nproc_per_node", "--nproc-per-node", type=int, required=True)
    ap.add_argument(
        "--standalone",
        action="store_true",
        help="accepted for torchrun's command line (emulated ranks are one node)",
    )
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds for the whole run")
    ap.add_argument(
        "-m",
        "--module",
        action="store_true",
        help="the script is a module name, run as python -m runs it (torchrun's -m)",
    )
    ap.add_argument("script")
    ap.add_argument("args", nargs=argparse.REMAINDER)
    a = ap.parse_args(argv)
    try:
        run_script(a.script, a.nproc_per_node, a.args, a.timeout, module=a.module)
    except DistError as err:
        if not hasattr(err, "exitcode"):
            raise
        # a rank called sys.exit(code) with code not 0/None: torchrun reports the rank's exit
        # code and exits 1
        print(f"{a.script} FAILED: rank {err.rank} exitcode {err.exitcode!r}", file=sys.stderr)
        raise SystemExit(1) from None


if __name__ == "__main__":
    main()
