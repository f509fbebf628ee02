"""``create_app``: the tiny GPT behind an OpenAI-compatible HTTP API (FastAPI).

Routes::

    POST /v1/completions         OpenAI's completions API (one prompt string)
    POST /v1/chat/completions    OpenAI's chat API, through the chat template of protocol.chat_prompt
    GET  /v1/models              the one served model
    GET  /health/live            200 while the process runs (liveness probe)
    GET  /health/ready, /health  200 when it can serve, 503 and the reasons otherwise (readiness)
    GET  /metrics                Prometheus text format

A request passes the :class:`~labs.serving.gate.Gate` (key, rate limit, content type, declared
size) before its body is read; then the body is read with a size limit and a timeout, validated
(:mod:`labs.serving.protocol`: OpenAI's shapes as clients send them; fields it ignored are named
in a ``Warning`` header of the reply), and submitted to the engine (:class:`~labs.serving.engine.
LLMEngine`: continuous batching over the paged KV cache; 503 + ``Retry-After`` when its queue is
full). Tokens come back from the engine thread through an asyncio queue; a client that
disconnects, streaming or not, cancels its request at the next engine step.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from contextlib import asynccontextmanager

import torch
from fastapi import FastAPI, Request, Response
from fastapi.responses import JSONResponse, StreamingResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect

from labs.serving import protocol as P
from labs.serving.engine import GenRequest, LLMEngine, Overloaded
from labs.serving.gate import Gate
from labs.serving.limits import KeyedLimiter, SharedLimit, make_limiter
from labs.serving.metrics import ServiceMetrics
from labs.serving.stopping import CHAT_END_OF_TURN

__all__ = ["create_app"]


async def _read_body(request: Request, limit: int, timeout_s: float) -> bytes:
    """The body, at most ``limit`` bytes (413), each chunk within ``timeout_s`` seconds (408)."""
    parts, n = [], 0
    stream = request.stream().__aiter__()
    while True:
        try:
            part = await asyncio.wait_for(stream.__anext__(), timeout_s)
        except StopAsyncIteration:
            return b"".join(parts)
        except TimeoutError:
            raise P.APIError(408, f"request body not received within {timeout_s} s",
                             code="timeout") from None  # fmt: skip
        except ClientDisconnect:
            raise P.APIError(400, "client disconnected while sending the body") from None
        n += len(part)
        if n > limit:
            raise P.APIError(413, f"request body over {limit} bytes", code="request_too_large")
        parts.append(part)


async def _disconnected(request: Request) -> None:
    """Returns when the client has gone (the body must have been read already)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


