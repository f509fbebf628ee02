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

How many tokens a request may generate when it does not say (:func:`default_max_tokens`):
16 on the completions endpoint (OpenAI's documented default), and on the chat endpoint, as
OpenAI and vLLM, no default limit: the answer runs to the end of its turn or of the context.

Every problem is an :class:`~labs.serving.errors.APIError` (400 for a bad body, as OpenAI
answers, not FastAPI's 422) that the app turns into OpenAI's error object, with ``param`` and
``code`` as OpenAI sets them (:mod:`labs.serving.errors`).
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError

from labs.serving.chat import ChatMessage, ContentError, chat_prompt
from labs.serving.errors import APIError, from_validation_error

__all__ = [
    "CompletionRequest",
    "ChatCompletionRequest",
    "parse_request",
    "default_max_tokens",
    "ignored_fields_warning",
]

INT64 = 2**63
COMPLETIONS_MAX_TOKENS = 16  # without max_tokens: OpenAI's documented default (completions)
Penalty = Field(None, ge=-2.0, le=2.0)


class _Open(BaseModel):  # strict types; unknown keys kept in model_extra, reported, ignored
    model_config = ConfigDict(extra="allow", strict=True, allow_inf_nan=False)


class StreamOptions(_Open):
    include_usage: bool | None = None
    continuous_usage_stats: bool | None = None  # vLLM: usage in every chunk (with include_usage)
    include_obfuscation: bool | None = None  # OpenAI's padding against side channels: none here


class _Sampling(_Open):
    _input: str | list[int] = PrivateAttr("")  # set by parse_request
    model: str | None = Field(None, max_length=256)
    temperature: float | None = Field(None, ge=0.0, le=2.0)
    top_p: float | None = Field(None, ge=0.0, le=1.0)  # 0: the most likely token (greedy)
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
        if len(stop) > 4:
            raise APIError(400, f"Invalid 'stop': array too long. Expected an array with maximum "
                           f"length 4, but got an array with length {len(stop)} instead.",
                           param="stop", code="array_above_max_length")  # fmt: skip
        for i, s in enumerate(stop):
            if not 1 <= len(s) <= 32:
                where = "stop" if isinstance(self.stop, str) else f"stop[{i}]"
                raise APIError(400, f"Invalid '{where}': a stop string has 1 to 32 characters, "
                               f"got {len(s)}.", param=where, code="invalid_value")  # fmt: skip
        return tuple(stop)

    @property
    def model_input(self) -> str | list[int]:
        """The one prompt the model continues: text (chat: the template applied) or token ids."""
        return self._input

    @property
    def asked_tokens(self) -> tuple[str, int] | None:
        """``(field, value)`` of the limit the client sent (chat: ``max_completion_tokens``
        first), or None when it sent none."""
        for name in ("max_completion_tokens", "max_tokens"):
            if getattr(self, name, None) is not None:
                return name, getattr(self, name)
        return None

    @property
    def sampling(self) -> tuple[float, float]:
        """(temperature, top_p), OpenAI's defaults (1, 1) for absent ones."""
        return (1.0 if self.temperature is None else self.temperature,
                1.0 if self.top_p is None else self.top_p)  # fmt: skip


class CompletionRequest(_Sampling):
    """The body of ``POST /v1/completions``."""

    prompt: str | list[str] | list[int] | list[list[int]]
    max_tokens: int | None = Field(None, ge=0, le=INT64 - 1)  # 0: an empty completion
    best_of: int | None = Field(None, ge=1, le=INT64 - 1)
    echo: bool | None = None
    logprobs: int | None = Field(None, ge=0, le=5)
    suffix: str | None = None


class ChatCompletionRequest(_Sampling):
    """The body of ``POST /v1/chat/completions``."""

    messages: list[ChatMessage] = Field(min_length=1, max_length=64)
    max_tokens: int | None = Field(None, ge=1, le=INT64 - 1)
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


def _shown(value) -> str:
    """A refused value in a message: itself when short, else what it is, never a cut piece."""
    text = json.dumps(value)
    if len(text) <= 80:
        return text
    kind = {list: "an array", dict: "an object", str: "a string"}.get(type(value), "a value")
    return f"{kind} of length {len(value)}"


def _refuse_what_cannot_be_honoured(body: _Sampling) -> None:
    for name, (neutral, default) in CANNOT.items():
        value = getattr(body, name, None)
        if value is not None and not neutral(value):
            raise APIError(400, f"Unsupported value: '{name}' does not support {_shown(value)} "
                           f"with this model. Only the default ({default}) is supported.",
                           param=name, code="unsupported_value")  # fmt: skip


def parse_request(kind: type[_Sampling], raw: bytes) -> _Sampling:
    """Validate a JSON body; :class:`APIError` (400) names the first offending field."""
    try:
        body = kind.model_validate_json(raw or b"null")
    except ValidationError as err:
        raise from_validation_error(err) from None
    _refuse_what_cannot_be_honoured(body)
    body.stops()
    if body.stream_options is not None and not body.stream:
        raise APIError(400, "The 'stream_options' parameter is only allowed when 'stream' is "
                       "enabled.", param="stream_options", code="invalid_value")  # fmt: skip
    if isinstance(body, ChatCompletionRequest):
        try:
            body._input = chat_prompt(body.messages)
        except ContentError as err:
            raise APIError(400, str(err), param=err.param, code=err.code) from None
    else:
        prompt = body.prompt
        many = isinstance(prompt, list) and not (prompt and isinstance(prompt[0], int))
        prompts = prompt if many else [prompt]  # strings, or lists of token ids
        if len(prompts) != 1:
            raise APIError(400, f"Unsupported value: 'prompt' holds {len(prompts)} prompts; "
                           "this server takes one prompt per request.", param="prompt",
                           code="unsupported_value")  # fmt: skip
        if len(prompts[0]) == 0:
            raise APIError(400, "Invalid 'prompt': empty.", param="prompt", code="invalid_value")
        body._input = prompts[0]
    return body  # what the context allows is checked with the prompt's tokens (app)


def default_max_tokens(chat: bool, room: int, limit: int) -> int:
    """Tokens a request may generate when it sent no limit: 16 on the completions endpoint
    (OpenAI's documented default); on the chat endpoint, what the context leaves after the
    prompt (``room``), at most the server's ``limit`` -- the answer ends at the end of its turn
    (or of the context), as OpenAI and vLLM generate without a default cap."""
    return min(COMPLETIONS_MAX_TOKENS, limit) if not chat else max(0, min(room, limit))


def ignored_fields(body: BaseModel) -> list[str]:
    """Dotted names of the unknown fields of ``body``, its stream options and its messages."""
    names = list(body.model_extra or {})
    if getattr(body, "stream_options", None) is not None:
        names += [f"stream_options.{k}" for k in body.stream_options.model_extra or {}]
    for i, m in enumerate(getattr(body, "messages", None) or []):
        names += [f"messages[{i}].{k}" for k in m.model_extra or {}]
        if m.name is not None and m.role in ("system", "developer"):  # see chat.chat_prompt
            names.append(f"messages[{i}].name")
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
