"""``create_app``: the tiny GPT behind FastAPI.

Routes::

    GET  /health             {"status": "ok"}; no key needed (for load balancers and probes)
    GET  /metrics            Prometheus text format; no key needed
    POST /v1/completions     {"prompt": ..., "max_tokens": 16, "temperature": 0, "stream": false}

Every completion passes, in order: API key (401), rate limit per key (429 + Retry-After), request
validation (422 naming the field), the bounded queue of the batcher (503 + Retry-After), then the
model. With ``"stream": true`` tokens arrive as Server-Sent Events; a client that disconnects
cancels its generation at the next token.
"""

from __future__ import annotations

import asyncio
import json
import math
import time
from collections.abc import Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

from fastapi import Depends, FastAPI, HTTPException, Response
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, Field

from labs.serving.auth import api_key_dependency
from labs.serving.batcher import AdaptiveBatcher, Overloaded
from labs.serving.engine import Engine, GenRequest
from labs.serving.limits import KeyedLimiter, make_limiter
from labs.serving.metrics import ServiceMetrics

__all__ = ["CompletionRequest", "create_app"]


class CompletionRequest(BaseModel):
    """The JSON body of ``POST /v1/completions``."""

    prompt: str = Field(min_length=1, description="text to continue (newline, printable ASCII)")
    max_tokens: int = Field(16, ge=1, description="tokens to generate")
    temperature: float = Field(0.0, ge=0.0, le=5.0, description="0 = greedy")
    seed: int = Field(0, ge=0, description="seed of the sampler when temperature > 0")
    stream: bool = Field(False, description="send tokens as Server-Sent Events")


@dataclass
class _Job:
    req: GenRequest
    arrived: float
    tokens: asyncio.Queue = field(default_factory=asyncio.Queue)
    first_token_at: float | None = None
    error: str | None = None


def _shared_limiter(rate_limit: str, storage_uri: str) -> Callable[[str], tuple[bool, float]]:
    """A limit stored in Redis (or any storage of the ``limits`` package, which slowapi wraps),
    shared by every server process that points at the same storage."""
    from limits import parse, storage, strategies

    item = parse(rate_limit)
    strategy = strategies.MovingWindowRateLimiter(storage.storage_from_string(storage_uri))

    def allow(key: str) -> tuple[bool, float]:
        if strategy.hit(item, "llm", key):
            return True, 0.0
        reset = strategy.get_window_stats(item, "llm", key).reset_time
        return False, max(0.0, reset - time.time())

    return allow


