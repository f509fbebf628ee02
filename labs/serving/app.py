"""``create_app``: the tiny GPT behind an OpenAI-compatible HTTP API (FastAPI).

Routes (every GET route answers HEAD too, with the headers and no body)::

    POST /v1/completions         OpenAI's completions API (one prompt string)
    POST /v1/chat/completions    OpenAI's chat API, through the chat template of chat.chat_prompt
    GET  /v1/models              the one served model
    GET  /v1/models/{model}      its Model object; another id: 404, code model_not_found
    GET  /health/live            200 while the process runs (liveness probe)
    GET  /health/ready, /health  200 when it can serve, 503 and the reasons otherwise (readiness)
    GET  /metrics                Prometheus text format

A request passes the :class:`~labs.serving.gate.Gate` (key, rate limit, content type, declared
size) before its body is read; then the body is read with a size limit and a timeout, validated
(:mod:`labs.serving.protocol`: OpenAI's shapes as clients send them; fields it ignored are named
in a ``Warning`` header of the reply), and submitted to the engine (:class:`~labs.serving.engine.
LLMEngine`: continuous batching over the paged KV cache; 503 + ``Retry-After`` when its queue is
full). Tokens come back from the engine thread through an asyncio queue; a client that
disconnects, streaming or not, cancels its request at the next engine step. Outside the gate,
CORS (:mod:`labs.serving.cors`) answers browsers' preflights, which carry no key.
"""

from __future__ import annotations

import asyncio
import time
from contextlib import asynccontextmanager

import torch
from fastapi import FastAPI, Request, Response
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from labs.serving import protocol as P
from labs.serving.chat import message_text
from labs.serving.cors import LOOPBACK, add_cors
from labs.serving.engine import GenRequest, LLMEngine, Overloaded
from labs.serving.errors import APIError, error_body
from labs.serving.gate import Gate, read_body
from labs.serving.limits import KeyedLimiter, SharedLimit, make_limiter
from labs.serving.metrics import ServiceMetrics
from labs.serving.replies import completion_response, failure, stream_reply
from labs.serving.stopping import CHAT_END_OF_TURN

__all__ = ["create_app"]


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
    allowed_origins: list[str] | tuple[str, ...] = (LOOPBACK,),
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
        max_tokens_limit: the largest ``max_tokens`` accepted, and the most a chat request
            that sends none may generate.
        max_body_bytes, body_timeout_s: request body limits (413, 408).
        docs: serve ``/docs`` and ``/openapi.json`` (off by default).
        allowed_origins: web pages allowed to call the API from a browser (CORS): origins such
            as ``"https://app.example.com"``, ``"loopback"`` (pages served from this machine,
            the default), ``"*"`` (any page); empty: none. See :mod:`labs.serving.cors`.
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
    add_cors(app, allowed_origins)  # outside the gate: a preflight carries no key
    get = lambda path: app.api_route(path, methods=["GET", "HEAD"])  # noqa: E731

    @app.exception_handler(APIError)
    async def api_error(request, err: APIError):
        return JSONResponse(err.body(), err.status, headers=err.headers)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request, err: StarletteHTTPException):
        msg = {404: "no such endpoint", 405: "method not allowed"}.get(err.status_code, err.detail)
        return JSONResponse(error_body(msg, "invalid_request_error"), err.status_code,
                            headers=getattr(err, "headers", None))  # fmt: skip

    @get("/health/live")
    async def live() -> dict:
        return {"status": "ok"}

    @get("/health/ready")
    @get("/health")
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

    @get("/metrics")
    async def prometheus() -> Response:
        metrics.queue_depth.set(engine.depth)
        metrics.active.set(engine.running)
        metrics.kv_usage.set(engine.kv_usage)
        metrics.steps.set(engine.steps)
        return Response(metrics.render(), media_type="text/plain; version=0.0.4")

    card = {"id": model_name, "object": "model", "created": 0, "owned_by": "dlsys"}

    @get("/v1/models")
    async def models() -> dict:
        return {"object": "list", "data": [card]}

    @get("/v1/models/{model:path}")
    async def model(model: str) -> dict:
        if model != model_name:
            raise no_such_model(model)
        return card

    def no_such_model(name: str) -> APIError:
        return APIError(404, f"The model '{name}' does not exist; this server serves "
                        f"'{model_name}'.", param="model", code="model_not_found")  # fmt: skip

    @app.post("/v1/completions")
    async def completions(request: Request):
        return await serve(request, chat=False)

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request):
        return await serve(request, chat=True)

    async def serve(request: Request, chat: bool):
        arrived = time.perf_counter()
        raw = await read_body(request, max_body_bytes, body_timeout_s)
        body = P.parse_request(P.ChatCompletionRequest if chat else P.CompletionRequest, raw)
        if body.model not in (None, model_name):
            raise no_such_model(body.model)
        ids = _prompt_ids(engine, body, chat)
        n_new = _token_budget(body, chat, len(ids), engine.context_length, max_tokens_limit)
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
                         eos=CHAT_END_OF_TURN if chat else (), ignore_eos=bool(body.ignore_eos),
                         min_tokens=body.min_tokens or 0, on_text=on_text,
                         on_finish=on_finish)  # fmt: skip
        try:
            if n_new == 0:  # max_tokens 0: an empty completion, nothing for the engine to do
                req.finish_reason = "length"
                on_finish(req)
            else:
                engine.submit(req)
        except Overloaded as err:
            raise APIError(503, f"server overloaded: {err}", "server_error", code="overloaded",
                           headers={"Retry-After": "1"}) from None  # fmt: skip
        name, warn = model_name, P.ignored_fields_warning(body)
        if body.stream:
            opts = body.stream_options or P.StreamOptions()
            usage = "every" if opts.include_usage and opts.continuous_usage_stats else (
                "last" if opts.include_usage else None)  # fmt: skip
            return stream_reply(req, events, chat, name, len(ids), usage, metrics, warn)
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
            raise failure(req)
        reply = completion_response(chat, name, req.text, req.finish_reason, len(ids),
                                    len(req.output))  # fmt: skip
        return JSONResponse(reply, headers=warn)

    return app


