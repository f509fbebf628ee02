"""The service's front door, an ASGI middleware that runs before any route reads the body.

For ``/v1/*`` it checks, in order: the API key (401), the rate limits of that key (429 with
``Retry-After``; 503 when a fail-closed shared limit cannot reach its storage), the content type
of a POST (415) and its declared ``Content-Length`` (413). A route that still raises is answered
with a JSON 500 that shows no internals. Every response, whatever produced it, is counted in
``llm_requests_total{endpoint, status}`` and written as one JSON line to the access log
(``labs.serving.access``): method, path, status, milliseconds, client address, the key's
fingerprint -- never the key, never the prompt -- and the request id. Every response carries
that id in ``X-Request-Id``, as OpenAI's API does (its clients show it in errors): the client's
own ``X-Request-Id`` when it sent a plain one (letters, digits, ``._:-``, at most 128), else a
new ``req_<32 hex digits>``, so one id follows a request from the client to this log.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import re
import time
import uuid

from starlette.datastructures import Headers
from starlette.requests import ClientDisconnect, Request

from labs.serving.auth import fingerprint, is_valid_key, key_from_headers
from labs.serving.errors import APIError

__all__ = ["Gate", "ENDPOINTS", "endpoint_label", "request_id", "send_error", "read_body"]

ENDPOINTS = {
    "/v1/completions",
    "/v1/chat/completions",
    "/v1/models",
    "/health",
    "/health/live",
    "/health/ready",
    "/metrics",
}
access_log = logging.getLogger("labs.serving.access")
_PLAIN_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")


def request_id(headers: Headers) -> str:
    """The client's ``X-Request-Id`` when it is a plain one, else a new ``req_<hex>``."""
    given = headers.get("x-request-id", "")
    return given if _PLAIN_ID.fullmatch(given) else "req_" + uuid.uuid4().hex


def endpoint_label(path: str) -> str:
    """The ``endpoint`` label of a path: one of :data:`ENDPOINTS`, or ``other`` (bounded)."""
    if path.startswith("/v1/models/"):
        return "/v1/models/{model}"
    return path if path in ENDPOINTS else "other"


async def send_error(send, err: APIError) -> None:
    body = json.dumps(err.body()).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    headers += [(k.lower().encode(), str(v).encode()) for k, v in err.headers.items()]
    await send({"type": "http.response.start", "status": err.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class Gate:
    """ASGI middleware: authentication, rate limits and size checks before the body is read.

    Args:
        app: the ASGI app behind the gate.
        keys: accepted API keys.
        metrics: a :class:`labs.serving.metrics.ServiceMetrics`.
        keyed: a :class:`labs.serving.limits.KeyedLimiter` or None (no per-key limit).
        shared: a :class:`labs.serving.limits.SharedLimit` or None.
        max_body_bytes: the largest request body accepted (413 above it).
    """

    def __init__(self, app, *, keys, metrics, keyed=None, shared=None, max_body_bytes=65536):
        self.app, self.keys, self.metrics = app, list(keys), metrics
        self.keyed, self.shared, self.max_body_bytes = keyed, shared, max_body_bytes

    async def _check(self, scope, headers: Headers) -> str:
        key = key_from_headers(headers)
        if not is_valid_key(key, self.keys):
            raise APIError(
                401,
                "missing or invalid API key: send 'Authorization: Bearer <key>' or 'X-API-Key'",
                code="invalid_api_key",
                headers={"WWW-Authenticate": 'Bearer, APIKey realm="llm"'},
            )
        for check in (self.keyed, self.shared):
            if check is None:
                continue
            ok, wait = (
                await asyncio.to_thread(check.allow, key)
                if check is self.shared
                else check.allow(key)
            )
            if ok is None:
                raise APIError(503, "rate-limit storage unreachable; retry later", "server_error",
                               code="limiter_unavailable", headers={"Retry-After": "1"})  # fmt: skip
            if not ok:
                raise APIError(429, f"rate limit exceeded; retry in {math.ceil(wait)} s",
                               "rate_limit_error", code="rate_limit_exceeded",
                               headers={"Retry-After": str(max(1, math.ceil(wait)))})  # fmt: skip
        if scope["method"] == "POST":
            ctype = headers.get("content-type", "").split(";")[0].strip().lower()
            if ctype != "application/json":
                raise APIError(
                    415, f"Content-Type must be application/json, got {ctype or 'none'!r}"
                )
            length = headers.get("content-length")
            if length is not None and (not length.isdigit() or int(length) > self.max_body_bytes):
                raise APIError(413, f"request body over {self.max_body_bytes} bytes",
                               code="request_too_large")  # fmt: skip
        return key

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        t0, path = time.perf_counter(), scope["path"]
        headers = Headers(scope=scope)
        state = {"status": 0, "key": None, "id": request_id(headers)}

        async def send_watch(message):
            if message["type"] == "http.response.start":
                state["status"] = message["status"]
                message["headers"] = [*message.get("headers", []),
                                      (b"x-request-id", state["id"].encode())]  # fmt: skip
            await send(message)

        try:
            if path.startswith("/v1/"):
                state["key"] = key_from_headers(headers)
                scope.setdefault("state", {})["api_key"] = await self._check(scope, headers)
            await self.app(scope, receive, send_watch)
        except APIError as err:
            if not state["status"]:
                await send_error(send_watch, err)
        except Exception:
            logging.getLogger("labs.serving").exception("unhandled error on %s", path)
            if not state["status"]:
                await send_error(send_watch, APIError(500, "internal error", "server_error"))
        finally:
            status = state["status"] or 499  # 499: the client left before any response
            endpoint = endpoint_label(path)
            self.metrics.requests.labels(endpoint, str(status)).inc()
            if access_log.isEnabledFor(logging.INFO):
                client = scope.get("client") or ("?", 0)
                line = {"method": scope["method"], "path": endpoint, "status": status,
                        "ms": round((time.perf_counter() - t0) * 1e3, 1), "client": client[0],
                        "key": fingerprint(state["key"]), "request_id": state["id"]}  # fmt: skip
                access_log.info(json.dumps(line))


async def read_body(request: Request, limit: int, timeout_s: float) -> bytes:
    """The body, at most ``limit`` bytes (413), each chunk within ``timeout_s`` seconds (408)."""
    parts, n = [], 0
    stream = request.stream().__aiter__()
    while True:
        try:
            part = await asyncio.wait_for(stream.__anext__(), timeout_s)
        except StopAsyncIteration:
            return b"".join(parts)
        except TimeoutError:
            raise APIError(408, f"request body not received within {timeout_s} s",
                           code="timeout") from None  # fmt: skip
        except ClientDisconnect:
            raise APIError(400, "client disconnected while sending the body") from None
        n += len(part)
        if n > limit:
            raise APIError(413, f"request body over {limit} bytes", code="request_too_large")
        parts.append(part)
