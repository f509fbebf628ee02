"""Load generation and a streaming client, with ``httpx``'s async API.

:func:`run_load` is *open loop*: requests are started at the times of a seeded Poisson process
(the offered load, in requests/s), whatever the server does, with at most ``concurrency`` in
flight. That is how real traffic behaves, and it is what makes queues build up. A closed loop
(each client waits for its answer before sending again) hides overload by slowing down.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from dataclasses import dataclass

import httpx
import numpy as np

__all__ = ["Result", "run_load", "summarize", "stream_completion"]


@dataclass
class Result:
    """One request: HTTP status, and latency / time to first byte in seconds."""

    status: int
    latency: float
    ttft: float


def _headers(key: str) -> dict:
    return {"Authorization": f"Bearer {key}"}


async def _one(client: httpx.AsyncClient, url: str, key: str, body: dict) -> Result:
    start = time.perf_counter()
    try:
        r = await client.post(url + "/v1/completions", json=body, headers=_headers(key))
        status = r.status_code
    except httpx.TransportError:
        status = 0  # connection refused or reset
    latency = time.perf_counter() - start
    return Result(status, latency, latency)


async def run_load_async(
    url: str,
    key: str,
    n_requests: int,
    rate: float,
    concurrency: int = 32,
    body: dict | None = None,
    seed: int = 0,
) -> list[Result]:
    """Send ``n_requests`` at Poisson arrivals of ``rate`` requests/s, ``concurrency`` in flight.

    ``rate=math.inf`` sends them all at once, so that exactly ``concurrency`` are in flight until
    the last ones: a closed loop, like guidellm's ``concurrent`` profile.
    """
    body = body or {"prompt": "The GPU ", "max_tokens": 16, "temperature": 0}
    rng = random.Random(seed)
    sem = asyncio.Semaphore(concurrency)
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)

    async with httpx.AsyncClient(timeout=60.0, limits=limits) as client:

        async def fire(delay: float) -> Result:
            await asyncio.sleep(delay)
            async with sem:
                return await _one(client, url, key, body)

        t, delays = 0.0, []
        for _ in range(n_requests):
            t += rng.expovariate(rate)
            delays.append(t)
        return await asyncio.gather(*(fire(d) for d in delays))


def run_load(url: str, key: str, n_requests: int, rate: float, **kw) -> list[Result]:
    """Blocking wrapper of :func:`run_load_async` (works inside Jupyter's running loop too)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(run_load_async(url, key, n_requests, rate, **kw))
    import concurrent.futures

    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, run_load_async(url, key, n_requests, rate, **kw)).result()


def summarize(results: list[Result], wall_s: float | None = None) -> dict:
    """Counts by status, p50/p99 latency (s) of the successes, and throughput (requests/s)."""
    ok = np.array([r.latency for r in results if r.status == 200])
    statuses: dict[int, int] = {}
    for r in results:
        statuses[r.status] = statuses.get(r.status, 0) + 1
    out = {"n": len(results), "statuses": dict(sorted(statuses.items()))}
    if len(ok):
        out["p50"] = float(np.percentile(ok, 50))
        out["p99"] = float(np.percentile(ok, 99))
    if wall_s:
        out["throughput"] = len(ok) / wall_s
    return out


def stream_completion(
    url: str, key: str, prompt: str, max_tokens: int = 32, temperature: float = 0.0, seed: int = 0
) -> dict:
    """One streamed completion: the text, time to first token and total time (s)."""
    start = time.perf_counter()
    ttft, pieces = None, []
    body = {
        "prompt": prompt,
        "max_tokens": max_tokens,
        "temperature": temperature,
        "seed": seed,
        "stream": True,
    }
    with httpx.stream(
        "POST", url + "/v1/completions", json=body, headers=_headers(key), timeout=60
    ) as r:
        r.raise_for_status()
        for line in r.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            event = json.loads(line[6:])
            if "error" in event:
                raise RuntimeError(f"stream ended with an error: {event['error']['message']}")
            piece = event["choices"][0]["text"] if event["choices"] else ""
            if piece and ttft is None:
                ttft = time.perf_counter() - start
            pieces.append(piece)
    return {"text": "".join(pieces), "ttft": ttft, "total": time.perf_counter() - start}
