"""Pieces shared by the emulator and the torchrun backend: ReduceOp, Work, buffer checks."""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

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

    Raises:
        TypeError: ``x`` is neither a ``torch.Tensor`` nor a ``numpy.ndarray``.
        ValueError: ``x`` is not contiguous (:class:`ArgumentError`, also a ``RuntimeError``
            as gloo's), is read-only, or has a dtype torch lacks.
    """
    if isinstance(x, torch.Tensor):
        if not x.is_contiguous():  # gloo raises in send/recv, and most of its collectives
            # read a strided view as if it were dense (silently wrong): an error is kinder
            raise ArgumentError(
                f"rank {rank}: {fn}: {what} must be contiguous, got shape {tuple(x.shape)} with "
                f"strides {x.stride()}; pass x.contiguous() (and copy the result back if needed)"
            )
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


def combine(acc: torch.Tensor, x: torch.Tensor, op: ReduceOp) -> None:
    """``acc <- acc (op) x`` in place, keeping ``acc``'s dtype (integers wrap like NCCL's)."""
    if x.device != acc.device:
        x = x.to(acc.device)
    if op is ReduceOp.SUM or op is ReduceOp.AVG:
        acc.add_(x)
    elif op is ReduceOp.PRODUCT:
        acc.mul_(x)
    elif op is ReduceOp.MIN:
        torch.minimum(acc, x, out=acc)
    elif op is ReduceOp.MAX:
        torch.maximum(acc, x, out=acc)
    elif op is ReduceOp.BAND:
        acc.bitwise_and_(x)
    elif op is ReduceOp.BOR:
        acc.bitwise_or_(x)
    else:
        acc.bitwise_xor_(x)


_BITWISE = (ReduceOp.BAND, ReduceOp.BOR, ReduceOp.BXOR)


def check_avg(t: torch.Tensor, op: ReduceOp, rank: int, fn: str) -> None:
    """AVG is defined for floating dtypes only; BAND, BOR, BXOR for integers and bool only."""
    if op in _BITWISE and (t.is_floating_point() or t.is_complex()):
        raise ValueError(
            f"rank {rank}: {fn}: ReduceOp.{op.name} needs an integer or bool tensor, got "
            f"{shape_dtype(t)}"
        )
    if op is ReduceOp.AVG and not (t.is_floating_point() or t.is_complex()):
        raise ValueError(
            f"rank {rank}: {fn}: ReduceOp.AVG needs a floating-point tensor, got "
            f"{shape_dtype(t)}; use SUM and divide yourself"
        )