def _prompt_ids(engine: LLMEngine, body, chat: bool) -> torch.Tensor:
    """Token ids of the prompt (chat: the template applied), or checked ids given as such; a
    400 naming where the model's vocabulary lacks a character (``messages[1].content``)."""
    prompt = body.model_input
    if isinstance(prompt, str):
        try:
            return engine.encode(prompt)
        except ValueError:
            param = "prompt"
            for i, m in enumerate(body.messages if chat else []):  # which message has it
                try:
                    engine.encode(message_text(m, i))
                except ValueError:
                    param = f"messages[{i}].content"
                    break
            raise APIError(400, f"Invalid '{param}': only newline and printable ASCII characters "
                           "are in this model's vocabulary.", param=param,
                           code="invalid_value") from None  # fmt: skip
    vocab = engine.tokenizer.vocab_size
    if not all(0 <= i < vocab for i in prompt):
        raise APIError(400, f"Invalid 'prompt': token ids must be in [0, {vocab}) for this model.",
                       param="prompt", code="invalid_value")  # fmt: skip
    return torch.tensor(prompt, dtype=torch.long)


def _token_budget(body, chat: bool, n_prompt: int, context: int, limit: int) -> int:
    """How many tokens the request may generate: what it asked for (at most ``limit``), or
    :func:`labs.serving.protocol.default_max_tokens`; a 400 when the context has no room."""
    asked = body.asked_tokens
    if asked is not None and asked[1] > limit:
        raise APIError(400, f"Invalid '{asked[0]}': {asked[1]} is too large; this server "
                       f"generates at most {limit} tokens per request.", param=asked[0],
                       code="invalid_value")  # fmt: skip
    n_new = asked[1] if asked else P.default_max_tokens(chat, context - n_prompt, limit)
    if n_prompt + n_new > context or (chat and not asked and n_new == 0):
        says = (f"{asked[0]} is {asked[1]}" if asked else f"max_tokens is {n_new} (the default)"
                if not chat else "no token is left for the reply")  # fmt: skip
        raise APIError(400, f"This model's maximum context length is {context} tokens; the "
                       f"prompt has {n_prompt} and {says}.", param="messages" if chat else
                       "prompt", code="context_length_exceeded")  # fmt: skip
    if (body.min_tokens or 0) > n_new:
        raise APIError(400, f"Invalid 'min_tokens': {body.min_tokens} is more than the "
                       f"{n_new} tokens this request may generate.", param="min_tokens",
                       code="invalid_value")  # fmt: skip
    return n_new
