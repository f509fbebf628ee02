"""Tests of the service: in process (FastAPI's TestClient) and as a real uvicorn subprocess."""

import asyncio
import time

import httpx
import pytest
from fastapi.testclient import TestClient

from labs import gpt
from labs.serving import metrics
from labs.serving.app import create_app
from labs.serving.engine import Engine
from labs.serving.server import RedisProcess, ServiceProcess, redis_available

KEY = "test-key-123"
H = {"X-API-Key": KEY}


@pytest.fixture(scope="module")
def engine():
    return Engine(gpt.GPT(gpt.GPTConfig(block_size=32, n_layer=1)))


def test_auth_validation_and_completion(engine):
    app = create_app(engine, [KEY], max_prompt_chars=50, max_tokens_limit=20)
    with TestClient(app) as c:
        assert c.get("/health").json()["status"] == "ok"
        for headers in ({}, {"X-API-Key": "wrong"}, {"X-API-Key": KEY[:-1]}):
            r = c.post("/v1/completions", json={"prompt": "hi"}, headers=headers)
            assert r.status_code == 401 and r.headers["WWW-Authenticate"] == "APIKey"
        r = c.post("/v1/completions", json={"prompt": "The", "max_tokens": 5}, headers=H)
        assert r.status_code == 200 and r.json()["tokens"] == 5 and len(r.json()["text"]) == 5
        bad = [
            ({"prompt": 3}, "prompt"),
            ({"prompt": ""}, "prompt"),
            ({"prompt": "x", "max_tokens": 0}, "max_tokens"),
            ({"prompt": "x", "max_tokens": 21}, "max_tokens"),
            ({"prompt": "x" * 51}, "prompt"),
            ({"prompt": "caf\u00e9"}, "prompt"),
            ({"max_tokens": 3}, "prompt"),
        ]
        for body, fieldname in bad:
            r = c.post("/v1/completions", json=body, headers=H)
            assert r.status_code == 422, body
            assert fieldname in r.text, (body, r.text)
        for raw in (b'{"prompt": "\xff\xfe"}', b"{not json", b""):
            r = c.post(
                "/v1/completions", content=raw, headers={**H, "content-type": "application/json"}
            )
            assert 400 <= r.status_code < 500
        assert c.get("/health").status_code == 200  # nothing above broke the worker
        parsed = metrics.parse_metrics(c.get("/metrics").text)
        by_status = {lab["status"]: v for lab, v in parsed["llm_requests_total"]}
        assert by_status["200"] == 1 and by_status["422"] >= 3


def test_rate_limit_per_key_answers_429_with_retry_after(engine):
    app = create_app(engine, [KEY, "other"], limiter="token_bucket", rate=0.01, burst=3)
    with TestClient(app) as c:
        codes = [
            c.post("/v1/completions", json={"prompt": "a", "max_tokens": 1}, headers=H)
            for _ in range(4)
        ]
        assert [r.status_code for r in codes] == [200, 200, 200, 429]
        assert int(codes[-1].headers["Retry-After"]) >= 99  # 1 token at 0.01 tokens/s
        r = c.post(
            "/v1/completions", json={"prompt": "a", "max_tokens": 1}, headers={"X-API-Key": "other"}
        )
        assert r.status_code == 200  # limits are per key


def test_streaming_matches_non_streaming(engine):
    app = create_app(engine, [KEY])
    with TestClient(app) as c:
        body = {"prompt": "The GPU", "max_tokens": 6}
        full = c.post("/v1/completions", json=body, headers=H).json()["text"]
        with c.stream("POST", "/v1/completions", json={**body, "stream": True}, headers=H) as r:
            assert r.headers["content-type"].startswith("text/event-stream")
            lines = [ln for ln in r.iter_lines() if ln.startswith("data: ")]
        assert lines[-1] == "data: [DONE]" and len(lines) == 7
        import json

        assert "".join(json.loads(ln[6:])["token"] for ln in lines[:-1]) == full