def create_app(
    engine: Engine,
    api_keys: list[str],
    *,
    max_batch_size: int = 8,
    max_wait_s: float = 0.005,
    max_queue: int = 64,
    limiter: str | None = None,
    rate: float = 10.0,
    burst: float = 20.0,
    shared_limit: str | None = None,
    storage_uri: str | None = None,
    max_prompt_chars: int = 2000,
    max_tokens_limit: int = 256,
) -> FastAPI:
    """The service as a FastAPI app (serve it with uvicorn).

    Args:
        engine: the model; see :class:`labs.serving.engine.Engine`.
        api_keys: accepted keys (see :func:`labs.serving.auth.load_api_keys`).
        max_batch_size, max_wait_s, max_queue: the batcher's settings (batch size 1 = no batching).
        limiter: ``None`` or one of ``token_bucket``, ``leaky_bucket``, ``fixed_window``,
            ``sliding_window``, applied per API key with ``rate`` requests/s and bursts of ``burst``.
        shared_limit, storage_uri: a limit such as ``"5/second"`` kept in shared storage such as
            ``redis://127.0.0.1:6379`` so that several server processes enforce it together.
        max_prompt_chars, max_tokens_limit: larger requests are rejected with 422.
    """
    metrics = ServiceMetrics()
    keyed = KeyedLimiter(lambda: make_limiter(limiter, rate, burst)) if limiter else None
    shared = _shared_limiter(shared_limit, storage_uri) if shared_limit and storage_uri else None
    require_key = api_key_dependency(api_keys)

    async def process(batch: list[_Job]) -> None:
        loop = asyncio.get_running_loop()
        metrics.batch_size.observe(len(batch))
        metrics.queue_depth.set(batcher.depth)
        metrics.active.inc(len(batch))
        for job in batch:
            job.req.on_token = lambda tok, q=job.tokens: loop.call_soon_threadsafe(
                q.put_nowait, tok
            )
        start = time.perf_counter()
        try:
            await asyncio.to_thread(engine.run, [j.req for j in batch])
        except Exception as err:  # reported to every client of the batch as a 500
            for job in batch:
                job.error = f"generation failed: {type(err).__name__}: {err}"
            raise
        finally:
            n = sum(len(j.req.output) for j in batch)
            metrics.tokens.inc(n)
            metrics.tokens_per_s.set(n / max(time.perf_counter() - start, 1e-9))
            metrics.active.dec(len(batch))
            for job in batch:  # the end marker comes after every token the thread queued
                loop.call_soon_threadsafe(job.tokens.put_nowait, None)

    batcher: AdaptiveBatcher[_Job] = AdaptiveBatcher(process, max_batch_size, max_wait_s, max_queue)

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        await batcher.start()
        yield
        await batcher.stop()

    app = FastAPI(title="dlsys tiny GPT", lifespan=lifespan)
    app.state.engine, app.state.metrics, app.state.batcher = engine, metrics, batcher

    def fail(status: int, detail, headers: dict | None = None):
        metrics.requests.labels(str(status)).inc()
        return HTTPException(status, detail=detail, headers=headers)

    async def rate_limited(key: str = Depends(require_key)) -> str:
        for check in (keyed.allow if keyed else None, shared):
            if check is None:
                continue
            ok, wait = check(key)
            if not ok:
                raise fail(429, "rate limit exceeded", {"Retry-After": str(math.ceil(wait))})
        return key

    @app.get("/health")
    async def health() -> dict:
        return {"status": "ok", "queue_depth": batcher.depth}

    @app.get("/metrics")
    async def prometheus() -> Response:
        metrics.queue_depth.set(batcher.depth)
        return Response(metrics.render(), media_type="text/plain; version=0.0.4")

    @app.post("/v1/completions")
    async def completions(body: CompletionRequest, key: str = Depends(rate_limited)):
        arrived = time.perf_counter()
        if len(body.prompt) > max_prompt_chars:
            raise fail(422, f"prompt: {len(body.prompt)} characters, at most {max_prompt_chars}")
        if body.max_tokens > max_tokens_limit:
            raise fail(422, f"max_tokens: {body.max_tokens} asked, at most {max_tokens_limit}")
        try:
            prompt = engine.encode(body.prompt)
        except ValueError as err:
            raise fail(422, f"prompt: {err}") from None
        job = _Job(GenRequest(prompt, body.max_tokens, body.temperature, body.seed), arrived)
        try:
            batcher.submit(job)
        except Overloaded as err:
            raise fail(503, f"server overloaded: {err}", {"Retry-After": "1"}) from None
        metrics.queue_depth.set(batcher.depth)

        async def tokens():
            while (tok := await job.tokens.get()) is not None:
                if job.first_token_at is None:
                    job.first_token_at = time.perf_counter()
                    metrics.ttft.observe(job.first_token_at - arrived)
                yield tok
            if job.error:
                raise fail(500, job.error)
            metrics.latency.observe(time.perf_counter() - arrived)
            metrics.requests.labels("200").inc()

        if not body.stream:
            ids = [tok async for tok in tokens()]
            return {"text": engine.decode(ids), "tokens": len(ids), "model": "tiny-gpt"}

        async def events():
            finished = False
            try:
                async for tok in tokens():
                    yield f"data: {json.dumps({'token': engine.decode([tok])})}\n\n"
                finished = True
                yield "data: [DONE]\n\n"
            finally:
                if not finished:  # the client went away (or the server is stopping)
                    job.req.cancelled.set()
                    metrics.cancelled.inc()

        return StreamingResponse(events(), media_type="text/event-stream")

    return app
