"""The verdict, made in the grader's process: decode what a kernel recorded, and compare.

The submission's kernel ran the student version of a check cell (:mod:`labs.course.rewrite`)
under :mod:`labs.course.recorder` and printed the got values as plain data; the trusted reference
run did the same with every argument.  :func:`judge` replays the assertions of
:class:`labs.course.checks.Check` here, on the decoded values: the same comparisons, tolerances and
messages as in the book.  A got value that is not plain data fails with its type named; a
condition must be an exact ``bool``; comparisons of ``check.true(a == b)`` are made here.  Check
inputs must be deterministic (seeded), since the expected values come from another process.
"""

from __future__ import annotations

import base64
import inspect
import json
import operator
from collections import Counter
from dataclasses import dataclass
from typing import Any

import numpy as np

from labs.course.checks import Check, CheckFailure, _short

__all__ = ["decode", "judge", "parse_events", "NotPlain", "Opaque", "Verdict"]

_SYMBOL = {"Eq": "==", "NotEq": "!=", "Lt": "<", "LtE": "<=", "Gt": ">", "GtE": ">=", "In": "in",
           "NotIn": "not in"}  # fmt: skip
_APPLY = {
    "Eq": operator.eq, "NotEq": operator.ne, "Lt": operator.lt, "LtE": operator.le,
    "Gt": operator.gt, "GtE": operator.ge, "In": lambda a, b: a in b,
    "NotIn": lambda a, b: a not in b,
}  # fmt: skip


# -- decoding ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class NotPlain:
    """A got value that was not plain data (only its type name came back)."""

    what: str

    def __repr__(self) -> str:
        return f"<{self.what}>"


@dataclass(frozen=True)
class Opaque:
    """A dtype or device, compared by its name."""

    text: str

    def __repr__(self) -> str:
        return self.text


def _array(spec: Any) -> np.ndarray:
    dtype, shape, raw = spec
    dt = np.dtype(str(dtype))
    if dt.kind not in "biufc" or not all(isinstance(s, int) and s >= 0 for s in shape):
        raise ValueError("bad array")
    data = base64.b64decode(raw, validate=True)
    if len(data) != dt.itemsize * int(np.prod(shape, dtype=np.int64)):
        raise ValueError("bad array size")
    return np.frombuffer(data, dtype=dt).reshape(shape).copy()


def decode(x: Any, depth: int = 0) -> Any:
    """Plain data from :func:`labs.course.recorder.encode`'s JSON (malformed: :class:`NotPlain`)."""
    if x is None or type(x) in (bool, int, float, str):
        return x
    try:
        if type(x) is not dict or len(x) != 1 or depth > 40:
            raise ValueError
        ((tag, v),) = x.items()
        if tag in ("t", "l"):
            items = [decode(e, depth + 1) for e in v]
            return tuple(items) if tag == "t" else items
        if tag == "d":
            return {decode(k, depth + 1): decode(e, depth + 1) for k, e in v}
        if tag == "counter":
            return Counter({decode(k, depth + 1): decode(e, depth + 1) for k, e in v})
        if tag == "set":
            return {decode(e, depth + 1) for e in v}
        if tag == "nd":
            return _array(v)
        if tag == "ns":
            return _array(v)[()]
        if tag == "f" and v in ("nan", "inf", "-inf"):
            return float(v)
        if tag in ("dt", "cls") and type(v) is str:
            return Opaque(v)
        if tag == "c":
            return complex(decode(v[0], depth + 1), decode(v[1], depth + 1))
        if tag == "b" and type(v) is str:
            return base64.b64decode(v, validate=True)
        if tag == "bad" and type(v) is str:
            return NotPlain(v[:200])
        if tag == "raised":
            return {"raised": v}
    except (ValueError, TypeError, KeyError):
        pass
    return NotPlain("malformed result data")


def _contains_not_plain(x: Any) -> NotPlain | None:
    if isinstance(x, NotPlain):
        return x
    if isinstance(x, tuple | list | set):
        return next((n for e in x if (n := _contains_not_plain(e))), None)
    if isinstance(x, dict):
        return next((n for kv in x.items() for e in kv if (n := _contains_not_plain(e))), None)
    return None


