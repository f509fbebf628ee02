"""Checks that grade the exercises of the lab notebooks.

A check cell of a lab reads::

    with exercise(1, "FLOPs of a matrix product") as check:
        check.equal(matmul_flops(2, 3, 4), 48, "matmul_flops(2, 3, 4)")

When every assertion holds, the block prints one line saying what was verified::

    PASS exercise 1: FLOPs of a matrix product — 1 check: matmul_flops(2, 3, 4)

Every failure raises :class:`CheckFailure` (an ``AssertionError``) whose message names the
exercise, the part that was checked, what was expected and what the student's code gave, so that
the grade table (``labs-grade``) can show it as the reason.  An exercise that is still a
stub (it raises ``NotImplementedError``) is reported as "not implemented yet"; any other error
raised inside the block is reported as a failure of that exercise, and so is a block in which no
assertion ran (a check that cannot fail).  An exercise that needs an optional component
(``exercise(6, "Triton kernel", needs=["triton"])``: a module name, ``"cuda"`` for a GPU, or an
executable such as ``"redis-server"``) prints one ``N/A exercise 6: ... needs triton (install: ...)``
line instead when the component is missing, and the grader marks it *not applicable*.  While grading, calling a reference implementation the
answer key forbids raises :class:`ReferenceUsed`, which becomes a failure of the exercise too.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

__all__ = [
    "CheckFailure",
    "ReferenceUsed",
    "Check",
    "exercise",
    "missing_components",
    "INSTALL_HINTS",
]

#: How to get each optional component an exercise may need (shown in the N/A line).
INSTALL_HINTS = {
    "triton": "pip install triton (Linux; on a CPU Triton runs in its interpreter)",
    "bitsandbytes": "pip install bitsandbytes",
    "cuda": "a machine with an NVIDIA GPU and a CUDA build of torch (e.g. Google Colab's GPU runtime)",
    "redis-server": "apt-get install redis-server (Debian/Ubuntu) or brew install redis (macOS)",
}


def missing_components(needs: list[str] | tuple[str, ...] | None) -> list[str]:
    """The entries of ``needs`` that this machine lacks, in order.

    An entry is ``"cuda"`` (a usable CUDA device), the name of an executable on ``PATH`` (it
    contains a ``-`` or ends in ``-server``), or otherwise an importable module name.
    """
    import importlib.util
    import shutil

    missing = []
    for name in needs or ():
        if name == "cuda":
            try:
                import torch

                ok = bool(torch.cuda.is_available())
            except ImportError:
                ok = False
        elif "-" in name:
            ok = shutil.which(name) is not None
        else:
            try:
                ok = importlib.util.find_spec(name) is not None
            except (ImportError, ValueError):
                ok = False
        if not ok:
            missing.append(name)
    return missing


class CheckFailure(AssertionError):
    """An exercise check failed; the message says which part and why."""


class ReferenceUsed(BaseException):  # noqa: N818 - not an Exception: `except Exception` misses it
    """The code under test called a reference implementation that the answer key forbids.

    Raised by the grader's tripwire (:mod:`labs.course.references`); derived from
    ``BaseException`` so that a student's ``except Exception`` cannot swallow it.
    """


def _tensor_like(x: Any) -> bool:
    """A torch tensor (not the class ``torch.Tensor`` itself), without importing torch."""
    return not isinstance(x, type) and hasattr(x, "detach") and hasattr(x, "cpu")


def _to_numpy(x: Any) -> np.ndarray:
    """Convert a torch tensor, numpy array, list or scalar to a float64/complex numpy array."""
    if _tensor_like(x):
        x = x.detach().cpu()
        if str(x.dtype) == "torch.bfloat16":
            x = x.float()
        x = x.numpy()
    return np.asarray(x)


def _short(x: Any, limit: int = 160) -> str:
    """A one-line representation of ``x`` that fits a grade table."""
    if _tensor_like(x) or isinstance(x, np.ndarray):
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
        self.verified: list[str] = []  #: the ``what`` of every assertion that held, in order

    def _fail(self, message: str) -> None:
        raise CheckFailure(f"{self.label} -- {message}")

    def _ok(self, what: str) -> None:
        self.verified.append(" ".join(str(what).split()))

    def summary(self, limit: int = 160) -> str:
        """``"3 checks: a; b; c"``, shortened to about ``limit`` characters."""
        n = len(self.verified)
        text = f"{n} check{'s' if n != 1 else ''}: "
        shown = []
        for i, what in enumerate(self.verified):
            more = f" (+{n - i} more)"
            if shown and len(text) + len("; ".join([*shown, what])) + len(more) > limit:
                return text + "; ".join(shown) + more
            shown.append(what)
        return text + "; ".join(shown)

    def true(self, condition: bool, what: str, hint: str = "") -> None:
        """Fail with ``what`` (and ``hint``) unless ``condition`` holds."""
        if not bool(condition):
            self._fail(what + (f". Hint: {hint}" if hint else ""))
        self._ok(what)

    def equal(self, got: Any, expected: Any, what: str) -> None:
        """Exact equality, for integers, strings, tuples, shapes and arrays of integers."""
        if isinstance(expected, np.ndarray) or _tensor_like(expected):
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
        self._ok(what)

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
        self._ok(what)

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
            self._ok(what)
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
        self._ok(what)


@contextmanager
def exercise(
    number: int, title: str = "", needs: list[str] | tuple[str, ...] | None = None
) -> Iterator[Check]:
    """Run the checks of exercise ``number``; print one ``PASS`` line when they all hold.

    ``needs`` names optional components the exercise cannot run without (see
    :func:`missing_components`).  When one is missing the block prints one
    ``N/A exercise N: ... needs X (install: ...)`` line, anything the block raises is ignored and
    nothing is asserted: the exercise is *not applicable* on this machine, neither passed nor failed.

    Raises:
        CheckFailure: when a check fails, the exercise is not implemented yet, the code under test
            raises, calls a forbidden reference implementation, or no assertion ran at all.
    """
    label = f"Exercise {number}" + (f" ({title})" if title else "")
    check = Check(label)
    missing = missing_components(needs)
    if missing:
        hints = "; ".join(f"{m}: {INSTALL_HINTS.get(m, 'pip install ' + m)}" for m in missing)
        head = f"N/A exercise {number}" + (f": {title}" if title else "")
        print(f"{head} — needs {', '.join(missing)} (install: {hints})", flush=True)
        try:
            yield check
        except Exception:  # noqa: BLE001 - the body cannot run without the missing component
            pass
        return
    try:
        yield check
    except CheckFailure:
        raise
    except NotImplementedError as err:
        raise CheckFailure(f"{label} -- not implemented yet: {err}") from err
    except NameError as err:
        raise CheckFailure(
            f"{label} -- {err}: the cell that should define it has not run successfully "
            "(is it still a stub, or did it raise?)"
        ) from err
    except ReferenceUsed as err:
        raise CheckFailure(f"{label} -- {err}") from None
    except Exception as err:  # noqa: BLE001 - the student's code raised inside the check
        after = f" after {len(check.verified)} passing check(s)" if check.verified else ""
        raise CheckFailure(
            f"{label} -- the code under test raised {type(err).__name__}{after}: {err}"
        ) from err
    if not check.verified:
        raise CheckFailure(f"{label} -- no assertion ran, so this check cannot fail")
    head = f"PASS exercise {number}" + (f": {title}" if title else "")
    print(f"{head} — {check.summary()}", flush=True)
