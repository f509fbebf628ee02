"""Start emulated ranks on threads, wait for them, and turn failures into one exception."""

from __future__ import annotations

import ctypes
import threading
import time
from collections.abc import Callable
from typing import Any

import torch

from . import _emulator, _rng, _torch_world
from ._emulator import DistError, DistTimeoutError, World, _Abort, _tls
from ._rank import RankContext
from ._sched import batch_scheduling

__all__ = ["run"]


def _async_raise(thread: threading.Thread) -> None:
    """Ask ``thread`` to raise ``_Abort`` at its next Python bytecode (best effort)."""
    if thread.ident is not None and thread.is_alive():
        ctypes.pythonapi.PyThreadState_SetAsyncExc(
            ctypes.c_ulong(thread.ident), ctypes.py_object(_Abort)
        )


def _rank_error(rank: int, err: BaseException) -> BaseException:
    """An exception of the same type as ``err`` whose message names the rank."""
    text = f"rank {rank} failed: {type(err).__name__}: {err}"
    if isinstance(err, SystemExit):  # keep the exit code: python -m labs.dist.run exits with it
        new = DistError(f"rank {rank} exited with code {err.code!r} (SystemExit)")
        new.rank, new.exitcode = rank, err.code  # type: ignore[attr-defined]
        return new
    try:
        new = type(err)(text)
        if new.args != (text,):
            raise TypeError
    except Exception:  # noqa: BLE001 - a type whose constructor takes other arguments
        new = DistError(text)
    new.rank = rank  # type: ignore[attr-defined]
    return new


def _settle_cuda_guard() -> None:
    """Install torch's no-op CUDA device guard once, on this thread, before any rank starts.

    A CUDA build of torch on a machine without a GPU (PyPI's default wheel on Linux, Colab's CPU
    runtime) swaps that guard in every time a ``FakeTensorMode`` is entered (DTensor and FSDP2
    do so for sharding propagation); ranks doing it at once on threads crashed torch 2.11
    (a segmentation fault). Done here first, the later swaps find it in place.
    """
    ensure = getattr(torch._C, "_ensureCUDADeviceGuardSet", None)
    if ensure is not None and torch.cuda._is_compiled() and not torch.cuda.is_available():
        ensure()


def run(fn: Callable[..., Any], world_size: int, args: tuple, kwargs: dict, timeout: float,
        per_rank_rng: bool = True):  # fmt: skip
    """Run ``fn(*args, **kwargs)`` on ``world_size`` threads; see :func:`labs.dist.launch`."""
    _settle_cuda_guard()
    if per_rank_rng:  # the ranks' torch states pass through the one global generator
        caller_state = torch.default_generator.get_state()
        try:
            with _rng.patched_modules(), _rng.patched_sleep():
                return _run(fn, world_size, args, kwargs, timeout, True)
        finally:
            torch.default_generator.set_state(caller_state)
    return _run(fn, world_size, args, kwargs, timeout, False)


def _run(fn, world_size, args, kwargs, timeout, serial):
    with _torch_world.installed():  # torch.distributed's tables per rank (_torch_world.py)
        return _run_ranks(fn, world_size, args, kwargs, timeout, serial)


def _run_ranks(fn, world_size, args, kwargs, timeout, serial):
    world = World(world_size, serial)
    base_seed = torch.initial_seed()  # the caller's seed: ranks differ, runs repeat
    results: list[Any] = [None] * world_size
    failures: dict[int, BaseException] = {}

    def body(rank: int) -> None:
        ctx = _tls.ctx = RankContext(world, rank)
        if world.cpus is not None:
            batch_scheduling()
        try:
            if serial:
                ctx.rng = _rng.RankRandom(_rng.rank_seed(base_seed, rank))
                world.take_baton(ctx)
            results[rank] = fn(*args, **kwargs)
        except _Abort:
            pass
        except SystemExit as err:  # sys.exit(0) / sys.exit(None) / exit(): a normal end
            if err.code not in (None, 0):  # as a process would exit: a failure with that code
                failures[rank] = err
                with world.lock:
                    world.fail(err)
        except BaseException as err:  # noqa: BLE001 - reported by launch
            failures[rank] = err
            with world.lock:
                world.fail(err)
        finally:
            if ctx.has_baton:
                world.give_baton(ctx)
            _tls.ctx = None
            try:
                world.finish(rank)
            except _Abort:  # an async abort that landed late
                world.finish(rank)

    threads = [
        threading.Thread(target=body, args=(r,), name=f"labs.dist-rank-{r}", daemon=True)
        for r in range(world_size)
    ]
    for t in threads:
        t.start()
    try:
        if not world.finished.wait(timeout):
            with world.lock:
                world.fail(
                    DistTimeoutError(
                        f"launch: the ranks did not finish within timeout={timeout:g} s:\n"
                        + world.describe_ranks()
                        + "\nA rank still 'running' is stuck in its own code (an endless loop?); "
                        "raise the timeout if the program is just slow."
                    )
                )
    except BaseException as err:  # KeyboardInterrupt in the main thread: stop every rank
        with world.lock:
            world.fail(err)
    _stop(threads, world, grace=0.5 if isinstance(world.error, DistTimeoutError) else 2.0)
    stuck = [t.name for t in threads if t.is_alive()]
    trace = _emulator.LAST_TRACE = world.trace
    err = world.error
    if err is None:
        return results, trace
    if stuck:
        note = f"threads {stuck} are stuck in C code and could not be stopped"
        err.args = (f"{err.args[0] if err.args else err}\n({note})",)
    rank = next((r for r, e in failures.items() if e is err), None)
    if rank is not None:
        raise _rank_error(rank, err) from err
    raise err


def _stop(threads: list[threading.Thread], world: World, grace: float) -> None:
    """Join every thread; after ``grace`` seconds interrupt those still running user code."""
    deadline = time.perf_counter() + grace
    for t in threads:
        t.join(max(0.0, deadline - time.perf_counter()))
    for _ in range(20):
        alive = [t for t in threads if t.is_alive()]
        if not alive:
            return
        for t in alive:
            _async_raise(t)
        with world.lock:
            world.wake()
        for t in alive:
            t.join(0.1)
