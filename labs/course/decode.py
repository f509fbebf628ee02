"""Read what a kernel printed: the recorded events, and plain data back into Python values.

The grader's side of :mod:`labs.course.plaindata`: :func:`parse_events` finds the one line a check
printed under its nonce, :func:`decode` turns each recorded value back into plain Python (numbers,
strings, containers, numpy arrays; a dtype, device or class as an
:class:`~labs.course.values.Opaque` name) and anything malformed into :class:`NotPlain`, which
fails the assertion that gets it.  Nothing here runs code from the kernel.
"""

from __future__ import annotations

import base64
import json
from collections import Counter
from dataclasses import dataclass
from typing import Any

import numpy as np

from labs.course.values import Opaque

__all__ = ["NotPlain", "contains_not_plain", "decode", "decode_facts", "parse_events"]


@dataclass(frozen=True)
class NotPlain:
    """A got value that was not plain data (only its type name came back)."""

    what: str

    def __repr__(self) -> str:
        return f"<{self.what}>"


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
    """Plain data from :func:`labs.course.plaindata.encode`'s JSON (malformed: :class:`NotPlain`)."""
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
        if tag == "raised" and (v is None or _raised_ok(v)):
            return {"raised": v}
    except (ValueError, TypeError, KeyError):
        pass
    return NotPlain("malformed result data")


def _raised_ok(v: Any) -> bool:
    return (
        isinstance(v, list) and len(v) == 2 and isinstance(v[0], list) and len(v[0]) > 0
        and all(isinstance(n, str) for n in v[0]) and isinstance(v[1], str)
    )  # fmt: skip


_FACT_TYPES = {
    "type": str, "dtype": str, "device": str, "requires_grad": bool, "is_leaf": bool,
    "contiguous": bool,
}  # fmt: skip


def decode_facts(x: Any, depth: int = 0) -> dict:
    """The facts a kernel recorded, keeping only well-formed entries (others are left out)."""
    if not isinstance(x, dict) or depth > 2:
        return {}
    out: dict = {}
    for name, kind in _FACT_TYPES.items():
        if isinstance(x.get(name), kind):
            out[name] = x[name]
    for name in ("mro", "names", "shape", "strides", "memory"):
        v = x.get(name)
        want = str if name in ("mro", "names") else int
        if isinstance(v, list) and all(type(e) is want for e in v):
            out[name] = v
    if isinstance(x.get("items"), list):
        out["items"] = [decode_facts(e, depth + 1) for e in x["items"]]
    return out


def contains_not_plain(x: Any) -> NotPlain | None:
    """The first :class:`NotPlain` inside ``x``, if any."""
    if isinstance(x, NotPlain):
        return x
    if isinstance(x, tuple | list | set):
        return next((n for e in x if (n := contains_not_plain(e))), None)
    if isinstance(x, dict):
        return next((n for kv in x.items() for e in kv if (n := contains_not_plain(e))), None)
    return None


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
