"""OpenAI's request bodies as its clients send them, what the tiny GPT honours, and the replies.

The fields are OpenAI's (``openai-python``'s ``completion_create_params``, chat and legacy),
read the way OpenAI reads them:

* ``null`` for an optional field means absent (clients send explicit nulls: ``"stop": null``).
* Types are not coerced (``"max_tokens": "5"`` is an error); numbers are finite and in range.
* Fields whose effect this server has, or whose effect is nothing it could show, are honoured
  or accepted: ``model``, ``prompt`` (one string, or one list of token ids), ``messages`` (see
  :mod:`labs.serving.chat`), ``max_tokens``/``max_completion_tokens``, ``temperature``,
  ``top_p``, ``stop``, ``seed``, ``stream``, ``stream_options``, and the bookkeeping fields
  ``user``, ``metadata``, ``store``, ``service_tier``, ``prompt_cache_*``,
  ``safety_identifier``, ``parallel_tool_calls``, ``prediction`` (a latency hint that never
  changes the output).
* Fields asking for what a 96-character model without tools cannot do are accepted only at
  their default (the value that asks for nothing: ``n`` 1, ``logprobs`` false, ``tools`` [],
  ``response_format`` ``{"type": "text"}``, penalties 0, ``logit_bias`` {}, ...); any other
  value is a 400 naming the field, code ``unsupported_value``, as OpenAI answers for a model
  that lacks a feature.
* vLLM's sampling extensions that benchmarks send are honoured as vLLM does
  (:mod:`labs.serving.stopping`): ``ignore_eos``, ``min_tokens``, and
  ``stream_options.continuous_usage_stats`` (usage in every chunk).
* Any other field (another server's extension, a typo) is served and *reported*: the response
  carries ``Warning: 299 - "unsupported fields ignored: ..."`` (the HTTP warning format
  Kubernetes uses) naming them, so a benchmark's request is served and its author can see what
  had no effect.

Every problem is an :class:`APIError` (400 for a bad body, as OpenAI answers, not FastAPI's
422) that the app turns into OpenAI's error object::

    {"error": {"message": "...", "type": "invalid_request_error", "param": "top_p", "code": null}}
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError

from labs.serving.chat import ChatMessage, ContentError, chat_prompt

__all__ = [
    "APIError",
    "CompletionRequest",
    "ChatCompletionRequest",
    "parse_request",
    "ignored_fields_warning",
    "completion_response",
    "chunk",
    "usage",
    "error_body",
]

INT64 = 2**63
DEFAULT_MAX_TOKENS = 16  # without max_tokens, as OpenAI's completions API (and this server)
Penalty = Field(None, ge=-2.0, le=2.0)


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


class _Open(BaseModel):  # strict types; unknown keys kept in model_extra, reported, ignored
    model_config = ConfigDict(extra="allow", strict=True, allow_inf_nan=False)


class StreamOptions(_Open):
    include_usage: bool | None = None
    continuous_usage_stats: bool | None = None  # vLLM: usage in every chunk (with include_usage)
    include_obfuscation: bool | None = None  # OpenAI's padding against side channels: none here


class _Sampling(_Open):
    _input: str | list[int] = PrivateAttr("")  # set by parse_request
    model: str | None = Field(None, max_length=256)
    max_tokens: int | None = Field(None, ge=1, le=INT64 - 1)
    temperature: float | None = Field(None, ge=0.0, le=2.0)
    top_p: float | None = Field(None, gt=0.0, le=1.0)
    stop: str | list[str] | None = None
    seed: int | None = Field(None, ge=-INT64, le=INT64 - 1)
    stream: bool | None = None
    stream_options: StreamOptions | None = None
    n: int | None = Field(None, ge=1, le=INT64 - 1)
    user: str | None = Field(None, max_length=256)
    frequency_penalty: float | None = Penalty
    presence_penalty: float | None = Penalty
    logit_bias: dict[str, int] | None = None
    # vLLM's extensions
    ignore_eos: bool | None = None
    min_tokens: int | None = Field(None, ge=0, le=INT64 - 1)

    def stops(self) -> tuple[str, ...]:
        stop = [self.stop] if isinstance(self.stop, str) else list(self.stop or [])
        if len(stop) > 4 or not all(1 <= len(s) <= 32 for s in stop):
            raise APIError(400, "stop: at most 4 strings of 1 to 32 characters", param="stop")
        return tuple(stop)

    @property
    def model_input(self) -> str | list[int]:
        """The one prompt the model continues: text (chat: the template applied) or token ids."""
        return self._input

    def new_tokens(self) -> int:
        """``max_completion_tokens`` (chat), else ``max_tokens``, else :data:`DEFAULT_MAX_TOKENS`."""
        given = getattr(self, "max_completion_tokens", None) or self.max_tokens
        return given or DEFAULT_MAX_TOKENS

    @property
    def sampling(self) -> tuple[float, float]:
        """(temperature, top_p), OpenAI's defaults (1, 1) for absent ones."""
        return (1.0 if self.temperature is None else self.temperature,
                1.0 if self.top_p is None else self.top_p)  # fmt: skip


class CompletionRequest(_Sampling):
    """The body of ``POST /v1/completions``."""

    prompt: str | list[str] | list[int] | list[list[int]]
    best_of: int | None = Field(None, ge=1, le=INT64 - 1)
    echo: bool | None = None
    logprobs: int | None = Field(None, ge=0, le=5)
    suffix: str | None = None