def create_app(
    engine: LLMEngine,
    api_keys: list[str],
    *,
    model_name: str = "tiny-gpt",
    limiter: str | None = "token_bucket",
    rate: float = 10.0,
    burst: float = 20.0,
    shared_limit: str | None = None,
    storage_uri: str | None = None,
    fail_open: bool = False,
    max_tokens_limit: int = 256,
    max_body_bytes: int = 65536,
    body_timeout_s: float = 10.0,
    docs: bool = False,
) -> FastAPI:
    """The service as an ASGI app (serve it with uvicorn; see ``python -m labs.serving``).

    Args:
        engine: the engine; its thread is started and stopped with the app (lifespan).
        api_keys: accepted keys (see :func:`labs.serving.auth.load_api_keys`).
        model_name: the id of the served model in ``/v1/models`` and responses.
        limiter, rate, burst: per-key limit (``None`` for none): one of ``token_bucket``,
            ``leaky_bucket``, ``fixed_window``, ``sliding_window``, ``rate`` requests/s on
            average, bursts of ``burst``. Invalid settings raise ``ValueError`` here.
        shared_limit, storage_uri, fail_open: a limit such as ``"5/second"`` shared by replicas
            through storage such as ``redis://127.0.0.1:6379``; both or neither. When the storage
            is unreachable: admit (``fail_open``) or answer 503 and report not ready.
        max_tokens_limit: the largest ``max_tokens`` accepted.
        max_body_bytes, body_timeout_s: request body limits (413, 408).
        docs: serve ``/docs`` and ``/openapi.json`` (off by default).
    """
    if bool(shared_limit) != bool(storage_uri):
        raise ValueError("shared_limit and storage_uri go together: give both or neither")
    if limiter is not None:
        if not (rate > 0 and burst >= 1):
            raise ValueError(f"rate must be > 0 and burst >= 1, got rate={rate}, burst={burst}")
        make_limiter(limiter, rate, burst)  # raises ValueError on a bad kind
    metrics = ServiceMetrics()
    keyed = KeyedLimiter(lambda: make_limiter(limiter, rate, burst)) if limiter else None
    shared = SharedLimit(shared_limit, storage_uri, fail_open) if shared_limit else None

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        engine.start()
        yield
        engine.stop()

    off = {"docs_url": None, "redoc_url": None, "openapi_url": None}
    app = FastAPI(title="dlsys tiny GPT", lifespan=lifespan, **({} if docs else off))
    app.state.engine, app.state.metrics = engine, metrics
    engine.on_step = metrics.batch_size.observe
    app.add_middleware(Gate, keys=api_keys, metrics=metrics, keyed=keyed, shared=shared,
                       max_body_bytes=max_body_bytes)  # fmt: skip

    @app.exception_handler(P.APIError)
    async def api_error(request, err: P.APIError):
        return JSONResponse(err.body(), err.status, headers=err.headers)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request, err: StarletteHTTPException):
        msg = {404: "no such endpoint", 405: "method not allowed"}.get(err.status_code, err.detail)
        return JSONResponse(P.error_body(msg, "invalid_request_error"), err.status_code,
                            headers=getattr(err, "headers", None))  # fmt: skip

    @app.get("/health/live")
    async def live() -> dict:
        return {"status": "ok"}

    @app.get("/health/ready")
    @app.get("/health")
    async def ready():
        problems = []
        if engine._thread is None or not engine._thread.is_alive():
            problems.append("engine not running")
        if shared is not None and not await asyncio.to_thread(shared.healthy):
            problems.append(
                "rate-limit storage unreachable" + (" (failing open)" if fail_open else "")
            )
        blocking = [p for p in problems if "failing open" not in p]
        body = {"status": "unavailable" if blocking else "ok", "problems": problems,
                "queue_depth": engine.depth, "running": engine.running}  # fmt: skip
        return JSONResponse(body, 503 if blocking else 200)

    @app.get("/metrics")
    async def prometheus() -> Response:
        metrics.queue_depth.set(engine.depth)
        metrics.active.set(engine.running)
        metrics.kv_usage.set(engine.kv_usage)
        metrics.steps.set(engine.steps)
        return Response(metrics.render(), media_type="text/plain; version=0.0.4")

    @app.get("/v1/models")
    async def models() -> dict:
        card = {"id": model_name, "object": "model", "created": 0, "owned_by": "dlsys"}
        return {"object": "list", "data": [card]}

    @app.post("/v1/completions")
    async def completions(request: Request):
        return await serve(request, chat=False)

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request):
        return await serve(request, chat=True)

    async def serve(request: Request, chat: bool):
        arrived = time.perf_counter()
        raw = await _read_body(request, max_body_bytes, body_timeout_s)
        body = P.parse_request(P.ChatCompletionRequest if chat else P.CompletionRequest, raw)
        if body.model not in (None, model_name):
            raise P.APIError(404, f"model {body.model!r} does not exist; this server serves "
                             f"{model_name!r}", param="model", code="model_not_found")  # fmt: skip
        ids = _prompt_ids(engine, body.model_input, "messages" if chat else "prompt")
        n_new = body.new_tokens()
        if n_new > max_tokens_limit:
            field = (
                "max_completion_tokens"
                if getattr(body, "max_completion_tokens", None)
                else "max_tokens"
            )
            raise P.APIError(400, f"{field}: {n_new} asked, at most {max_tokens_limit}",
                             param=field)  # fmt: skip
        if len(ids) + n_new > engine.context_length:
            raise P.APIError(400, f"this model's context is {engine.context_length} tokens; the "
                             f"prompt has {len(ids)} and max_tokens is {n_new}",
                             param="messages" if chat else "prompt",
                             code="context_length_exceeded")  # fmt: skip
        loop = asyncio.get_running_loop()
        events: asyncio.Queue = asyncio.Queue()
        first = []

        def on_text(piece: str) -> None:  # in the engine thread: req.output holds the new token
            if not first:
                first.append(time.perf_counter())
                metrics.ttft.observe(first[0] - arrived)
            loop.call_soon_threadsafe(events.put_nowait, (piece, len(req.output)))

        def on_finish(r: GenRequest) -> None:
            metrics.tokens.inc(len(r.output))
            metrics.finished.labels(r.finish_reason).inc()
            if r.finish_reason in ("stop", "length"):
                metrics.latency.observe(time.perf_counter() - arrived)
            loop.call_soon_threadsafe(events.put_nowait, None)

        temperature, top_p = body.sampling
        req = GenRequest(ids, n_new, temperature, top_p, body.seed, body.stops(),
                         eos=(CHAT_END_OF_TURN,) if chat else (), ignore_eos=bool(body.ignore_eos),
                         min_tokens=body.min_tokens or 0, on_text=on_text,
                         on_finish=on_finish)  # fmt: skip
        try:
            engine.submit(req)
        except Overloaded as err:
            raise P.APIError(503, f"server overloaded: {err}", "server_error", code="overloaded",
                             headers={"Retry-After": "1"}) from None  # fmt: skip
        name, warn = model_name, P.ignored_fields_warning(body)
        if body.stream:
            opts = body.stream_options or P.StreamOptions()
            usage = "every" if opts.include_usage and opts.continuous_usage_stats else (
                "last" if opts.include_usage else None)  # fmt: skip
            return _stream(req, events, chat, name, len(ids), usage, metrics, warn)
        gone = asyncio.create_task(_disconnected(request))
        while True:  # drain the text pieces; None marks the end
            getter = asyncio.create_task(events.get())
            await asyncio.wait({getter, gone}, return_when=asyncio.FIRST_COMPLETED)
            if not getter.done():  # the client left: stop its generation
                getter.cancel()
                req.cancelled.set()
                metrics.cancelled.inc()
                return Response(status_code=499)
            if getter.result() is None:
                break
        gone.cancel()
        if req.finish_reason not in ("stop", "length"):
            raise _failure(req)
        reply = P.completion_response(chat, name, req.text, req.finish_reason, len(ids),
                                      len(req.output))  # fmt: skip
        return JSONResponse(reply, headers=warn)

    return app