# -- judging ---------------------------------------------------------------------------------------
@dataclass
class Verdict:
    """The outcome of one exercise block of one check cell."""

    number: int
    status: str  #: "pass", "fail", "na" or "key" (the key's own run failed: the grader's fault)
    message: str


def _bind(method: str, args: list, kwargs: dict) -> inspect.BoundArguments:
    fn = getattr(Check, "true" if method == "compare" else method)
    extra = [None] if method == "raises" else []
    return inspect.signature(fn).bind(None, None, *extra, *args, **kwargs)


def _assert(check: Check, method: str, got: Any, args: list, kwargs: dict) -> None:
    """Replay one assertion of the reference run on the submission's ``got`` (raises on fail)."""
    if method == "raises":
        bound = _bind("raises", [], {k: v for k, v in kwargs.items() if k == "what"})
        exc, what = args[0], bound.arguments.get("what")
        seen = got.get("raised") if isinstance(got, dict) else None
        if not isinstance(exc, str):
            raise CheckFailure(f"{check.label} -- {what}: the key names no exception type")
        if seen is None:
            check._fail(f"{what}: expected {exc}, but nothing was raised")
        names, message = seen
        if exc not in names:
            check._fail(f"{what}: expected {exc}, got {names[0]}: {message}")
        check._ok(what)
        return
    bound = _bind(method, args, kwargs)
    what = bound.arguments.get("what", "")
    bad = _contains_not_plain(got[:2] if method == "compare" else got)
    if bad is not None:
        check._fail(
            f"{what}: the code under test gave {bad.what}, which is not plain data (int, float, "
            "str, bool, None, tuple/list/dict/set of those, numpy array or torch tensor)"
        )
    if method == "compare":
        left, right, op = got
        try:
            got = bool(_APPLY[op](left, right))
        except (ValueError, TypeError, KeyError) as err:
            check._fail(f"{what}: cannot compare {type(left).__name__} with "
                        f"{type(right).__name__}: {err}")  # fmt: skip
        if not got:  # the message was made in the reference run: say what this submission gave
            hint = bound.arguments.get("hint", "")
            check._fail(f"{what}{f'. Hint: {hint}' if hint else ''} (this submission: "
                        f"{_short(left)} {_SYMBOL[op]} {_short(right)} does not hold)")  # fmt: skip
        method = "true"
    if method == "true":  # truth of plain data, taken here (never a __bool__ of the kernel's)
        try:
            got = bool(got)
        except (ValueError, TypeError) as err:
            check._fail(f"{what}: the condition has no single truth value: {err}")
    rest = {k: v for k, v in bound.arguments.items() if k not in ("self", "condition", "got")}
    getattr(check, method)(got, **rest)


def _error_message(label: str, names: list, message: str, passed: int) -> str:
    if "NotImplementedError" in names:
        return f"{label} -- not implemented yet: {message}"
    if "NameError" in names:
        return (f"{label} -- NameError: {message}: the cell that should define it has not run "
                "successfully (is it still a stub, or did it raise?)")  # fmt: skip
    if "ReferenceUsed" in names:
        return f"{label} -- {message}"
    after = f" after {passed} passing check(s)" if passed else ""
    return f"{label} -- the code under test raised {names[0]}{after}: {message}"


def _well_formed(ev: Any) -> bool:
    """Whether an event has the recorder's shape (a forged or garbled one is ignored)."""
    if not isinstance(ev, list) or not ev or not isinstance(ev[0], str):
        return False
    shapes = {"begin": 3, "call": 5, "error": 3, "end": 1, "na": 2, "violation": 2}
    if shapes.get(ev[0]) != len(ev):
        return False
    if ev[0] == "call":
        return isinstance(ev[1], str) and isinstance(ev[3], list) and isinstance(ev[4], dict)
    if ev[0] == "error":
        names = ev[1]
        return bool(names) and isinstance(names, list) and all(isinstance(n, str) for n in names)
    return True


