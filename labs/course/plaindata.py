"""Values as plain data, and the facts about them the grader judges (type, dtype, memory...).

Used on both sides.  In a submission's kernel :mod:`labs.course.recorder` runs this file's text
(sent by the grader, never imported from the kernel's ``labs``) to turn each value a check asks
for into JSON: :func:`encode` keeps exact ``int``/``float``/``str``/``bool``/``None``, containers
of those, numpy arrays and torch tensors of exact type, and names anything else by its type
without calling a method it defines; :func:`facts` describes the object itself: its exact type
and the qualified names of its classes, and for a tensor or array its dtype, shape, strides,
``requires_grad``, ``is_leaf``, device, contiguity and memory (a storage token numbered in order of
first appearance, and the byte range it covers), so that the grader can compare a type, a flag or
an aliasing with the reference run's without the kernel judging anything.  In the book, the
checks of :mod:`labs.course.checks` call :func:`facts` on the live objects.
"""

# This file is also executed as text in a kernel (labs.course.snippet): only the standard
# library at import time; numpy and torch are taken from sys.modules when the values need them.

import base64
import collections
import sys
import types

_PLAIN = (type(None), bool, int, float, str)
_DICTS = tuple(getattr(collections, n) for n in ("OrderedDict", "defaultdict"))
_NP_KINDS = "biufc"
_ITEMS = 64  #: facts describe the items of a tuple or list up to this length


def _np_scalars(np):
    names = (
        "bool_ int8 int16 int32 int64 uint8 uint16 uint32 uint64 float16 float32 float64 "
        "complex64 complex128 longlong ulonglong"
    ).split()
    return tuple(getattr(np, n) for n in names if hasattr(np, n))


def qualname(t) -> str:
    """``module.QualName`` of a class, read without calling anything the class defines."""
    try:
        return (
            f"{type.__getattribute__(t, '__module__')}.{type.__getattribute__(t, '__qualname__')}"
        )
    except Exception:  # noqa: BLE001 - a hostile metaclass
        return "an unknown type"


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


def _array(np, arr):
    arr = np.array(arr, copy=True, order="C")  # (np.ascontiguousarray would make 0-d arrays 1-d)
    if arr.dtype.kind not in _NP_KINDS:
        return {"bad": f"a numpy array of dtype {arr.dtype}"}
    return {"nd": [arr.dtype.str, list(arr.shape), base64.b64encode(arr.tobytes()).decode()]}


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
    if t is dict or t in _DICTS:
        return {"d": [[encode(k, depth + 1), encode(v, depth + 1)] for k, v in dict.items(x)]}
    if t is collections.Counter:  # a multiset: compared as one (<=, ==) by the grader
        return {"counter": [[encode(k, depth + 1), encode(v, depth + 1)] for k, v in dict.items(x)]}
    if t is set or t is frozenset:
        return {"set": [encode(v, depth + 1) for v in x]}
    if t is range:
        return {"l": list(x)} if len(x) <= 10**6 else {"bad": "a range of over a million items"}
    if t is complex:
        return {"c": [encode(x.real), encode(x.imag)]}
    if t is bytes:
        return {"b": base64.b64encode(x).decode()}
    if isinstance(x, type):  # a class, whatever its metaclass (torch.Tensor's is not type)
        return _class(x)
    np = sys.modules.get("numpy")
    if np is not None:
        if t is np.ndarray:
            return _array(np, x)
        if t in _np_scalars(np):
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
            if not (v.dtype.is_floating_point or v.dtype.is_complex or v.dtype == torch.bool):
                if not str(v.dtype).startswith(("torch.int", "torch.uint")):
                    return {"bad": f"a tensor of dtype {v.dtype}"}
            return _array(np, v.numpy())
        if t is torch.Size:
            return {"t": [encode(int(v)) for v in tuple.__iter__(x)]}
        if t is torch.dtype or t is torch.device:
            return {"dt": str(x)}
    return {"bad": qualname(t)}


def _byte_bounds(np):
    """numpy's byte_bounds (moved to numpy.lib.array_utils in numpy 2)."""
    found = getattr(np, "byte_bounds", None)
    if found is None:
        from numpy.lib.array_utils import byte_bounds as found
    return found


def _mro(t) -> list:
    try:
        return [qualname(c) for c in type.__getattribute__(t, "__mro__")]
    except Exception:  # noqa: BLE001
        return [qualname(t)]


def facts(x, memory: dict, depth: int = 0) -> dict:
    """What the grader may judge about ``x`` besides its value (see the module docstring).

    ``memory`` numbers the storages met so far (``{address: token}``): two values share memory
    when their tokens are equal and their byte ranges ``[lo, hi)`` overlap.
    """
    t = type(x)
    out = {"type": qualname(t), "mro": _mro(t)}
    np, torch = sys.modules.get("numpy"), sys.modules.get("torch")
    if torch is not None and (t is torch.Tensor or t is torch.nn.Parameter):
        T = torch.Tensor
        storage = T.untyped_storage(x)
        size, stride, item = tuple(T.size(x)), tuple(T.stride(x)), T.element_size(x)
        lo = T.storage_offset(x) * item
        span = 0 if 0 in size else (sum((n - 1) * s for n, s in zip(size, stride)) + 1) * item
        base = storage.data_ptr()
        out.update(
            dtype=str(x.dtype), shape=list(size), strides=list(stride),
            requires_grad=bool(T.requires_grad.__get__(x)), is_leaf=bool(T.is_leaf.__get__(x)),
            device=str(T.device.__get__(x)), contiguous=bool(T.is_contiguous(x)),
            memory=[memory.setdefault(base, len(memory)), lo, lo + span],
        )  # fmt: skip
    elif np is not None and t is np.ndarray:
        root = x
        while isinstance(root.base, np.ndarray):
            root = root.base
        base = root.__array_interface__["data"][0]
        if x.size:
            lo, hi = _byte_bounds(np)(x)
        else:
            lo = hi = x.__array_interface__["data"][0]
        out.update(
            dtype=str(x.dtype), shape=list(x.shape), strides=list(x.strides),
            contiguous=bool(x.flags["C_CONTIGUOUS"]),
            memory=[memory.setdefault(base, len(memory)), lo - base, hi - base],
        )  # fmt: skip
    elif (t is tuple or t is list) and depth < 2 and len(x) <= _ITEMS:
        out["items"] = [facts(v, memory, depth + 1) for v in x]
    elif t is types.FunctionType:
        out["names"] = _code_names(types.FunctionType.__code__.__get__(x))
    return out


def _code_names(code) -> list:
    """The global and attribute names a function's code (and the code nested in it) refers to."""
    names, todo = set(), [code]
    while todo and len(names) < 10_000:
        c = todo.pop()
        names.update(str(n) for n in c.co_names)
        todo.extend(k for k in c.co_consts if type(k) is types.CodeType)
    return sorted(names)