class ChatCompletionRequest(_Sampling):
    """The body of ``POST /v1/chat/completions``."""

    messages: list[ChatMessage] = Field(min_length=1, max_length=64)
    max_completion_tokens: int | None = Field(None, ge=1, le=INT64 - 1)
    logprobs: bool | None = None
    top_logprobs: int | None = Field(None, ge=0, le=20)
    tools: list[dict] | None = None
    tool_choice: Literal["none", "auto", "required"] | dict | None = None
    functions: list[dict] | None = None
    function_call: Literal["none", "auto"] | dict | None = None
    parallel_tool_calls: bool | None = None
    response_format: dict | None = None
    modalities: list[Literal["text", "audio"]] | None = None
    audio: dict | None = None
    reasoning_effort: str | None = None
    verbosity: str | None = None
    web_search_options: dict | None = None
    prediction: dict | None = None
    metadata: dict[str, str] | None = Field(None, max_length=16)
    store: bool | None = None
    service_tier: str | None = None
    prompt_cache_key: str | None = None
    prompt_cache_retention: str | None = None
    prompt_cache_options: dict | None = None
    safety_identifier: str | None = None
    moderation: dict | None = None


# Fields this model cannot honour: (is the value one that asks for nothing?, that value).
NEVER = (lambda v: False, "null")
CANNOT: dict[str, tuple[Any, str]] = {
    "n": (lambda v: v == 1, "1"),
    "best_of": (lambda v: v == 1, "1"),
    "echo": (lambda v: v is False, "false"),
    "suffix": (lambda v: v == "", '""'),
    "frequency_penalty": (lambda v: v == 0, "0"),
    "presence_penalty": (lambda v: v == 0, "0"),
    "logit_bias": (lambda v: v == {}, "{}"),
    "logprobs": (lambda v: v is False, "false or null"),
    "top_logprobs": (lambda v: v == 0, "0"),
    "tools": (lambda v: v == [], "[]"),
    "functions": (lambda v: v == [], "[]"),
    "tool_choice": (lambda v: v in ("none", "auto"), '"none" (no tools)'),
    "function_call": (lambda v: v in ("none", "auto"), '"none" (no functions)'),
    "response_format": (lambda v: v == {"type": "text"}, '{"type": "text"}'),
    "modalities": (lambda v: v == ["text"], '["text"]'),
    "audio": NEVER,
    "reasoning_effort": (lambda v: v == "none", '"none" (not a reasoning model)'),
    "verbosity": NEVER,
    "web_search_options": NEVER,
    "moderation": NEVER,
}


def _refuse_what_cannot_be_honoured(body: _Sampling) -> None:
    for name, (neutral, default) in CANNOT.items():
        value = getattr(body, name, None)
        if value is not None and not neutral(value):
            shown = json.dumps(value)[:60]
            raise APIError(400, f"Unsupported value: '{name}' does not support {shown} with "
                           f"this model. Only the default ({default}) is supported.", param=name,
                           code="unsupported_value")  # fmt: skip


def parse_request(kind: type[_Sampling], raw: bytes) -> _Sampling:
    """Validate a JSON body; :class:`APIError` (400) names the first offending field."""
    try:
        body = kind.model_validate_json(raw or b"null")
    except ValidationError as err:
        first = err.errors(include_input=False, include_url=False)[0]
        where = ".".join(str(p) for p in first["loc"]) or "body"
        if first["type"] == "json_invalid":
            raise APIError(400, "the body is not valid JSON", param=None) from None
        raise APIError(400, f"{where}: {first['msg']}", param=where.split(".")[0]) from None
    _refuse_what_cannot_be_honoured(body)
    body.stops()
    if isinstance(body, ChatCompletionRequest):
        try:
            body._input = chat_prompt(body.messages)
        except ContentError as err:
            raise APIError(400, str(err), param=err.param, code="unsupported_value") from None
    else:
        prompt = body.prompt
        many = isinstance(prompt, list) and not (prompt and isinstance(prompt[0], int))
        prompts = prompt if many else [prompt]  # strings, or lists of token ids
        if len(prompts) != 1:
            raise APIError(400, f"prompt: one prompt per request, got {len(prompts)}",
                           param="prompt")  # fmt: skip
        if len(prompts[0]) == 0:
            raise APIError(400, "prompt: empty", param="prompt")
        body._input = prompts[0]
    if (body.min_tokens or 0) > body.new_tokens():
        raise APIError(400, f"min_tokens: {body.min_tokens} is more than max_tokens "
                       f"({body.new_tokens()})", param="min_tokens")  # fmt: skip
    return body


def ignored_fields(body: BaseModel) -> list[str]:
    """Dotted names of the unknown fields of ``body``, its stream options and its messages."""
    names = list(body.model_extra or {})
    if getattr(body, "stream_options", None) is not None:
        names += [f"stream_options.{k}" for k in body.stream_options.model_extra or {}]
    for i, m in enumerate(getattr(body, "messages", None) or []):
        names += [f"messages[{i}].{k}" for k in m.model_extra or {}]
    return names


def ignored_fields_warning(body: BaseModel) -> dict[str, str]:
    """``{"Warning": '299 - "unsupported fields ignored: ..."'}`` or ``{}``; the names are
    shortened to printable ASCII (a header carries nothing else), at most 8 of them."""
    names = ignored_fields(body)
    if not names:
        return {}
    safe = ["".join(c if " " <= c <= "~" and c not in '"\\' else "?" for c in n)[:48]
            for n in names[:8]]  # fmt: skip
    more = f" and {len(names) - 8} more" if len(names) > 8 else ""
    return {"Warning": f'299 - "unsupported fields ignored: {", ".join(safe)}{more}"'}


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