@pytest.fixture(scope="module")
def live():
    svc = ServiceProcess(
        [KEY],
        "--max-batch-size",
        "2",
        "--max-queue",
        "3",
        "--max-tokens-limit",
        "5000",
        train_steps=0,
    )
    try:
        yield svc
    finally:
        svc.stop()
        assert not svc.running  # no process left behind


def _metric(url: str, name: str) -> float:
    parsed = metrics.parse_metrics(httpx.get(url + "/metrics").text)
    return sum(v for _, v in parsed.get(name, []))


def test_live_server_disconnect_cancels_generation(live):
    body = {"prompt": "The", "max_tokens": 5000, "stream": True}
    with httpx.stream("POST", live.url + "/v1/completions", json=body, headers=H) as r:
        got = 0
        for line in r.iter_lines():
            got += line.startswith("data: ")
            if got == 3:
                break  # leaving the block closes the connection mid-stream
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if _metric(live.url, "llm_cancelled_requests_total") == 1:
            if _metric(live.url, "llm_active_generations") == 0:
                break
        time.sleep(0.1)
    assert _metric(live.url, "llm_cancelled_requests_total") == 1
    assert _metric(live.url, "llm_active_generations") == 0
    assert _metric(live.url, "llm_generated_tokens_total") < 5000  # stopped early


def test_live_server_overload_answers_503(live):
    async def burst():
        async with httpx.AsyncClient(timeout=60) as c:
            body = {"prompt": "x", "max_tokens": 200}
            return await asyncio.gather(
                *(c.post(live.url + "/v1/completions", json=body, headers=H) for _ in range(20))
            )

    responses = asyncio.run(burst())
    codes = sorted(r.status_code for r in responses)
    assert codes.count(503) >= 1 and codes.count(200) >= 2, codes
    assert all(r.headers.get("Retry-After") == "1" for r in responses if r.status_code == 503)
    assert httpx.get(live.url + "/health").status_code == 200


def test_server_process_is_gone_after_stop():
    with ServiceProcess([KEY], train_steps=0) as svc:
        pid = svc.proc.pid
        assert httpx.get(svc.url + "/health").status_code == 200
    assert not svc.running and svc.proc.returncode is not None
    with pytest.raises(ProcessLookupError):
        import os

        os.killpg(pid, 0)


@pytest.mark.skipif(not redis_available(), reason="redis-server is not installed")
def test_two_replicas_share_one_limit_through_redis():
    with RedisProcess() as redis:
        args = ("--shared-limit", "4/minute", "--storage-uri", redis.uri)
        with (
            ServiceProcess([KEY], *args, train_steps=0) as a,
            ServiceProcess([KEY], *args, train_steps=0) as b,
        ):
            body = {"prompt": "a", "max_tokens": 1}
            codes = [
                httpx.post(s.url + "/v1/completions", json=body, headers=H).status_code
                for s in (a, b, a, b, a, b)
            ]
    assert codes == [200, 200, 200, 200, 429, 429]
    assert not redis.running


def test_a_failing_batch_answers_500_and_the_server_keeps_serving(engine):
    app = create_app(engine, [KEY])
    original = engine.run
    calls = []

    def flaky(reqs):
        calls.append(len(reqs))
        if len(calls) == 1:
            raise RuntimeError("simulated device error")
        return original(reqs)

    engine.run = flaky
    try:
        with TestClient(app, raise_server_exceptions=False) as c:
            r = c.post("/v1/completions", json={"prompt": "a", "max_tokens": 2}, headers=H)
            assert r.status_code == 500 and "simulated device error" in r.text
            r = c.post("/v1/completions", json={"prompt": "a", "max_tokens": 2}, headers=H)
            assert r.status_code == 200
    finally:
        engine.run = original


def test_command_line_refuses_to_start_without_keys():
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if not k.startswith("DLSYS_API_KEYS")}
    r = subprocess.run(
        [sys.executable, "-m", "labs.serving", "--port", "1", "--train-steps", "0"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 2 and "no API key configured" in r.stderr
