"""The replies: OpenAI's completion objects, or their chunks as server-sent events.

A reply is a ``text_completion`` or ``chat.completion`` object with its usage. A streamed reply
is ``text/event-stream``: one ``data: {json}`` event per chunk of text, a last chunk with the
``finish_reason``, and ``data: [DONE]``. With ``stream_options.include_usage`` a
chunk with ``"choices": []`` and the usage comes before ``[DONE]`` (the others carry
``"usage": null``); with vLLM's ``continuous_usage_stats`` every chunk carries the usage so far.
A generation that fails after the first event ends with an error event and ``[DONE]``: the
client is never left waiting. A client that leaves mid-stream cancels its request.
"""

from __future__ import annotations

import json
import time
import uuid

from fastapi.responses import StreamingResponse

from labs.serving.engine import GenRequest
from labs.serving.errors import APIError

__all__ = ["completion_response", "chunk", "usage", "failure", "stream_reply"]


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


def failure(req: GenRequest) -> APIError:
    """The error a request that did not finish (``stop``/``length``) is answered with."""
    if req.finish_reason == "error":  # details go to the log, not to the client
        return APIError(500, "generation failed for this request", "server_error")
    return APIError(503, "the server is shutting down; retry", "server_error",
                    code="shutting_down", headers={"Retry-After": "1"})  # fmt: skip


def _sse(obj) -> str:
    return f"data: {json.dumps(obj)}\n\n"


def stream_reply(
    req, events, chat, name, n_prompt, usage_mode, metrics, headers
) -> StreamingResponse:
    """SSE chunks; ``usage_mode``: None, ``"last"`` (a usage chunk before ``[DONE]``, ``"usage":
    null`` in the others, OpenAI's ``include_usage``) or ``"every"`` (also the usage so far in
    every chunk, vLLM's ``continuous_usage_stats``)."""
    rid, created = ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex[:24], int(time.time())

    def sse(text, finish=None, role=False, n_out=0) -> str:
        obj = chunk(chat, rid, name, created, text, finish, role)
        if usage_mode is not None:
            obj["usage"] = usage(n_prompt, n_out) if usage_mode == "every" else None
        return _sse(obj)

    async def gen():
        n_out = 0
        try:
            if chat:
                yield sse("", role=True)
            while (event := await events.get()) is not None:
                piece, n_out = event
                yield sse(piece, n_out=n_out)
            if req.finish_reason in ("stop", "length"):
                n_out = len(req.output)
                yield sse(None, req.finish_reason, n_out=n_out)
                if usage_mode is not None:
                    last = chunk(chat, rid, name, created, None)
                    last["choices"], last["usage"] = [], usage(n_prompt, n_out)
                    yield _sse(last)
            else:  # an error event, then the end marker: the client is never left hanging
                yield _sse(failure(req).body())
            yield "data: [DONE]\n\n"
        finally:
            if req.finish_reason is None:  # the client went away mid-stream
                req.cancelled.set()
                metrics.cancelled.inc()

    headers = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no", **headers}
    return StreamingResponse(gen(), media_type="text/event-stream", headers=headers)
