"""Checks that grade the exercises of the lab notebooks.

A check cell of a lab reads::

    with exercise(1, "FLOPs of a matrix product") as check:
        check.equal(matmul_flops(2, 3, 4), 48, "matmul_flops(2, 3, 4)")

Every failure raises :class:`CheckFailure` (an ``AssertionError``) whose message names the
exercise, the part that was checked, what was expected and what the student's code gave, so that
the grade table (``python -m labs.grade``) can show it as the reason.  An exercise that is still a
stub (it raises ``NotImplementedError``) is reported as "not implemented yet".
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

__all__ = ["CheckFailure", "Check", "exercise"]


class CheckFailure(AssertionError):
    """An exercise check failed; the message says which part and why."""


def _to_numpy(x: Any) -> np.ndarray:
    """Convert a torch tensor, numpy array, list or scalar to a float64/complex numpy array."""
    if hasattr(x, "detach") and hasattr(x, "cpu"):  # torch.Tensor without importing torch
        x = x.detach().cpu()
        if str(x.dtype) == "torch.bfloat16":
            x = x.float()
        x = x.numpy()
    return np.asarray(x)


def _short(x: Any, limit: int = 160) -> str:
    """A one-line representation of ``x`` that fits a grade table."""
    if hasattr(x, "detach") or isinstance(x, np.ndarray):
        arr = _to_numpy(x)
        text = np.array2string(arr, precision=6, threshold=8, edgeitems=3, max_line_width=10**6)
        text = f"{text} (shape {tuple(arr.shape)})" if arr.ndim else text
    else:
        text = repr(x)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


class Check:
    """The assertions available inside ``with exercise(...) as check:``."""

    def __init__(self, label: str):
        self.label = label

    def _fail(self, message: str) -> None:
        raise CheckFailure(f"{self.label} -- {message}")

    def true(self, condition: bool, what: str, hint: str = "") -> None:
        """Fail with ``what`` (and ``hint``) unless ``condition`` holds."""
        if not bool(condition):
            self._fail(what + (f". Hint: {hint}" if hint else ""))

    def equal(self, got: Any, expected: Any, what: str) -> None:
        """Exact equality, for integers, strings, tuples, shapes and arrays of integers."""
        if isinstance(expected, np.ndarray) or hasattr(expected, "detach"):
            g, e = _to_numpy(got), _to_numpy(expected)
            ok = g.shape == e.shape and bool(np.array_equal(g, e))
        elif isinstance(expected, bool) or isinstance(got, bool):
            ok = got is expected
        else:
            try:
                ok = bool(got == expected)
            except (TypeError, ValueError):  # e.g. comparing an array with a list
                ok = False
        if not ok:
            self._fail(f"{what}: expected {_short(expected)}, got {_short(got)}")

    def close(
        self,
        got: Any,
        expected: Any,
        what: str,
        rtol: float = 1e-6,
        atol: float = 0.0,
    ) -> None:
        """Elementwise ``|got - expected| <= atol + rtol * |expected|`` with matching shapes.

        Accepts Python numbers, numpy arrays and torch tensors (any device, any float dtype).
        """
        if got is None:
            self._fail(f"{what}: expected {_short(expected)}, got None (did you return a value?)")
        try:
            g, e = _to_numpy(got).astype(np.float64), _to_numpy(expected).astype(np.float64)
        except (TypeError, ValueError):
            self._fail(f"{what}: expected a number or array, got {type(got).__name__}")
        if g.shape != e.shape:
            self._fail(f"{what}: expected shape {e.shape}, got shape {g.shape}")
        if not np.all(np.isfinite(g) | ~np.isfinite(e)):
            self._fail(f"{what}: got non-finite values {_short(g)}")
        err = np.abs(g - e)
        bound = atol + rtol * np.abs(e)
        if not np.all(err <= bound):
            idx = np.unravel_index(int(np.argmax(err - bound)), err.shape) if err.ndim else ()
            where = f" (worst at index {tuple(int(i) for i in idx)})" if err.ndim else ""
            self._fail(
                f"{what}: expected {_short(expected)}, got {_short(got)}; "
                f"max abs error {float(err.max()):.3g} exceeds tolerance{where}"
            )

    def raises(
        self,
        exc_type: type[BaseException],
        fn: Callable[..., Any],
        *args: Any,
        what: str,
        **kw: Any,
    ) -> None:
        """Fail unless ``fn(*args, **kw)`` raises ``exc_type``."""
        try:
            fn(*args, **kw)
        except exc_type:
            return
        except NotImplementedError:
            raise
        except Exception as err:  # noqa: BLE001 - report what was raised instead
            self._fail(f"{what}: expected {exc_type.__name__}, got {type(err).__name__}: {err}")
        self._fail(f"{what}: expected {exc_type.__name__}, but nothing was raised")

    def between(self, got: float, low: float, high: float, what: str) -> None:
        """Fail unless ``low <= got <= high`` (a plausibility range for measured quantities)."""
        if got is None or not isinstance(got, int | float | np.floating | np.integer):
            self._fail(f"{what}: expected a number in [{low:g}, {high:g}], got {_short(got)}")
        if not (low <= float(got) <= high) or math.isnan(float(got)):
            self._fail(f"{what}: expected a value in [{low:g}, {high:g}], got {float(got):.6g}")


@contextmanager
def exercise(number: int, title: str = "") -> Iterator[Check]:
    """Run the checks of exercise ``number``; turn a stub's ``NotImplementedError`` into a failure.

    Raises:
        CheckFailure: when a check fails or the exercise is not implemented yet.
    """
    label = f"Exercise {number}" + (f" ({title})" if title else "")
    try:
        yield Check(label)
    except NotImplementedError as err:
        raise CheckFailure(f"{label} -- not implemented yet: {err}") from err
    except NameError as err:
        raise CheckFailure(
            f"{label} -- {err}: the cell that should define it has not run successfully "
            "(is it still a stub, or did it raise?)"
        ) from err
