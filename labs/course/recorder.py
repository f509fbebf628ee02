"""The kernel side of grading: run a rewritten check cell and record what it observed.

The grader never trusts a verdict from a submission's kernel.  It sends this file's text, with the
rewritten check cell (:mod:`labs.course.verdict`), and the kernel runs it in a fresh namespace:
``exercise`` and ``check`` here only *record*.  Each ``check.equal(got, ...)`` stores ``got``
converted to plain data by :func:`encode` (exact ``int``/``float``/``str``/``bool``/``None``,
tuples/lists/dicts/sets of those, numpy arrays and scalars, torch tensors of exact type; anything
else is recorded as "not plain data" by its type name, without calling a method it defines).
In a submission's kernel the expected arguments were replaced by ``None`` before the cell was sent,
so they are never computed there; in the trusted reference kernel (the key's own solution) they
are recorded too.  The events are printed as one JSON line tagged with a nonce; the grader
compares them in its own process (:func:`labs.course.verdict.judge`).  Before the check runs, the
global random generators (``random``, numpy's, torch's) are seeded from the key's check source, so
that inputs a check draws from them are the same in the reference run and in every submission,
whatever the cells before it drew.

This module is executed by :mod:`labs.course.protect` with the globals ``ARGS`` (mode, mark,
nonce, the exercises not applicable, the names to bind), ``USER_NS`` and ``CHECK_CODE``.
"""

# ruff: noqa: F821 - ARGS, USER_NS and CHECK_CODE are given by the grader when this text is executed

import base64
import collections
import json
import sys

_A = (
    ARGS  # {"mode": "student"|"reference", "mark": ..., "nonce": ..., "na": [numbers], "seed": ...}
)
_EVENTS: list = []
_PLAIN = (type(None), bool, int, float, str)
_DICTS = tuple(getattr(collections, n) for n in ("Counter", "OrderedDict", "defaultdict"))
_NP_KINDS = "biufc"


def _np_types():
    np = sys.modules.get("numpy")
    if np is None:
        return None, ()
    scalars = tuple(
        getattr(np, n)
        for n in (
            "bool_ int8 int16 int32 int64 uint8 uint16 uint32 uint64 float16 float32 float64 "
            "complex64 complex128 longlong ulonglong"
        ).split()
        if hasattr(np, n)
    )
    return np, scalars


def _class(t):
    """A class, by name, only when the name leads back to this very class (no look-alikes)."""
    try:
        module = type.__getattribute__(t, "__module__")
        name = type.__getattribute__(t, "__qualname__")
    except Exception:  # noqa: BLE001
        return {"bad": "a class"}
    found = sys.modules.get(module)
    for part in str(name).split("."):
        found = getattr(found, part, None)
    return {"cls": f"{module}.{name}"} if found is t else {"bad": f"the class {module}.{name}"}


def _type_name(t) -> str:
    try:
        return (
            f"{type.__getattribute__(t, '__module__')}.{type.__getattribute__(t, '__qualname__')}"
        )
    except Exception:  # noqa: BLE001 - a hostile metaclass
        return "an unknown type"


def _array(np, arr):
    arr = np.array(arr, copy=True, order="C")  # (np.ascontiguousarray would make 0-d arrays 1-d)
    if arr.dtype.kind not in _NP_KINDS:
        return {"bad": f"a numpy array of dtype {arr.dtype}"}
    raw = base64.b64encode(arr.tobytes()).decode()
    return {"nd": [arr.dtype.str, list(arr.shape), raw]}


