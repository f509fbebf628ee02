"""The verdict, made in the grader's process: replay a check's assertions on recorded values.

The submission's kernel ran the student version of a check cell (:mod:`labs.course.rewrite`)
under :mod:`labs.course.recorder` and printed the student's values and their facts as plain data;
the trusted reference run did the same with every argument.  :func:`judge` replays the assertions
of :class:`labs.course.checks.Check` here, on the decoded values (:mod:`labs.course.decode`): the
same comparisons, tolerances and messages as in the book, with the expected side, the operator and
the exception to expect taken from the reference run only.  A got value that is not plain data
fails with its type named; an assertion the kernel skipped or added fails the exercise; an error
raised by the student's code is reported with the assertion it interrupted and its expected value.
Check inputs must be deterministic (seeded), since the expected values come from another process.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any

from labs.course.checks import ASSERTIONS, Check, CheckFailure
from labs.course.decode import contains_not_plain, decode, decode_facts
from labs.course.values import describe, norm_prop

__all__ = ["judge", "Verdict", "RecordedCheck"]


@dataclass
class Verdict:
    """The outcome of one exercise block of one check cell."""

    number: int
    status: str  #: "pass", "fail", "na" or "key" (the key's own run failed: the grader's fault)
    message: str


class RecordedCheck(Check):
    """A :class:`Check` whose facts and raised exceptions are the ones a kernel recorded."""

    recorded_facts: dict = {}
    recorded_raise: list | None = None

    def _facts(self, got: Any) -> dict:
        return self.recorded_facts

    def _raised(self, fn, args, kw) -> list | None:
        return self.recorded_raise


def _bind(method: str, args: list, kwargs: dict) -> dict:
    """The reference run's arguments of one assertion, by parameter name (raises on a bad key)."""
    fn = getattr(Check, method, None)
    if method not in ASSERTIONS or fn is None:
        raise CheckFailure(f"the key's check calls check.{method}, which is not an assertion")
    if method == "raises":  # raises(exc_type, fn, *args, what=, match=): the key's are recorded
        bound = inspect.signature(fn).bind(None, *args[:1], None, **kwargs)
        return {k: bound.arguments.get(k) for k in ("exc_type", "what", "match")}
    sig = inspect.signature(fn)
    mine = list(sig.parameters)[1 : 1 + ASSERTIONS[method]]  # the student's side: not the key's
    bound = sig.bind(None, *[None] * len(mine), *args, **kwargs)
    return {k: v for k, v in bound.arguments.items() if k != "self" and k not in mine}


def _assert(check: RecordedCheck, method: str, got: Any, facts: Any, ref: dict) -> None:
    """Replay one assertion of the reference run (arguments ``ref``) on a kernel's record."""
    what = ref.get("what", "")
    check.recorded_facts = decode_facts(facts)
    if method == "raises":
        seen = got.get("raised") if isinstance(got, dict) else None
        check.recorded_raise = seen
        exc = ref.get("exc_type")
        if exc is None:
            raise CheckFailure(f"{check.label} -- {what}: the key names no exception type")
        check.raises(exc, None, what=what, match=ref.get("match"))
        return
    bad = contains_not_plain(got)
    if bad is not None:
        check._fail(
            f"{what}: the code under test gave {bad.what}, which is not plain data (int, float, "
            "str, bool, None, tuple/list/dict/set of those, numpy array or torch tensor)"
        )
    rest = dict(ref)
    if method == "shares_memory":
        check.shares_memory(None, None, **rest)
    elif method in ("instance", "props", "uses"):
        getattr(check, method)(None, **rest)
    else:
        getattr(check, method)(got, **rest)


def expectation(method: str, ref: dict) -> str:
    """What an assertion expects, in words (for the message of an error that interrupted it)."""
    if method in ("equal", "close"):
        return f"expected {describe(ref.get('expected'))}"
    if method == "one_of":
        return f"expected one of {ref.get('allowed')}"
    if method == "between":
        return f"expected a value in [{ref.get('low')}, {ref.get('high')}]"
    if method == "raises":
        return f"expected {norm_prop('type', ref.get('exc_type'))} to be raised"
    if method == "instance":
        return f"expected an instance of {norm_prop('type', ref.get('cls'))}"
    if method == "props":
        return f"expected {ref.get('expected')}"
    if method == "uses":
        return f"expected its code to use {ref.get('names')}"
    return f"expected shared memory: {ref.get('expected')}"


def _short_name(names: list) -> str:
    return str(names[0]).removeprefix("builtins.") if names else "an exception"


