"""Per-rank random state for emulated ranks (the default of :func:`labs.dist.launch`).

Under torchrun every rank is a process with its own random number generators, so a program
that calls ``torch.manual_seed(rank)`` gets one stream per rank.  Emulated ranks are threads of
one process and would share them.  So each rank gets its own (``per_rank_rng=False`` turns
this off):

* **torch**: ``torch.default_generator`` is one object in C++, used by every torch op, so only
  one rank at a time may run user code (the ranks pass a *baton*, see ``World.take_baton``),
  and at each hand-over the generator's state is saved for the rank that stops and restored
  for the rank that resumes (``get_state`` + ``set_state``: a few microseconds per switch,
  ``benchmarks/bench_allreduce.py`` measures it).  CUDA generators are not swapped:
  emulated ranks are meant for the CPU (under torchrun each process has its own anyway).
* **different starting states**: under torchrun every process starts from its own random seed,
  so a program that forgets to seed (or to broadcast its initial weights) gets a different
  ``nn.Linear`` on every rank.  Emulated ranks start different too: rank ``r``'s torch, numpy
  and ``random`` are seeded from :func:`rank_seed` (the launching thread's
  ``torch.initial_seed()`` and ``r``), so the ranks differ from each other, and a notebook that
  seeds torch before ``launch`` still gets the same numbers on every run (the launcher's
  generator is not consumed).
* **numpy.random** and **random**: their module-level functions (``np.random.seed``,
  ``np.random.rand``, ``random.random``, ...) are replaced, for the duration of the launch, by
  functions that call this rank's own ``RandomState`` / ``Random`` (threads that are not ranks
  keep the originals).  Code that bound a function before the launch
  (``from random import random``) keeps the shared one.

A rank that calls ``time.sleep`` gives up its turn while it sleeps (:func:`patched_sleep`), so
ranks that sleep to stand in for work still overlap in time, as processes do.  A rank that loops
in its own code, or blocks on something other than a ``labs.dist`` call, keeps the turn: the
others wait, and a timeout names the rank that has it.
"""

from __future__ import annotations

import contextlib
import hashlib
import random
import threading
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch

from . import _emulator as _emu

__all__ = ["RankRandom", "rank_seed", "patched_modules", "patched_sleep"]


def rank_seed(base: int, rank: int) -> int:
    """Rank ``rank``'s starting seed (a 63-bit int) for a launch whose caller's
    ``torch.initial_seed()`` is ``base``: distinct per rank, the same on every run."""
    digest = hashlib.blake2b(f"labs.dist/{base}/{rank}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") >> 1


_RANDOM_NAMES = [n for n in random.__all__
                 if getattr(getattr(random, n), "__self__", None) is random._inst]  # fmt: skip
_NUMPY_NAMES = ["seed"] + [  # np.random.seed is a function; the rest are bound methods
    n for n in dir(np.random.mtrand._rand)
    if not n.startswith("_") and callable(getattr(np.random, n, None))
    and getattr(getattr(np.random, n), "__self__", None) is np.random.mtrand._rand
]  # fmt: skip


class RankRandom:
    """One rank's random state: its torch generator state, ``random.Random``, ``RandomState``."""

    __slots__ = ("torch_state", "py", "np")

    def __init__(self, seed: int) -> None:
        self.torch_state = torch.Generator().manual_seed(seed).get_state()
        self.py = random.Random(seed)
        self.np = np.random.RandomState(seed % 2**32)

    def save(self) -> None:
        self.torch_state = torch.default_generator.get_state()

    def restore(self) -> None:
        torch.default_generator.set_state(self.torch_state)


def _dispatch(module_attr: str, name: str, original: Any):
    def f(*args: Any, **kwargs: Any) -> Any:
        ctx = _emu.current()
        if ctx is None or ctx.rng is None:
            return original(*args, **kwargs)
        return getattr(getattr(ctx.rng, module_attr), name)(*args, **kwargs)

    f.__name__ = f.__qualname__ = name
    f.__doc__ = original.__doc__
    return f


@contextlib.contextmanager
def patched_modules() -> Iterator[None]:
    """Route ``random.*`` and ``numpy.random.*`` calls of emulated ranks to their own state."""
    saved = [(random, n, getattr(random, n)) for n in _RANDOM_NAMES]
    saved += [(np.random, n, getattr(np.random, n)) for n in _NUMPY_NAMES]
    try:
        for mod, name, orig in saved:
            setattr(mod, name, _dispatch("py" if mod is random else "np", name, orig))
        yield
    finally:
        for mod, name, orig in saved:
            setattr(mod, name, orig)


_real_sleep = time.sleep


def _sleep(secs: float) -> None:
    ctx = _emu.current()
    if ctx is None or not ctx.has_baton or threading.get_ident() != ctx.thread:
        return _real_sleep(secs)  # not a rank, or a thread the rank started (_rank_threads.py)
    ctx.world.give_baton(ctx)  # let the other ranks run meanwhile
    try:
        _real_sleep(secs)
    finally:
        ctx.world.take_baton(ctx)


@contextlib.contextmanager
def patched_sleep() -> Iterator[None]:
    """Make ``time.sleep`` in an emulated rank give up the rank's turn while it sleeps."""
    time.sleep = _sleep
    try:
        yield
    finally:
        time.sleep = _real_sleep