def _blocks(events: list) -> tuple[list[tuple[Any, Any, list]], list | None]:
    """``([(number, title, events)], error outside any block)``."""
    blocks: list[tuple[Any, Any, list]] = []
    outside, open_ = None, False
    for ev in events:
        if not _well_formed(ev):
            continue
        if ev[0] == "begin":
            blocks.append((ev[1], ev[2], []))
            open_ = True
        elif open_:
            blocks[-1][2].append(ev)
            open_ = ev[0] not in ("end", "error")
        elif ev[0] == "error":
            outside = ev
    return blocks, outside


def judge(reference: list, student: list | None) -> list[Verdict]:
    """Compare a submission's recorded events for one check cell with the reference run's."""
    out = []
    ref_blocks, ref_outside = _blocks(reference)
    stu_blocks, stu_outside = _blocks(student or [])
    if ref_outside is not None or not ref_blocks:
        why = ref_outside[2] if ref_outside else "no exercise block ran"
        return [Verdict(0, "key", f"the answer key's own run of this check failed: {why}")]
    for i, (number, title, events) in enumerate(ref_blocks):
        number = int(number)
        label = f"Exercise {number}" + (f" ({title})" if title else "")
        na = next((ev[1] for ev in events if ev[0] == "na"), None)
        if na is not None:
            out.append(Verdict(number, "na", f"N/A exercise {number}: {na}"))
            continue
        key_check = Check(label)
        calls = [ev for ev in events if ev[0] == "call"]
        try:
            if any(ev[0] == "error" for ev in events):
                err = next(ev for ev in events if ev[0] == "error")
                raise CheckFailure(f"{err[1][0]}: {err[2]}")
            for _, method, got, args, kwargs in calls:
                _assert(key_check, method, decode(got), [decode(a) for a in args],
                        {k: decode(v) for k, v in kwargs.items()})  # fmt: skip
        except CheckFailure as err:
            out.append(Verdict(number, "key", f"the answer key's own run of {label} failed: {err}"))
            continue
        if i >= len(stu_blocks):
            why = stu_outside[2] if stu_outside else "the check did not run"
            names = stu_outside[1] if stu_outside else ["Error"]
            out.append(Verdict(number, "fail", _error_message(label, names, why, 0)))
            continue
        check = Check(label)
        mine = [ev for ev in stu_blocks[i][2] if ev[0] in ("call", "error", "end")]
        message = ""
        try:
            for k, (_, method, _, args, kwargs) in enumerate(calls):
                ev = mine[k] if k < len(mine) else ["end"]
                if ev[0] == "error":
                    message = _error_message(label, ev[1], ev[2], len(check.verified))
                    break
                if ev[0] != "call" or ev[1] != method:
                    message = (f"{label} -- the check ran {k} assertion(s) where the key's run "
                               f"ran {len(calls)}")  # fmt: skip
                    break
                _assert(check, method, decode(ev[2]), [decode(a) for a in args],
                        {k2: decode(v) for k2, v in kwargs.items()})  # fmt: skip
            else:
                extra = mine[len(calls)] if len(mine) > len(calls) else ["end"]
                if extra[0] == "error":
                    message = _error_message(label, extra[1], extra[2], len(check.verified))
                elif extra[0] != "end":
                    message = f"{label} -- the check ran more assertions than the key's run"
        except CheckFailure as err:
            message = str(err)
        if message:
            out.append(Verdict(number, "fail", f"CheckFailure: {message}"))
        elif not check.verified:
            out.append(Verdict(number, "fail", f"CheckFailure: {label} -- no assertion ran"))
        else:
            head = f"PASS exercise {number}" + (f": {title}" if title else "")
            out.append(Verdict(number, "pass", f"{head} — {check.summary()}"))
    return out


def parse_events(stdout: str, mark: str, nonce: str) -> list | None:
    """The events line tagged with ``nonce`` (the last one), or ``None``."""
    found = None
    for line in stdout.split("\n"):
        if line.startswith(mark + nonce + " "):
            try:
                found = json.loads(line[len(mark) + len(nonce) + 1 :])
            except ValueError:
                found = None
    return found if isinstance(found, list) else None
