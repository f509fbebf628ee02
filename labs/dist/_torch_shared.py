"""torch's process-wide state that emulated ranks, threads of one process, would otherwise share.

Separate processes each have their own copy of every module global; threads share one.  Where a
PyTorch API keeps per-process state that a program changes on the way, the ranks get their own
copy while they run (:func:`install`, called by :func:`labs.dist._torch_world.installed`):

* ``sys.excepthook``: every ``init_process_group`` wraps it to prefix ``[rankN]:``; it is put
  back when the ranks finish (the main thread belongs to no rank);
* DTensor's table of custom op handlers (``OpDispatcher._custom_op_handlers``), which
  ``loss_parallel()`` and context parallel edit on entry and exit: per rank, so one rank leaving
  the context does not remove the handlers another rank is still using;
* ``torch.distributed.checkpoint``'s plan caches (class attributes of ``SavePlanner``, used by
  ``DefaultSavePlanner(enable_plan_caching=True)``): per rank;
* ``torch.distributed.checkpoint.async_save``'s executors: the thread executor runs ``save`` on
  a thread that belongs to no rank, the process executor in a process per rank that joins a
  gloo group of its own.  On an emulated rank both run the save on the rank's own thread before
  ``async_save`` returns (the future comes back done): the same files and the same metadata;
  only the overlap with the rank's next steps is lost.  Staging on a thread
  (``StagingOptions(use_async_staging=True)``) runs as in torch;
* torch's profiler (one per process): :mod:`._profiler`;
* threads a rank starts run as that rank: :mod:`._rank_threads`.

Modules that are not imported yet are patched when a rank imports them (an import hook active
while ranks run), so a launch that never uses DTensor or checkpoints does not pay for importing
them.
"""

from __future__ import annotations

import importlib.abc
import sys
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from . import _emulator as _emu
from . import _profiler, _rank_threads

__all__ = ["install", "uninstall"]


class _HandlersByRank:
    """Stands in for ``OpDispatcher._custom_op_handlers`` (a data descriptor on the class): each
    emulated rank reads and edits its own copy of the table (made from the process's on first
    use); outside the ranks, the process's own."""

    def __get__(self, obj: Any, owner: Any = None) -> Any:
        if obj is None:
            return self
        ctx = _emu.current()
        if ctx is None:
            return obj.__dict__["_custom_op_handlers"]
        table = ctx.dtensor_handlers
        if table is None:
            table = ctx.dtensor_handlers = dict(obj.__dict__["_custom_op_handlers"])
        return table

    def __set__(self, obj: Any, value: Any) -> None:
        ctx = _emu.current()
        if ctx is None or "_custom_op_handlers" not in obj.__dict__:  # or OpDispatcher() itself
            obj.__dict__["_custom_op_handlers"] = value
        else:
            ctx.dtensor_handlers = value


def _patch_dtensor(module: Any) -> Callable[[], None]:
    cls = module.OpDispatcher
    cls._custom_op_handlers = _HandlersByRank()

    def undo() -> None:
        if isinstance(cls.__dict__.get("_custom_op_handlers"), _HandlersByRank):
            del cls._custom_op_handlers

    return undo


class _PerRank:
    """A class attribute (a cache, a registry) that each emulated rank sees a copy of: the
    value at the rank's first access, as a new process would have it after importing torch;
    outside the ranks, the class's own."""

    def __init__(self, name: str, value: Any):
        self.name, self.value = name, value

    def __get__(self, obj: Any, owner: Any = None) -> Any:
        ctx = _emu.current()
        if ctx is None:
            return self.value
        key = (id(self), self.name)
        try:
            return ctx.class_attrs[key]
        except KeyError:
            copy = ctx.class_attrs[key] = _fresh(self.value)
            return copy

    def __set__(self, obj: Any, value: Any) -> None:
        ctx = _emu.current()
        if ctx is None:
            self.value = value
        else:
            ctx.class_attrs[(id(self), self.name)] = value


def _fresh(value: Any) -> Any:
    return type(value)(value) if isinstance(value, dict | list | set) else value


