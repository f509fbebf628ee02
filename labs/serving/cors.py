"""Which web pages may call the service from a browser: CORS, with a safe default.

A browser lets a page read an answer from another origin only when that server allows the page's
origin (CORS, the Fetch standard): before a request with an ``Authorization`` header or a JSON
body it sends a *preflight*, ``OPTIONS`` with ``Origin`` and ``Access-Control-Request-Method``/
``-Headers`` and no key, and the server answers with ``Access-Control-Allow-*`` headers. Browser
clients (the ``openai`` SDK with ``dangerouslyAllowBrowser``, chat front ends) need this.

Starlette's ``CORSMiddleware`` does the work, outside the key check (a preflight carries no key).
What to allow is the decision. The key is this API's credential and a browser never attaches it
by itself, so allowing a page lets it use the API only with a key it already has; what
``Access-Control-Allow-Origin`` opens to *every* page is what needs no key -- ``/metrics`` and
``/health`` of a service reachable from the visitor's browser (one on their own machine or
network, which the page's author cannot reach). So the default is ``loopback``: pages served
from this machine (``http://localhost:5173``, ``http://127.0.0.1:8080``, ``http://[::1]``, any
port) may call it, as Ollama allows by default; others only when named (``--allowed-origins
https://app.example.com``), or every page with ``*`` (vLLM's default). Credentials mode stays off
(no cookies are involved), so ``*`` never reflects an origin with credentials.
"""

from __future__ import annotations

import re

from fastapi import FastAPI
from fastapi.middleware.cors import CORSMiddleware

__all__ = ["LOOPBACK", "LOOPBACK_PATTERN", "parse_origins", "add_cors"]

LOOPBACK = "loopback"
LOOPBACK_PATTERN = r"https?://(localhost|127\.0\.0\.1|\[::1\])(:\d{1,5})?"
_ORIGIN = re.compile(r"https?://[^/\s?#]+")
EXPOSED = ["X-Request-Id", "Warning", "Retry-After"]  # headers a page may read from an answer


def _check(entry: str) -> str:
    if entry not in (LOOPBACK, "*") and not _ORIGIN.fullmatch(entry):
        raise ValueError(f"--allowed-origins: {entry!r} is not an origin; write scheme://host"
                         "[:port] with no path or trailing slash (a browser sends "
                         "'https://app.example.com'), or loopback, *, none")  # fmt: skip
    return entry


def parse_origins(text: str) -> list[str]:
    """``--allowed-origins``: comma-separated origins (``scheme://host[:port]``, no path),
    ``loopback``, ``*``; ``none`` or empty for none. ``ValueError`` names a malformed entry."""
    entries = [e.strip() for e in text.split(",") if e.strip()]
    return [] if entries in ([], ["none"]) else [_check(e) for e in entries]


def add_cors(app: FastAPI, origins) -> None:
    """Answer preflights and add ``Access-Control-Allow-Origin`` for ``origins`` (a list as
    :func:`parse_origins` returns); nothing for an empty one (no page of another origin may
    call). ``ValueError`` names a malformed entry."""
    origins = [_check(e) for e in origins]
    if not origins:
        return
    named = [o for o in origins if o != LOOPBACK]
    app.add_middleware(
        CORSMiddleware,
        allow_origins=["*"] if "*" in named else named,
        allow_origin_regex=LOOPBACK_PATTERN if LOOPBACK in origins else None,
        allow_methods=["GET", "HEAD", "POST"],
        allow_headers=["*"],  # Authorization, Content-Type and SDK headers (x-stainless-*)
        expose_headers=EXPOSED,
        allow_credentials=False,
    )