def _prompt_ids(engine: LLMEngine, prompt: str | list[int], param: str):
    """Token ids of a text prompt, or checked ids given as such; 400 for what the model lacks."""
    if isinstance(prompt, str):
        try:
            return engine.encode(prompt)
        except ValueError:
            raise P.APIError(400, f"{param}: only newline and printable ASCII characters are "
                             "supported by this model's tokenizer", param=param) from None  # fmt: skip
    vocab = engine.tokenizer.vocab_size
    if not all(0 <= i < vocab for i in prompt):
        raise P.APIError(400, f"prompt: token ids must be in [0, {vocab}) for this model",
                         param="prompt")  # fmt: skip
    return torch.tensor(prompt, dtype=torch.long)


def _failure(req: GenRequest) -> P.APIError:
    if req.finish_reason == "error":  # details go to the log, not to the client
        return P.APIError(500, "generation failed for this request", "server_error")
    return P.APIError(503, "the server is shutting down; retry", "server_error",
                      code="shutting_down", headers={"Retry-After": "1"})  # fmt: skip


def _sse(obj) -> str:
    return f"data: {json.dumps(obj)}\n\n"


def _stream(req, events, chat, name, n_prompt, usage, metrics, headers) -> StreamingResponse:
    """SSE chunks; ``usage``: None, ``"last"`` (a usage chunk before ``[DONE]``, ``"usage":
    null`` in the others, OpenAI's ``include_usage``) or ``"every"`` (also the usage so far in
    every chunk, vLLM's ``continuous_usage_stats``)."""
    rid, created = ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex[:24], int(time.time())

    def sse(text, finish=None, role=False, n_out=0) -> str:
        obj = P.chunk(chat, rid, name, created, text, finish, role)
        if usage is not None:
            obj["usage"] = P.usage(n_prompt, n_out) if usage == "every" else None
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
                if usage is not None:
                    last = P.chunk(chat, rid, name, created, None)
                    last["choices"], last["usage"] = [], P.usage(n_prompt, n_out)
                    yield _sse(last)
            else:  # an error event, then the end marker: the client is never left hanging
                yield _sse(_failure(req).body())
            yield "data: [DONE]\n\n"
        finally:
            if req.finish_reason is None:  # the client went away mid-stream
                req.cancelled.set()
                metrics.cancelled.inc()

    headers = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no", **headers}
    return StreamingResponse(gen(), media_type="text/event-stream", headers=headers)