def _per_rank(cls: Any, names: tuple[str, ...]) -> Callable[[], None]:
    """Make the class attributes ``names`` of ``cls`` per rank (:class:`_PerRank`)."""
    saved = {n: cls.__dict__[n] for n in names if n in cls.__dict__}
    for n, value in saved.items():
        setattr(cls, n, _PerRank(n, value))

    def undo() -> None:
        for n in saved:
            d = cls.__dict__.get(n)
            setattr(cls, n, d.value if isinstance(d, _PerRank) else saved[n])

    return undo


_PLAN_CACHES = ("_cached_save_plan", "_cached_final_save_plan", "_cached_all_plans",
                "_cached_global_plan", "_cached_metadata")  # fmt: skip


def _inline_save(original: Callable, run: Callable) -> Callable:
    """An ``execute_save`` that, on an emulated rank, saves at once on the rank's thread."""

    def execute_save(self: Any, staging_future_or_state_dict: Any, **kwargs: Any) -> Future:
        if _emu.current() is None:
            return original(self, staging_future_or_state_dict, **kwargs)
        done: Future = Future()
        try:
            done.set_result(run(staging_future_or_state_dict, **kwargs))
        except Exception as err:  # noqa: BLE001 - handed to the caller through the future
            done.set_exception(err)
        return done

    execute_save.__wrapped__ = original  # type: ignore[attr-defined]
    return execute_save


def _save_now(staged: Any, **kwargs: Any) -> Any:
    from torch.distributed.checkpoint._async_thread_executor import save_wrapper

    return save_wrapper(staged, **kwargs)


def _patch_executor(cls: Any) -> Callable[[], None]:
    original = cls.execute_save
    cls.execute_save = _inline_save(original, _save_now)

    def undo() -> None:
        cls.execute_save = original

    return undo


_HOOKS: dict[str, Callable[[Any], Callable[[], None]]] = {
    "torch.distributed.tensor._dispatch": _patch_dtensor,
    "torch.distributed.checkpoint._async_thread_executor":
        lambda m: _patch_executor(m._ThreadBasedAsyncCheckpointExecutor),
    "torch.distributed.checkpoint._async_process_executor":
        lambda m: _patch_executor(m._ProcessBasedAsyncCheckpointExecutor),
    "torch.distributed.checkpoint.planner": lambda m: _per_rank(m.SavePlanner, _PLAN_CACHES),
}  # fmt: skip
_undo: list[Callable[[], None]] = []


class _Loader(importlib.abc.Loader):
    """Runs a watched module's own loader, then patches the module."""

    def __init__(self, inner: Any, patch: Callable[[Any], Callable[[], None]]):
        self.inner, self.patch = inner, patch

    def create_module(self, spec: Any) -> Any:
        return self.inner.create_module(spec)

    def exec_module(self, module: Any) -> None:
        self.inner.exec_module(module)
        if _finder in sys.meta_path:
            _undo.append(self.patch(module))


class _Finder(importlib.abc.MetaPathFinder):
    """Patches the :data:`_HOOKS` modules that are imported while emulated ranks run."""

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        patch = _HOOKS.get(name)
        if patch is None:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _Loader(spec.loader, patch)
                return spec
        return None


_finder = _Finder()
_saved_hook: list[Any] = [None]


def install() -> None:
    """Give the ranks their own copies (called once, before the first rank starts)."""
    _saved_hook[0] = sys.excepthook
    for name, patch in _HOOKS.items():
        module = sys.modules.get(name)
        if module is not None:
            _undo.append(patch(module))
    sys.meta_path.insert(0, _finder)
    _profiler.install()
    _rank_threads.install()


def uninstall() -> None:
    """Put torch's process-wide state back (after the last rank finished)."""
    if _finder in sys.meta_path:
        sys.meta_path.remove(_finder)
    while _undo:
        _undo.pop()()
    _profiler.uninstall()
    _rank_threads.uninstall()
    sys.excepthook = _saved_hook[0]
