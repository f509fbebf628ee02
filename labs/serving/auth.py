"""API keys: read from the environment or a file, compared in constant time, enforced by FastAPI.

Keys never live in source code. The server reads them from ``DLSYS_API_KEYS`` (comma-separated)
or from a file with one key per line (``DLSYS_API_KEYS_FILE`` or ``--api-keys-file``). A client
sends its key as ``Authorization: Bearer <key>`` (what the OpenAI clients send) or in the
``X-API-Key`` header; a missing or unknown key is answered with 401 and a ``WWW-Authenticate``
header naming the scheme. Logs name a key only by :func:`fingerprint`.
"""

from __future__ import annotations

import hashlib
import hmac
import os
from collections.abc import Iterable
from pathlib import Path

from fastapi import HTTPException, Security, status
from fastapi.security import APIKeyHeader

__all__ = [
    "load_api_keys",
    "is_valid_key",
    "api_key_dependency",
    "key_from_headers",
    "fingerprint",
    "KEY_HEADER",
]

KEY_HEADER = "X-API-Key"


def load_api_keys(path: str | Path | None = None, env: str = "DLSYS_API_KEYS") -> list[str]:
    """The accepted keys: from ``path`` if given, else ``$DLSYS_API_KEYS_FILE``, else ``$env``.

    Raises:
        ValueError: when no key is configured (a server without keys would accept no one).
    """
    path = path or os.environ.get(f"{env}_FILE")
    if path:
        text = Path(path).read_text(encoding="utf-8")
        keys = [line.strip() for line in text.splitlines()]
    else:
        keys = [k.strip() for k in os.environ.get(env, "").split(",")]
    keys = [k for k in keys if k and not k.startswith("#")]
    if not keys:
        raise ValueError(
            f"no API key configured: set {env}=key1,key2 or {env}_FILE=/path/to/keys "
            "(one key per line), or pass --api-keys-file"
        )
    return keys


def is_valid_key(presented: str | None, keys: Iterable[str]) -> bool:
    """Whether ``presented`` equals one of ``keys``, compared in constant time.

    ``hmac.compare_digest`` takes the same time wherever the first differing byte is, so the
    response time leaks nothing about how much of a guess was right. Every key is compared
    (no early exit) for the same reason.
    """
    if not presented:
        return False
    given = presented.encode("utf-8")
    ok = False
    for key in keys:
        ok |= hmac.compare_digest(given, key.encode("utf-8"))
    return ok


def api_key_dependency(keys: Iterable[str]):
    """A FastAPI dependency that returns the caller's key or raises 401."""
    keys = list(keys)
    header = APIKeyHeader(name=KEY_HEADER, scheme_name="APIKey", auto_error=False)

    async def require_api_key(api_key: str | None = Security(header)) -> str:
        if not is_valid_key(api_key, keys):
            raise HTTPException(
                status_code=status.HTTP_401_UNAUTHORIZED,
                detail=f"missing or invalid API key: send it in the {KEY_HEADER} header",
                headers={"WWW-Authenticate": "APIKey"},
            )
        return api_key

    return require_api_key


def key_from_headers(headers) -> str | None:
    """The key a request presents: ``Authorization: Bearer <key>``, else ``X-API-Key``.

    ``headers`` is a case-insensitive mapping (Starlette's ``Headers``) or a dict with
    lower-case names.
    """
    auth = headers.get("authorization")
    if auth:
        scheme, _, token = auth.partition(" ")
        return token.strip() if scheme.lower() == "bearer" else None
    return headers.get(KEY_HEADER.lower())


def fingerprint(key: str | None) -> str | None:
    """A short, non-reversible name of a key for logs and metrics (first 8 hex of SHA-256)."""
    return hashlib.sha256(key.encode("utf-8", "replace")).hexdigest()[:8] if key else None
