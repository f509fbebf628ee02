"""How the checks show and compare values: short forms, first differences, facts as expected.

Shared by the book's checks (:mod:`labs.course.checks`, on live objects) and the grader
(:mod:`labs.course.verdict`, on the plain data a kernel returned), so that a failure reads the same
in both: what was checked, the expected value and the student's, and for arrays and tensors their
shape and dtype and the first element where they differ.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from labs.course.plaindata import qualname

__all__ = [
    "Opaque",
    "PROPS",
    "describe",
    "first_difference",
    "norm_prop",
    "overlaps",
    "short",
    "tensor_like",
    "to_numpy",
]

#: the facts :meth:`labs.course.checks.Check.props` may compare
PROPS = ("type", "dtype", "shape", "strides", "requires_grad", "is_leaf", "device", "contiguous")


class Opaque:
    """A dtype, device or class as the grader receives it: compared by its name."""

    def __init__(self, text: str):
        self.text = text

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Opaque) and other.text == self.text

    def __hash__(self) -> int:
        return hash(self.text)

    def __repr__(self) -> str:
        return self.text


def tensor_like(x: Any) -> bool:
    """A torch tensor (not the class ``torch.Tensor`` itself), without importing torch."""
    return not isinstance(x, type) and hasattr(x, "detach") and hasattr(x, "cpu")


def to_numpy(x: Any) -> np.ndarray:
    """A torch tensor, numpy array, list or scalar as a numpy array (bfloat16 as float32)."""
    if tensor_like(x):
        x = x.detach().cpu()
        if str(x.dtype) == "torch.bfloat16":
            x = x.float()
        x = x.numpy()
    return np.asarray(x)


def _array_like(x: Any) -> bool:
    return tensor_like(x) or isinstance(x, np.ndarray)


def short(x: Any, limit: int = 160) -> str:
    """A one-line representation of ``x`` that fits a grade table."""
    if _array_like(x):
        arr = to_numpy(x)
        text = np.array2string(arr, precision=6, threshold=8, edgeitems=3, max_line_width=10**6)
    elif isinstance(x, np.generic):  # np.float64(0.25) -> 0.25
        text = repr(x.item())
    else:
        text = repr(x)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def describe(x: Any) -> str:
    """:func:`short` plus the shape and dtype of an array or tensor."""
    if not _array_like(x):
        return short(x)
    arr = to_numpy(x)
    dtype = str(x.dtype).replace("torch.", "") if tensor_like(x) else str(arr.dtype)
    return f"{short(arr)} (shape {tuple(arr.shape)}, {dtype})"


def first_difference(got: np.ndarray, expected: np.ndarray, bad: np.ndarray) -> str:
    """``"; first difference at index (i, j): expected a, got b"`` for the first ``bad`` element."""
    if not bad.any():
        return ""
    idx = np.unravel_index(int(np.argmax(bad)), bad.shape) if bad.ndim else ()
    where = f" at index {tuple(int(i) for i in idx)}" if bad.ndim else ""
    return f"; first difference{where}: expected {short(expected[idx])}, got {short(got[idx])}"


def norm_prop(name: str, value: Any) -> Any:
    """``value`` (expected for the fact ``name``) in the form :func:`~labs.course.plaindata.facts`
    gives it: a class by its qualified name, a dtype or device by its name, a shape as a list."""
    if isinstance(value, Opaque):
        return value.text
    if name == "type":
        return qualname(value) if isinstance(value, type) else str(value)
    if name == "dtype":
        if isinstance(value, str) or type(value).__module__.startswith("torch"):
            return str(value)
        return str(np.dtype(value))
    if name in ("shape", "strides"):
        return [int(v) for v in value]
    if name == "device":
        return str(value)
    return value


def overlaps(a: dict, b: dict) -> bool:
    """Whether two values' :func:`~labs.course.plaindata.facts` say they share memory."""
    ma, mb = a.get("memory"), b.get("memory")
    if not (isinstance(ma, list) and isinstance(mb, list) and len(ma) == len(mb) == 3):
        return False
    return ma[0] == mb[0] and ma[1] < mb[2] and mb[1] < ma[2]
