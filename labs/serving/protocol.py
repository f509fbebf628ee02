"""The OpenAI-compatible subset the tiny GPT honours: request bodies, responses, error objects.

Requests are validated strictly: types are not coerced (``"max_tokens": "5"`` is an error),
numbers must be finite and in range, and unknown fields are rejected, naming the field. Every
problem is an :class:`APIError` (status 400 for a bad body, as OpenAI answers, not FastAPI's
422), which the app turns into OpenAI's error object::

    {"error": {"message": "...", "type": "invalid_request_error", "param": "top_p", "code": null}}

Supported fields (both endpoints): ``model`` (optional; must name the served model), ``max_tokens``
(chat also ``max_completion_tokens``), ``temperature`` in [0, 2], ``top_p`` in (0, 1], ``stop``
(a string or up to 4), ``seed`` (a 64-bit integer), ``stream``, ``stream_options.include_usage``,
``n`` (only 1), ``user`` (accepted and ignored). ``/v1/completions`` takes one ``prompt``
string; ``/v1/chat/completions`` takes ``messages`` and renders them with :func:`chat_prompt`.
"""

from __future__ import annotations

import time
import uuid
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

__all__ = [
    "APIError",
    "CompletionRequest",
    "ChatCompletionRequest",
    "parse_request",
    "chat_prompt",
    "completion_response",
    "chunk",
    "error_body",
]

INT64 = 2**63


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


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)


class StreamOptions(_Strict):
    include_usage: bool = False


class _Sampling(_Strict):
    model: str | None = Field(None, max_length=64)
    max_tokens: int | None = Field(None, ge=1, le=INT64 - 1)
    temperature: float = Field(1.0, ge=0.0, le=2.0)
    top_p: float = Field(1.0, gt=0.0, le=1.0)
    stop: str | list[str] | None = None
    seed: int | None = Field(None, ge=-INT64, le=INT64 - 1)
    stream: bool = False
    stream_options: StreamOptions | None = None
    n: int = Field(1, ge=1, le=INT64 - 1)
    user: str | None = Field(None, max_length=256)

    def stops(self) -> tuple[str, ...]:
        stop = [self.stop] if isinstance(self.stop, str) else list(self.stop or [])
        if len(stop) > 4 or not all(1 <= len(s) <= 32 for s in stop):
            raise APIError(400, "stop: at most 4 strings of 1 to 32 characters", param="stop")
        return tuple(stop)


class CompletionRequest(_Sampling):
    """The body of ``POST /v1/completions``."""

    prompt: str = Field(min_length=1)


class ChatMessage(_Strict):
    role: Literal["system", "user", "assistant"]
    content: str
    name: str | None = Field(None, max_length=64)


class ChatCompletionRequest(_Sampling):
    """The body of ``POST /v1/chat/completions``."""

    messages: list[ChatMessage] = Field(min_length=1, max_length=64)
    max_completion_tokens: int | None = Field(None, ge=1, le=INT64 - 1)


def parse_request(kind: type[_Sampling], raw: bytes) -> _Sampling:
    """Validate a JSON body; :class:`APIError` (400) names the first offending field."""
    try:
        body = kind.model_validate_json(raw or b"null")
    except ValidationError as err:
        first = err.errors(include_input=False, include_url=False)[0]
        where = ".".join(str(p) for p in first["loc"]) or "body"
        if first["type"] == "json_invalid":
            raise APIError(400, "the body is not valid JSON", param=None) from None
        if first["type"] == "extra_forbidden":
            msg = f"{where}: unknown or unsupported field (see the API documentation)"
        else:
            msg = f"{where}: {first['msg']}"
        raise APIError(400, msg, param=where.split(".")[0]) from None
    if body.n != 1:
        raise APIError(400, f"n: only n=1 is supported, got {body.n}", param="n")
    body.stops()
    return body


def chat_prompt(messages) -> str:
    """The tiny GPT's chat template: a system line, then ``User:``/``Assistant:`` turns, ending
    with ``Assistant:`` for the model to continue. The endpoint also stops at ``"\\nUser:"``.

    >>> chat_prompt([{"role": "user", "content": "Hi"}])
    'User: Hi\\nAssistant:'
    """
    lines = []
    for m in messages:
        role, content = (m.role, m.content) if hasattr(m, "role") else (m["role"], m["content"])
        lines.append(content if role == "system" else f"{role.capitalize()}: {content}")
    return "\n".join(lines + ["Assistant:"])


def completion_response(chat: bool, model: str, text: str, finish: str, n_prompt: int,
                        n_out: int) -> dict:  # fmt: skip
    """A ``text_completion`` or ``chat.completion`` object with its usage."""
    choice = {"index": 0, "finish_reason": finish, "logprobs": None}
    if chat:
        choice["message"] = {"role": "assistant", "content": text}
    else:
        choice["text"] = text
    return {
        "id": ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex[:24],
        "object": "chat.completion" if chat else "text_completion",
        "created": int(time.time()),
        "model": model,
        "choices": [choice],
        "usage": usage(n_prompt, n_out),
    }


def usage(n_prompt: int, n_out: int) -> dict:
    return {"prompt_tokens": n_prompt, "completion_tokens": n_out,
            "total_tokens": n_prompt + n_out}  # fmt: skip


def chunk(chat: bool, rid: str, model: str, created: int, text: str | None,
          finish: str | None = None, role: bool = False) -> dict:  # fmt: skip
    """One streamed chunk (``text_completion`` or ``chat.completion.chunk``)."""
    choice: dict = {"index": 0, "finish_reason": finish, "logprobs": None}
    if chat:
        delta = {"role": "assistant"} if role else {}
        if text is not None:
            delta["content"] = text
        choice["delta"] = delta
    else:
        choice["text"] = text or ""
    obj = "chat.completion.chunk" if chat else "text_completion"
    return {"id": rid, "object": obj, "created": created, "model": model, "choices": [choice]}
