"""Pieces shared by the emulator and the torchrun backend: ReduceOp, Work, buffer checks."""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
import torch.distributed

_TORCH_DIST_ERROR = getattr(torch.distributed, "DistError", None)  # absent without c10d

__all__ = [
    "ArgumentError",
    "ReduceOp",
    "Work",
    "as_tensor",
    "tensor_list",
    "reduce_op",
    "shape_dtype",
]


class _Abort(BaseException):
    """Unwinds a rank after another rank failed (not an ``Exception``: user code can't catch it)."""


class ReduceOp(enum.Enum):
    """How ``all_reduce``, ``reduce`` and ``reduce_scatter`` combine the ranks' tensors.

    ``AVG`` is the mean over the group (floating dtypes only); under torchrun on gloo, which has
    no AVG, it runs as SUM followed by a division by the group size.  ``BAND``, ``BOR`` and
    ``BXOR`` are bitwise and, or, exclusive or (integer and bool dtypes only, as in gloo).
    """

    SUM = "sum"
    PRODUCT = "product"
    MIN = "min"
    MAX = "max"
    AVG = "avg"
    BAND = "band"
    BOR = "bor"
    BXOR = "bxor"

    def __repr__(self) -> str:
        return f"ReduceOp.{self.name}"


class ArgumentError(ValueError, RuntimeError):
    """Bad arguments to a collective that gloo rejects with a ``RuntimeError`` (caught by
    ``except RuntimeError`` as under torchrun, and by ``except ValueError``)."""


class PeerError(ArgumentError, *([_TORCH_DIST_ERROR] if _TORCH_DIST_ERROR else [])):
    """A peer rank outside the group (``send(dst=world_size + 3)``): gloo raises torch's
    ``DistError`` (a ``RuntimeError``) once the group's timeout has passed; emulated, at once,
    with a class caught by ``except dist.DistError``, ``RuntimeError`` and ``ValueError``."""


def reduce_op(op: Any, rank: int, fn: str) -> ReduceOp:
    """Accept a :class:`ReduceOp`, a ``torch.distributed.ReduceOp`` or its name ("sum")."""
    if isinstance(op, ReduceOp):
        return op
    name = getattr(op, "name", None) or str(op).rsplit(".", 1)[-1]
    try:
        return ReduceOp[name.upper()]
    except KeyError:
        raise ValueError(
            f"rank {rank}: {fn}: unknown reduce op {op!r}; expected one of "
            f"{[o.name for o in ReduceOp]}"
        ) from None


class Work:
    """Handle of an asynchronous operation (``isend``, ``irecv``, ``async_op=True``).

    ``wait()`` blocks until the operation completed and returns ``True``, like the ``Work``
    objects of ``torch.distributed``; ``is_completed()`` says whether ``wait`` already returned.
    """

    __slots__ = ("_waiter", "_done")

    def __init__(self, waiter: Callable[[], Any] | None = None):
        self._waiter = waiter
        self._done = waiter is None

    def wait(self, timeout: Any = None) -> bool:
        if not self._done:
            self._waiter()
            self._done = True
        return True

    def is_completed(self) -> bool:
        return self._done

    def __repr__(self) -> str:
        return f"Work(completed={self._done})"


def as_tensor(x: Any, rank: int, fn: str, what: str = "tensor") -> torch.Tensor:
    """A torch view of ``x`` (a tensor or a numpy array), sharing its memory.

    Any strides are accepted here; the collectives that gloo runs on a tensor's raw memory
    check the layout themselves (:func:`memory_view`, :func:`need_contiguous`).

    Raises:
        TypeError: ``x`` is neither a ``torch.Tensor`` nor a ``numpy.ndarray``.
        ValueError: ``x`` is a numpy view that is not C-contiguous, is read-only, or has a dtype
            torch lacks.
    """
    if isinstance(x, torch.Tensor):
        # detach only when needed: every torch call may hand the GIL to another rank's thread
        return x.detach() if x.requires_grad else x
    if isinstance(x, np.ndarray):
        if not x.flags.c_contiguous:
            raise ValueError(
                f"rank {rank}: {fn}: {what} must be C-contiguous, got a numpy view with shape "
                f"{x.shape} and strides {x.strides}; pass np.ascontiguousarray(x)"
            )
        if not x.flags.writeable:
            raise ValueError(f"rank {rank}: {fn}: {what} is a read-only numpy array; pass a copy")
        try:
            return torch.from_numpy(x)
        except TypeError:
            raise ValueError(
                f"rank {rank}: {fn}: {what} has numpy dtype {x.dtype}, which torch cannot hold; "
                "use a numeric dtype"
            ) from None
    raise TypeError(
        f"rank {rank}: {fn}: {what} must be a torch.Tensor or a numpy.ndarray, "
        f"got {type(x).__name__}"
    )


def layout(t: torch.Tensor) -> tuple[int, ...] | None:
    """None for a contiguous tensor, else its strides (part of a collective's signature where
    gloo works on raw memory: ranks with different layouts would get garbage)."""
    return None if t.is_contiguous() else t.stride()


