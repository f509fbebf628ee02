"""Checks that grade the exercises of the lab notebooks.

A check cell of a lab reads::

    with exercise(1, "FLOPs of a matrix product") as check:
        check.equal(matmul_flops(2, 3, 4), 48, "matmul_flops(2, 3, 4)")

When every assertion holds, the block prints one line saying what was verified::

    PASS exercise 1: FLOPs of a matrix product — 1 check: matmul_flops(2, 3, 4)

Every assertion compares the student's value (first) with an expected one: ``equal``, ``close``,
``one_of`` (ties: any of several answers), ``between``, ``raises`` (the exception's type, and its message when ``match=`` is given),
``instance`` (an ``isinstance`` test), ``props`` (type, dtype, shape, strides, ``requires_grad``,
``is_leaf``, device, contiguity), ``shares_memory`` (whether two arrays or tensors alias) and
``uses`` (names a function's code refers to).  There
is no ``true``: a condition computed in the student's kernel would be a verdict the kernel makes.
When grading, only the student's values (and the facts of :mod:`labs.course.plaindata`) come from
the student's kernel; the grader replays these same assertions on them
(:mod:`labs.course.verdict`) with the expected side from the answer key's own run.

Every failure raises :class:`CheckFailure` (an ``AssertionError``) whose message names the
exercise, the part that was checked, what was expected and what the student's code gave (for
arrays and tensors: shape, dtype and the first element that differs).  An exercise that is still
a stub (it raises ``NotImplementedError``) is reported as "not implemented yet"; any other error
raised inside the block is reported as a failure of that exercise, and so is a block in which no
assertion ran (a check that cannot fail).  An exercise that needs an optional component
(``exercise(6, "Triton kernel", needs=["triton"])``, see :mod:`labs.course.needs`) prints one ``N/A exercise 6: ... needs triton (install: ...)``
line instead when the component is missing, and the grader marks it *not applicable*.  While
grading, the reference implementations the answer key forbids raise :class:`ReferenceUsed`
(:mod:`labs.course.sealed_labs`), which fails the exercise too.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from labs.course.needs import INSTALL_HINTS, missing_components
from labs.course.plaindata import facts, qualname
from labs.course.values import (
    PROPS,
    describe,
    first_difference,
    norm_prop,
    overlaps,
    short,
    tensor_like,
    to_numpy,
)

__all__ = ["ASSERTIONS", "CheckFailure", "ReferenceUsed", "Check", "exercise"]

#: the assertions of :class:`Check`, and how many of their leading arguments are the student's
#: (``raises``: the function and its arguments, after the exception type); the rest, the
#: expected side, is never computed in a submission's kernel
ASSERTIONS = {
    "equal": 1, "close": 1, "one_of": 1, "between": 1, "instance": 1, "props": 1, "uses": 1,
    "shares_memory": 2, "raises": 0,
}  # fmt: skip


class CheckFailure(AssertionError):
    """An exercise check failed; the message says which part and why."""


class ReferenceUsed(BaseException):  # noqa: N818 - not an Exception: `except Exception` misses it
    """The code under test called a reference implementation that the answer key forbids.

    While grading, the kernel's copy of ``labs`` holds, in place of each such function, one that
    raises this (:mod:`labs.course.sealed_labs`); derived from ``BaseException`` so that a
    student's ``except Exception`` does not turn it into a wrong value.
    """


def _equal(got: Any, expected: Any) -> tuple[bool, str]:
    """``(equal, detail)``: exact equality (nan equals nan); ``detail`` locates a difference."""
    if isinstance(expected, np.ndarray) or tensor_like(expected):
        try:
            g, e = to_numpy(got), to_numpy(expected)
        except (TypeError, ValueError):
            return False, ""
        if g.shape != e.shape:
            return False, ""
        try:
            same = (g == e) | (np.isnan(g) & np.isnan(e))
        except TypeError:  # not numbers
            same = np.asarray(g == e, dtype=bool)
        return bool(np.all(same)), first_difference(g, e, ~np.asarray(same, dtype=bool))
    if isinstance(expected, bool) or isinstance(got, bool):
        return got is expected, ""
    if isinstance(expected, float) and math.isnan(expected):
        return isinstance(got, float | np.floating) and math.isnan(got), ""
    try:
        return bool(got == expected), ""
    except (TypeError, ValueError):  # e.g. comparing an array with a list
        return False, ""


class Check:
    """The assertions available inside ``with exercise(...) as check:``."""

    def __init__(self, label: str):
        self.label = label
        self.verified: list[str] = []  #: the ``what`` of every assertion that held, in order

    def _fail(self, message: str) -> None:
        raise CheckFailure(f"{self.label} -- {message}")

    def _ok(self, what: str) -> None:
        self.verified.append(" ".join(str(what).split()))

    def _facts(self, got: Any) -> dict:
        """The facts about ``got`` (the grader's subclass returns those the kernel recorded)."""
        return facts(got, {})

    def _raised(self, fn: Callable[..., Any], args: tuple, kw: dict) -> list | None:
        """``[class names, message]`` of what ``fn(*args, **kw)`` raised, ``None`` if nothing."""
        try:
            fn(*args, **kw)
        except NotImplementedError:
            raise
        except Exception as err:  # noqa: BLE001 - an observation, judged below
            return [[qualname(c) for c in type(err).__mro__], str(err)]
        return None

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

    def equal(self, got: Any, expected: Any, what: str) -> None:
        """Exact equality, for integers, strings, tuples, shapes and arrays (nan equals nan)."""
        ok, detail = _equal(got, expected)
        if not ok:
            self._fail(f"{what}: expected {describe(expected)}, got {describe(got)}{detail}")
        self._ok(what)

    def close(
        self, got: Any, expected: Any, what: str, rtol: float = 1e-6, atol: float = 0.0
    ) -> None:
        """Elementwise ``|got - expected| <= atol + rtol * |expected|`` with matching shapes.

        Accepts Python numbers, numpy arrays and torch tensors (any device, any float dtype); a
        nan or infinity must sit where the expected value has the same one.
        """
        want = f"expected {describe(expected)}"
        if got is None:
            self._fail(f"{what}: {want}, got None (did you return a value?)")
        try:
            g, e = to_numpy(got).astype(np.float64), to_numpy(expected).astype(np.float64)
        except (TypeError, ValueError):
            self._fail(f"{what}: {want}, got {describe(got)}, which is not a number or array")
        if g.shape != e.shape:
            self._fail(f"{what}: {want}, got {describe(got)}: shape {g.shape}, not {e.shape}")
        with np.errstate(invalid="ignore"):
            err = np.abs(g - e)
            bad = ~(err <= atol + rtol * np.abs(e))
        same_special = (np.isnan(g) & np.isnan(e)) | (np.isinf(e) & (g == e))
        bad &= ~same_special
        if bad.any():
            finite = err[bad & np.isfinite(err)]
            worst = f"; max abs error {float(finite.max()):.3g}" if finite.size else ""
            self._fail(
                f"{what}: {want}, got {describe(got)}{first_difference(g, e, bad)}{worst} "
                f"(tolerance rtol={rtol:g}, atol={atol:g})"
            )
        self._ok(what)

    def one_of(self, got: Any, allowed: list, what: str) -> None:
        """Fail unless ``got`` equals one of ``allowed`` (several answers tie, any is right)."""
        if not any(_equal(got, a)[0] for a in allowed):
            self._fail(f"{what}: expected one of {short(list(allowed))}, got {describe(got)}")
        self._ok(what)

    def between(self, got: Any, low: float, high: float, what: str) -> None:
        """Fail unless ``low <= got <= high`` (a plausibility range for measured quantities)."""
        if (
            got is None
            or isinstance(got, bool)
            or not isinstance(got, int | float | np.floating | np.integer)
        ):
            self._fail(f"{what}: expected a number in [{low:g}, {high:g}], got {describe(got)}")
        if not (low <= float(got) <= high) or math.isnan(float(got)):
            self._fail(f"{what}: expected a value in [{low:g}, {high:g}], got {float(got):.6g}")
        self._ok(what)

    def raises(
        self,
        exc_type: type[BaseException],
        fn: Callable[..., Any],
        *args: Any,
        what: str,
        match: str | None = None,
        **kw: Any,
    ) -> None:
        """Fail unless ``fn(*args, **kw)`` raises ``exc_type`` (a subclass counts) whose message
        contains a match of the regular expression ``match`` (when given)."""
        seen = self._raised(fn, args, kw)
        want = _name(exc_type) + (f" with a message matching {match!r}" if match else "")
        if seen is None:
            self._fail(f"{what}: expected {want}, but nothing was raised")
        names, message = seen
        got = f"{_name(names[0])}: {message}"
        if _qualified(exc_type) not in names or (match and not re.search(match, message)):
            self._fail(f"{what}: expected {want}, got {got}")
        self._ok(what)

    def instance(self, got: Any, cls: type, what: str) -> None:
        """Fail unless ``isinstance(got, cls)`` (judged on the names of got's classes)."""
        found = self._facts(got)
        if _qualified(cls) not in found.get("mro", []):
            self._fail(f"{what}: expected an instance of {_name(cls)}, got {found.get('type')}")
        self._ok(what)

    def props(self, got: Any, expected: dict, what: str) -> None:
        """Fail unless ``got``'s facts equal ``expected`` (names from :data:`PROPS`): e.g.
        ``check.props(y, {"dtype": torch.float32, "requires_grad": True}, "y")``."""
        found = self._facts(got)
        for name, value in expected.items():
            if name not in PROPS:
                raise CheckFailure(f"{self.label} -- {what}: no fact {name!r} (one of {PROPS})")
            want = norm_prop(name, value)
            if found.get(name) != want:
                self._fail(f"{what}: expected {name} {want!r}, got {found.get(name, 'none')!r} "
                           f"({found.get('type')})")  # fmt: skip
        self._ok(what)

    def uses(self, fn: Callable[..., Any], names: list[str], what: str) -> None:
        """Fail unless the code of function ``fn`` refers to every name in ``names`` (a global or
        an attribute it reads, e.g. ``"compare_digest"`` for ``hmac.compare_digest(a, b)``)."""
        found = self._facts(fn).get("names")
        if found is None:
            self._fail(f"{what}: expected a Python function, got {self._facts(fn).get('type')}")
        missing = [n for n in names if n not in found]
        if missing:
            self._fail(f"{what}: expected its code to use {', '.join(missing)}, but it does not")
        self._ok(what)

    def shares_memory(self, a: Any, b: Any, expected: bool, what: str) -> None:
        """Fail unless ``a`` and ``b`` (arrays or tensors) overlap in memory exactly when
        ``expected`` is true: a view must alias its source, a copy must not."""
        items = self._facts((a, b)).get("items", [{}, {}])
        shared = overlaps(items[0], items[1])
        if shared is not bool(expected):
            how = "share memory (a view)" if expected else "not share memory (a copy)"
            self._fail(f"{what}: expected the two to {how}, but they "
                       f"{'do' if shared else 'do not'}")  # fmt: skip
        self._ok(what)


def _qualified(cls: Any) -> str:
    return norm_prop("type", cls)


def _name(cls: Any) -> str:
    return _qualified(cls).removeprefix("builtins.")


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