MESSAGE_LIMIT = 200  #: characters of a student's exception message a failure line quotes


def _error_message(label: str, names: list, message: str, passed: int, pending: str) -> str:
    """The line for a check the code under test interrupted: the exception's type and its
    message (the student's text: one line, at most :data:`MESSAGE_LIMIT` characters)."""
    short = {str(n).rsplit(".", 1)[-1] for n in names}
    message = " ".join(str(message).split())
    if len(message) > MESSAGE_LIMIT:
        message = message[:MESSAGE_LIMIT] + "… (cut)"
    if "NotImplementedError" in short:
        return f"{label} -- not implemented yet: {message}"
    if "NameError" in short:
        return (f"{label} -- NameError: {message}: the cell that should define it has not run "
                "successfully (is it still a stub, or did it raise?)")  # fmt: skip
    if "ReferenceUsed" in short:
        return f"{label} -- {message}"
    after = f" after {passed} passing check(s)" if passed else ""
    return f"{label} -- {pending}the code under test raised {_short_name(names)}{after}: {message}"


_SHAPES = {"begin": 3, "call": 6, "error": 3, "end": 1, "na": 2}


def _well_formed(ev: Any) -> bool:
    """Whether an event has the recorder's shape (a forged or garbled one is ignored)."""
    if not isinstance(ev, list) or not ev or not isinstance(ev[0], str):
        return False
    if _SHAPES.get(ev[0]) != len(ev):
        return False
    if ev[0] == "call":
        return isinstance(ev[1], str) and isinstance(ev[4], list) and isinstance(ev[5], dict)
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


def _reference_calls(label: str, events: list) -> list[tuple[str, dict]]:
    """The key's assertions of one block as ``(method, arguments)``, each checked on the
    reference run's own values (raises :class:`CheckFailure` when the key's run fails them)."""
    err = next((ev for ev in events if ev[0] == "error"), None)
    if err is not None:
        raise CheckFailure(f"{err[1][0]}: {err[2]}")
    calls, check = [], RecordedCheck(label)
    for _, method, got, facts, args, kwargs in (ev for ev in events if ev[0] == "call"):
        ref = _bind(method, [decode(a) for a in args], {k: decode(v) for k, v in kwargs.items()})
        _assert(check, method, decode(got), facts, ref)
        calls.append((method, ref))
    return calls


def _replay(label: str, calls: list, mine: list) -> tuple[str, RecordedCheck]:
    """Replay the key's ``calls`` on a submission's events of the same block: the failure
    message, or ``""`` when every assertion held."""
    check = RecordedCheck(label)
    try:
        for k, (method, ref) in enumerate(calls):
            ev = mine[k] if k < len(mine) else ["end"]
            if ev[0] == "error":
                pending = f"{ref.get('what', '')}: {expectation(method, ref)}, but "
                return _error_message(label, ev[1], ev[2], len(check.verified), pending), check
            if ev[0] != "call" or ev[1] != method:
                return (f"{label} -- the check ran {k} assertion(s) where the key's run ran "
                        f"{len(calls)}"), check  # fmt: skip
            _assert(check, method, decode(ev[2]), ev[3], ref)
        extra = mine[len(calls)] if len(mine) > len(calls) else ["end"]
        if extra[0] == "error":
            return _error_message(label, extra[1], extra[2], len(check.verified), ""), check
        if extra[0] != "end":
            return f"{label} -- the check ran more assertions than the key's run", check
    except CheckFailure as err:
        return str(err), check
    return "", check


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
        try:
            calls = _reference_calls(label, events)
        except (CheckFailure, TypeError) as err:
            out.append(Verdict(number, "key", f"the answer key's own run of {label} failed: {err}"))
            continue
        if i >= len(stu_blocks):
            why = stu_outside[2] if stu_outside else "the check did not run"
            names = stu_outside[1] if stu_outside else ["Error"]
            out.append(Verdict(number, "fail", _error_message(label, names, why, 0, "")))
            continue
        mine = [ev for ev in stu_blocks[i][2] if ev[0] in ("call", "error", "end")]
        message, check = _replay(label, calls, mine)
        if message:
            out.append(Verdict(number, "fail", f"CheckFailure: {message}"))
        elif not check.verified:
            out.append(Verdict(number, "fail", f"CheckFailure: {label} -- no assertion ran"))
        else:
            head = f"PASS exercise {number}" + (f": {title}" if title else "")
            out.append(Verdict(number, "pass", f"{head} — {check.summary()}"))
    return out