def memory_view(t: torch.Tensor, rank: int, fn: str) -> torch.Tensor:
    """What gloo reduces or copies: the tensor's memory, in memory order.

    A contiguous tensor is itself; a dense one in another order (channels_last, transposed)
    becomes a 1-d view of its memory (gloo combines the ranks' memory element by element, which
    is right when every rank has the same layout: :func:`layout` goes in the signature).  A view
    with gaps or overlaps (``x[:, ::2]``, ``expand``) is refused with :class:`ArgumentError`:
    gloo reads its memory as if it were dense and returns garbage; with ``gaps_ok``
    (broadcast, which gloo gets right) it is returned as it is.
    """
    if t.is_contiguous():
        return t
    if _dense(t):
        return t.as_strided((t.numel(),), (1,), t.storage_offset())
    raise ArgumentError(
        f"rank {rank}: {fn}: the tensor ({shape_dtype(t)} with strides {t.stride()}) is a view "
        "with gaps or overlapping elements; gloo works on its memory as if it were dense and "
        "returns wrong values: pass x.contiguous() and copy the result back"
    )


def _dense(t: torch.Tensor) -> bool:
    """True if ``t``'s elements fill a block of memory without gaps or overlaps (any order)."""
    if t.numel() == 0:
        return True
    expected = 1
    for stride, size in sorted((st, sz) for sz, st in zip(t.shape, t.stride()) if sz != 1):
        if stride != expected:
            return False
        expected *= size
    return True


def need_contiguous(t: torch.Tensor, rank: int, fn: str, message: str,
                    error: type = ArgumentError) -> None:  # fmt: skip
    """Raise gloo's (or torch's) error ``message`` if ``t`` is not contiguous (``error``: the
    type torch raises; :class:`ArgumentError` where gloo raises ``RuntimeError``)."""
    if not t.is_contiguous():
        raise error(
            f"{message} (rank {rank}: {fn} of {shape_dtype(t)} with strides {t.stride()}; pass "
            "x.contiguous())"
        )


def tensor_list(xs: Any, n: int, rank: int, fn: str, what: str) -> list[torch.Tensor]:
    """Check that ``xs`` is a list of ``n`` tensors/arrays and view each as a torch tensor."""
    if not isinstance(xs, list | tuple):
        raise TypeError(f"rank {rank}: {fn}: {what} must be a list, got {type(xs).__name__}")
    if len(xs) != n:
        raise ArgumentError(
            f"rank {rank}: {fn}: {what} must hold one tensor per rank of the group: expected "
            f"length {n}, got {len(xs)}"
        )
    return [as_tensor(x, rank, fn, f"{what}[{i}]") for i, x in enumerate(xs)]


def shape_dtype(t: torch.Tensor) -> str:
    """``"float32[4, 2]"``: the dtype and shape of ``t``, as error messages show them."""
    return f"{str(t.dtype).removeprefix('torch.')}{list(t.shape)}"


def same_layout(ts: list[torch.Tensor], ref: torch.Tensor, rank: int, fn: str, what: str) -> None:
    """Require every tensor in ``ts`` to have the shape and dtype of ``ref``."""
    for i, t in enumerate(ts):
        if t.shape != ref.shape or t.dtype != ref.dtype:
            raise ArgumentError(
                f"rank {rank}: {fn}: {what}[{i}] must match the input tensor: expected "
                f"{shape_dtype(ref)}, got {shape_dtype(t)}"
            )


_BITWISE = (ReduceOp.BAND, ReduceOp.BOR, ReduceOp.BXOR)
_SCALAR_NAMES = {torch.int64: "Long", torch.int32: "Int", torch.int16: "Short",
                 torch.int8: "Char", torch.uint8: "Byte", torch.bool: "Bool"}  # fmt: skip


def check_avg(t: torch.Tensor, op: ReduceOp, rank: int, fn: str) -> None:
    """AVG is defined for floating dtypes only; BAND, BOR, BXOR for integers and bool only.

    Raises :class:`ArgumentError` (a ``RuntimeError``, as gloo's, and a ``ValueError``) with
    gloo's text first.
    """
    if op in _BITWISE and (t.is_floating_point() or t.is_complex()):
        raise ArgumentError(
            f"Cannot use ReduceOp.{op.name} with non-integral dtype (rank {rank}: {fn} of "
            f"{shape_dtype(t)}; bitwise ops need an integer or bool tensor)"
        )
    if op is ReduceOp.AVG and not (t.is_floating_point() or t.is_complex()):
        raise ArgumentError(
            f"result type Float can't be cast to the desired output type "
            f"{_SCALAR_NAMES.get(t.dtype, str(t.dtype))} (rank {rank}: {fn} of "
            f"{shape_dtype(t)}: ReduceOp.AVG needs a floating-point tensor; use SUM and divide)"
        )