def encode(x, depth=0):
    """``x`` as JSON-able plain data; unknown types become ``{"bad": type name}``."""
    t = type(x)
    if t in _PLAIN:
        if t is float and (x != x or x in (1e999, -1e999)):
            return {"f": repr(x)}  # nan, inf, -inf: not JSON
        return x
    if depth > 32:
        return {"bad": "a structure nested deeper than 32 levels"}
    if t is tuple or t is list:
        return {"t" if t is tuple else "l": [encode(v, depth + 1) for v in x]}
    if t is dict:
        return {"d": [[encode(k, depth + 1), encode(v, depth + 1)] for k, v in dict.items(x)]}
    if t is set or t is frozenset:
        return {"set": [encode(v, depth + 1) for v in x]}
    if t is range:
        return {"l": list(x)} if len(x) <= 10**6 else {"bad": "a range of over a million items"}
    if t is complex:
        return {"c": [encode(x.real), encode(x.imag)]}
    if t is bytes:
        return {"b": base64.b64encode(x).decode()}
    if t is collections.Counter:  # a multiset: compared as one (<=, ==) by the grader
        return {"counter": [[encode(k, depth + 1), encode(v, depth + 1)] for k, v in dict.items(x)]}
    if t in _DICTS:
        return {"d": [[encode(k, depth + 1), encode(v, depth + 1)] for k, v in dict.items(x)]}
    if isinstance(x, type):  # a class, whatever its metaclass (torch.Tensor's is not type)
        return _class(x)
    np, scalars = _np_types()
    if np is not None:
        if t is np.ndarray:
            return _array(np, x)
        if t in scalars:
            return {"ns": _array(np, np.asarray(x))["nd"]}
        if t is np.str_:
            return str.__str__(x)
        if t is np.dtype or t.__module__ == "numpy.dtypes" and isinstance(x, np.dtype):
            return {"dt": str(x)}
    torch = sys.modules.get("torch")
    if torch is not None:
        if t is torch.Tensor or t is torch.nn.Parameter:
            v = torch.Tensor.detach(x).cpu()
            if v.dtype in (torch.bfloat16, torch.float16):
                v = v.float()
            if v.dtype.is_floating_point or v.dtype.is_complex or v.dtype == torch.bool:
                pass
            elif not str(v.dtype).startswith(("torch.int", "torch.uint")):
                return {"bad": f"a tensor of dtype {v.dtype}"}
            return _array(np, v.numpy())
        if t is torch.Size:
            return {"t": [encode(int(v)) for v in tuple.__iter__(x)]}
        if t is torch.dtype or t is torch.device:
            return {"dt": str(x)}
    return {"bad": _type_name(t)}


def _safe_str(err) -> str:
    try:
        text = BaseException.__str__(err)
    except Exception:  # noqa: BLE001
        text = ""
    text = text.strip().splitlines()
    return text[0][:500] if text else ""


def _exc_names(t) -> list:
    try:
        return [type.__getattribute__(c, "__name__") for c in type.__getattribute__(t, "__mro__")]
    except Exception:  # noqa: BLE001
        return ["?"]


class _Check:
    """Records the arguments of each assertion (only ``got`` in a submission's kernel)."""

    def __init__(self):
        self.full = _A["mode"] == "reference"
        self.runs = True

    def _record(self, method, got, args, kwargs):
        if self.full:
            rest = [encode(a) for a in args]
            kw = {k: encode(v) for k, v in kwargs.items()}
        else:
            rest, kw = [], {}
        _EVENTS.append(["call", method, encode(got), rest, kw])

    def equal(self, got, *args, **kwargs):
        self._record("equal", got, args, kwargs)

    def close(self, got, *args, **kwargs):
        self._record("close", got, args, kwargs)

    def between(self, got, *args, **kwargs):
        self._record("between", got, args, kwargs)

    def true(self, condition, *args, **kwargs):
        self._record("true", condition, args, kwargs)

    def compare(self, left, right, op, *args, **kwargs):
        self._record("compare", (left, right, op), args, kwargs)

    def raises(self, exc_type, fn, *args, what=None, **kw):
        try:
            fn(*args, **kw)
            seen = None
        except NotImplementedError:
            raise
        except BaseException as err:  # noqa: BLE001 - an observation, judged by the grader
            seen = [_exc_names(type(err)), _safe_str(err)]
        extra = [_exc_names(exc_type)[0]] if self.full else []
        self._record("raises", {"raised": seen}, extra, {"what": what} if self.full else {})


class exercise:  # noqa: N801 - the name the check cells use
    """``with exercise(N, title, needs=[...]) as check:`` -- records, never judges."""

    def __init__(self, number, title="", needs=None):
        self.number = number
        self.needs = list(needs or [])
        _EVENTS.append(["begin", encode(number), encode(title)])

    def _missing(self):
        # Only in the trusted reference kernel: the same test and words as the book's checks.
        from labs.course.checks import INSTALL_HINTS, missing_components

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
for _name in ARGS["bind"]:
    USER_NS[_name] = {"exercise": exercise, "Check": _Check, "CheckFailure": AssertionError}.get(
        _name, exercise
    )
try:
    exec(CHECK_CODE, USER_NS)
except BaseException as _err:  # noqa: BLE001 - outside any exercise block: reported as such
    _EVENTS.append(["error", _exc_names(type(_err)), _safe_str(_err)])
_EVENTS.extend(["violation", v] for v in _A.get("violations", ()))
try:
    _line = json.dumps(_EVENTS, allow_nan=False)
except (TypeError, ValueError) as _err:
    _line = json.dumps([["error", ["GraderError"], f"results could not be encoded: {_err}"]])
sys.stdout.flush()
sys.stdout.write("\n" + _A["mark"] + _A["nonce"] + " " + _line + "\n")
sys.stdout.flush()
