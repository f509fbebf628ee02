"""The kernel side of grading: run a rewritten check cell and record what it observed.

The grader never trusts a verdict from a submission's kernel.  It sends this file's text, after
that of :mod:`labs.course.plaindata` (``encode``, ``facts``, ``qualname``), with the rewritten
check cell (:mod:`labs.course.rewrite`), and the kernel runs it in a fresh namespace: ``exercise``
and ``check`` here only *record*.  Each ``check.equal(got)`` stores ``got`` as plain data and the
facts about it (type, dtype, shape, flags, memory); ``instance``, ``props`` and ``shares_memory``
store the facts only; ``raises`` stores what the call raised (class names and message).  In a
submission's kernel the expected arguments were removed before the cell was sent, so they are
never computed there; in the trusted reference kernel (the key's own solution) they are recorded
too.  The events are printed as one JSON line tagged with a nonce; the grader compares them in its
own process (:func:`labs.course.verdict.judge`).  Before the check runs, the global random
generators (``random``, numpy's, torch's) are seeded from the key's check source, so that inputs a
check draws from them are the same in the reference run and in every submission, whatever the
cells before it drew.

This module is executed by :mod:`labs.course.snippet` with the globals ``ARGS`` (mode, mark,
nonce, the exercises not applicable, the names to bind, the seed), ``USER_NS`` and ``CHECK_CODE``.
"""

# ruff: noqa: F821 - ARGS, USER_NS, CHECK_CODE, encode, facts and qualname come with the text

import json
import sys

_A = ARGS
_EVENTS: list = []
_MEMORY: dict = {}  # storage address -> token, for the whole check cell


def _safe_str(err, first_line=True) -> str:
    try:
        text = BaseException.__str__(err)
    except Exception:  # noqa: BLE001
        text = ""
    text = text.strip()
    if first_line:
        text = (text.splitlines() or [""])[0]
    return text[:500]


def _exc_names(t) -> list:
    try:
        return [qualname(c) for c in type.__getattribute__(t, "__mro__")]
    except Exception:  # noqa: BLE001
        return ["?"]


class _Check:
    """Records each assertion's student side (and, in the reference run, everything else)."""

    def __init__(self):
        self.full = _A["mode"] == "reference"
        self.runs = True

    def _record(self, method, got, args, kwargs, value=True):
        fact = facts(got, _MEMORY)
        rest = [encode(a) for a in args] if self.full else []
        kw = {k: encode(v) for k, v in kwargs.items()} if self.full else {}
        _EVENTS.append(["call", method, encode(got) if value else None, fact, rest, kw])

    def equal(self, got, *args, **kwargs):
        self._record("equal", got, args, kwargs)

    def close(self, got, *args, **kwargs):
        self._record("close", got, args, kwargs)

    def one_of(self, got, *args, **kwargs):
        self._record("one_of", got, args, kwargs)

    def between(self, got, *args, **kwargs):
        self._record("between", got, args, kwargs)

    def instance(self, got, *args, **kwargs):
        self._record("instance", got, args, kwargs, value=False)

    def props(self, got, *args, **kwargs):
        self._record("props", got, args, kwargs, value=False)

    def uses(self, fn, *args, **kwargs):
        self._record("uses", fn, args, kwargs, value=False)

    def shares_memory(self, a, b, *args, **kwargs):
        self._record("shares_memory", (a, b), args, kwargs, value=False)

    def raises(self, exc_type, fn, *args, what=None, match=None, **kw):
        try:
            fn(*args, **kw)
            seen = None
        except NotImplementedError:
            raise
        except Exception as err:  # noqa: BLE001 - an observation, judged by the grader
            seen = [_exc_names(type(err)), _safe_str(err, first_line=False)]
        rest = [encode(exc_type)] if self.full else []
        kwargs = {"what": encode(what), "match": encode(match)} if self.full else {}
        _EVENTS.append(["call", "raises", {"raised": seen}, {}, rest, kwargs])


class exercise:  # noqa: N801 - the name the check cells use
    """``with exercise(N, title, needs=[...]) as check:`` -- records, never judges."""

    def __init__(self, number, title="", needs=None):
        self.number = number
        self.needs = list(needs or [])
        _EVENTS.append(["begin", encode(number), encode(title)])

    def _missing(self):
        # Only in the trusted reference kernel: the same test and words as the book's checks.
        from labs.course.needs import INSTALL_HINTS, missing_components

        missing = missing_components(self.needs)
        if not missing:
            return ""
        hints = "; ".join(f"{m}: {INSTALL_HINTS.get(m, 'pip install ' + m)}" for m in missing)
        return f"needs {', '.join(missing)} (install: {hints})"

    def __enter__(self):
        why = ""
        if _A["mode"] == "reference":
            why = self._missing()
        elif self.number in _A["na"]:
            why = "not applicable here"
        _CHECK.runs = not why
        if why:
            _EVENTS.append(["na", why])
            print(f"N/A exercise {self.number}: {why}")
        return _CHECK

    def __exit__(self, et, ev, tb):
        if et is None:
            _EVENTS.append(["end"])
        else:
            _EVENTS.append(["error", _exc_names(et), _safe_str(ev)])
        return True


def _seed(seed):
    """Seed the global random generators, the same in the reference run and in every submission:
    a check that draws its inputs from them must not depend on what earlier cells drew."""
    import random

    random.seed(seed)
    np = sys.modules.get("numpy")
    if np is not None:
        np.random.seed(seed % 2**32)
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.manual_seed(seed)


if _A.get("seed") is not None:
    _seed(_A["seed"])
_CHECK = _Check()
for _name in _A["bind"]:
    USER_NS[_name] = {"exercise": exercise, "Check": _Check, "CheckFailure": AssertionError}.get(
        _name, exercise
    )
try:
    exec(CHECK_CODE, USER_NS)
except BaseException as _err:  # noqa: BLE001 - outside any exercise block: reported as such
    _EVENTS.append(["error", _exc_names(type(_err)), _safe_str(_err)])
try:
    _line = json.dumps(_EVENTS, allow_nan=False)
except (TypeError, ValueError) as _err:
    _line = json.dumps([["error", ["GraderError"], f"results could not be encoded: {_err}"]])
sys.stdout.flush()
sys.stdout.write("\n" + _A["mark"] + _A["nonce"] + " " + _line + "\n")
sys.stdout.flush()
