"""OpenAI's error object, and a request body's validation errors in OpenAI's words.

Every problem the service answers is an :class:`APIError`: an HTTP status and OpenAI's error
object, ``{"error": {"message", "type", "param", "code"}}``. A body that fails validation is
answered as OpenAI's API answers it: ``param`` is the path of the offending value as OpenAI
writes it (``messages[0].content``, not pydantic's ``messages.0.content``), ``code`` says what
kind of problem it is, and the message says what was expected and what came instead, in full::

    {"error": {"message": "Invalid 'top_p': decimal above maximum value. Expected a value <= 1,
     but got 1.5 instead.", "type": "invalid_request_error", "param": "top_p",
     "code": "decimal_above_max_value"}}

The codes are the ones OpenAI's API returns for the same mistakes: ``invalid_type``,
``missing_required_parameter``, ``integer_below_min_value`` (``decimal_...``, ``..._above_max_
value``), ``empty_array``, ``array_above_max_length``, ``string_above_max_length``,
``invalid_value``.
"""

from __future__ import annotations

import json
import re

from pydantic import ValidationError

__all__ = ["APIError", "error_body", "from_validation_error", "json_path"]


class APIError(Exception):
    """An error answered as ``{"error": {...}}`` with an HTTP status (4xx, 5xx)."""

    def __init__(self, status, message, type="invalid_request_error", param=None, code=None,
                 headers=None):  # fmt: skip
        super().__init__(message)
        self.status, self.message, self.type = status, message, type
        self.param, self.code, self.headers = param, code, headers or {}

    def body(self) -> dict:
        return error_body(self.message, self.type, self.param, self.code)


def error_body(message: str, type: str, param: str | None = None, code: str | None = None):
    """OpenAI's error object."""
    return {"error": {"message": message, "type": type, "param": param, "code": code}}


# pydantic names the member of a union it tried in the location ('str', 'list[dict[any,any]]',
# "literal['none','auto']"): those are not parts of the JSON path
_UNION_TAG = re.compile(r"^(str|int|float|bool|none|[a-z-]+\[.*\])$")
_EXPECTED = {"int_type": "an integer", "int_from_float": "an integer", "float_type": "a number",
             "string_type": "a string", "bool_type": "a boolean", "list_type": "an array",
             "dict_type": "an object", "model_type": "an object",
             "model_attributes_type": "an object"}  # fmt: skip


def json_path(loc) -> str:
    """``('messages', 0, 'content')`` -> ``'messages[0].content'`` (union tags dropped)."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif not _UNION_TAG.match(part):
            out += f".{part}" if out else part
    return out


def _within(path: str, base: str) -> bool:
    return path == base or path.startswith((base + "[", base + ".")) or not base


def _kind(value) -> str:
    """How OpenAI names a JSON value's type in its messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    return {int: "an integer", float: "a decimal", str: "a string", list: "an array",
            dict: "an object"}.get(type(value), type(value).__name__)  # fmt: skip


def _shown(value) -> str:
    """A value for a message: itself when short, else what it is (never a cut piece of it)."""
    text = json.dumps(value)
    return text if len(text) <= 80 else f"{_kind(value)} of length {len(value)}"


def from_validation_error(err: ValidationError) -> APIError:
    """The 400 OpenAI's API would answer for the first problem pydantic found."""
    errors = err.errors(include_url=False)
    base = json_path(errors[0]["loc"])
    inside = [e for e in errors if _within(json_path(e["loc"]), base)]
    first = max(inside, key=lambda e: len(json_path(e["loc"])))  # [1] for stop: stop[0]
    kind, ctx, value = first["type"], first.get("ctx") or {}, first.get("input")
    param = json_path(first["loc"]) or None
    where = f"'{param}'" if param else "the body"
    if kind == "json_invalid":
        return APIError(400, "We could not parse the JSON body of your request: it is not valid "
                        "JSON (send a JSON object with Content-Type: application/json).")  # fmt: skip
    if param is None and kind in ("model_type", "model_attributes_type"):
        return APIError(400, f"The body must be a JSON object, got {_kind(value)}.",
                        code="invalid_type")  # fmt: skip
    if kind == "missing":
        return APIError(400, f"Missing required parameter: {where}.", param=param,
                        code="missing_required_parameter")  # fmt: skip
    if kind in _EXPECTED:  # a union reports each member it tried: name them all
        same = [e["type"] for e in errors if json_path(e["loc"]) == (param or "")]
        wanted = list(dict.fromkeys(_EXPECTED[t] for t in same if t in _EXPECTED))
        expected = wanted[0] if len(wanted) == 1 else "one of " + " or ".join(wanted)
        return APIError(400, f"Invalid type for {where}: expected {expected}, but got "
                        f"{_kind(value)} instead.", param=param, code="invalid_type")  # fmt: skip
    bounds = {"greater_than_equal": ("below minimum", ">=", "ge", "below_min"),
              "greater_than": ("below minimum", ">", "gt", "below_min"),
              "less_than_equal": ("above maximum", "<=", "le", "above_max"),
              "less_than": ("above maximum", "<", "lt", "above_max")}  # fmt: skip
    if kind in bounds:
        words, op, key, tag = bounds[kind]
        number = "integer" if isinstance(value, int) else "decimal"
        return APIError(400, f"Invalid {where}: {number} {words} value. Expected a value {op} "
                        f"{ctx[key]}, but got {value} instead.", param=param,
                        code=f"{number}_{tag}_value")  # fmt: skip
    if kind == "too_short" and isinstance(value, list) and not value:
        return APIError(400, f"Invalid {where}: empty array. Expected an array with minimum "
                        f"length {ctx['min_length']}, but got an empty array instead.",
                        param=param, code="empty_array")  # fmt: skip
    if kind in ("too_long", "string_too_long"):
        what = (
            "string" if isinstance(value, str) else "array" if isinstance(value, list) else "object"
        )
        return APIError(400, f"Invalid {where}: {what} too long. Expected {_kind(value)} with "
                        f"maximum length {ctx['max_length']}, but got one with length "
                        f"{len(value)} instead.", param=param,
                        code=f"{what}_above_max_length")  # fmt: skip
    if kind == "literal_error":
        return APIError(400, f"Invalid value for {where}: {_shown(value)}. Supported values are: "
                        f"{ctx['expected']}.", param=param, code="invalid_value")  # fmt: skip
    if kind == "string_pattern_mismatch":
        return APIError(400, f"Invalid {where}: string does not match pattern. Expected a string "
                        f"that matches the pattern '{ctx['pattern']}'.", param=param,
                        code="invalid_value")  # fmt: skip
    return APIError(400, f"Invalid {where}: {first['msg']}.", param=param, code="invalid_value")
