"""The service as a real uvicorn subprocess on loopback: the official ``openai`` client,
disconnects, overload, slow clients, graceful shutdown, Redis down, start-up errors.

Every server binds 127.0.0.1 on a free port and is stopped at the end; every loop is bounded.
"""

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time

import httpx
import openai
import pytest
import torch

from labs.serving import metrics
from labs.serving.server import RedisProcess, ServiceProcess, redis_available

KEY = "live-key-123"
H = {"Authorization": f"Bearer {KEY}"}


@pytest.fixture(scope="module")
def live():
    args = ("--max-batch-size", "2", "--max-queue", "3", "--limiter", "none",
            "--context-length", "512", "--max-tokens-limit", "500", "--header-timeout", "1")  # fmt: skip
    svc = ServiceProcess([KEY], *args, train_steps=0)
    try:
        yield svc
    finally:
        svc.stop()
        assert not svc.running  # no process left behind


def _metric(url: str, name: str, **labels) -> float:
    parsed = metrics.parse_metrics(httpx.get(url + "/metrics").text)
    return sum(v for lab, v in parsed.get(name, []) if labels.items() <= lab.items())


def _wait_for(cond, seconds=20.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.05)
    return cond()


def test_the_official_openai_client_talks_to_it(live):
    client = openai.OpenAI(base_url=live.url + "/v1", api_key=KEY, max_retries=0, timeout=30)
    assert [m.id for m in client.models.list()] == ["tiny-gpt"]
    c = client.completions.create(model="tiny-gpt", prompt="The GPU", max_tokens=8, temperature=0)
    assert len(c.choices[0].text) == 8 and c.usage.completion_tokens == 8
    stream = client.completions.create(model="tiny-gpt", prompt="The GPU", max_tokens=8,
                                       temperature=0, stream=True)  # fmt: skip
    assert "".join(ch.choices[0].text for ch in stream if ch.choices) == c.choices[0].text
    chat = client.chat.completions.create(
        model="tiny-gpt", messages=[{"role": "user", "content": "Hi"}], max_tokens=5, seed=1
    )
    assert chat.choices[0].message.role == "assistant" and chat.usage.completion_tokens <= 5
    pieces = client.chat.completions.create(model="tiny-gpt", max_tokens=5, seed=1, stream=True,
                                            messages=[{"role": "user", "content": "Hi"}])  # fmt: skip
    text = "".join(p.choices[0].delta.content or "" for p in pieces if p.choices)
    assert text == chat.choices[0].message.content
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=live.url + "/v1", api_key="nope", max_retries=0).models.list()
    with pytest.raises(openai.BadRequestError, match="top_p"):
        client.completions.create(model="tiny-gpt", prompt="x", top_p=1.5)
    with pytest.raises(openai.NotFoundError):
        client.completions.create(model="gpt-4", prompt="x")


def test_third_party_shapes_and_vllm_extensions_through_uvicorn(live):
    client = openai.OpenAI(base_url=live.url + "/v1", api_key=KEY, max_retries=0, timeout=30)
    parts = [{"role": "developer", "content": "Be brief."},
             {"role": "user", "content": [{"type": "text", "text": "Hi"}]}]  # fmt: skip
    out = client.chat.completions.create(model="tiny-gpt", messages=parts, max_completion_tokens=6,
                                         temperature=None, top_p=None, n=None, stop=None,
                                         extra_body={"ignore_eos": True})  # fmt: skip
    assert out.usage.completion_tokens == 6 and out.choices[0].finish_reason == "length"
    raw = client.completions.with_raw_response.create(model="tiny-gpt", prompt="The",
                                                      max_tokens=2, extra_body={"top_k": 5})  # fmt: skip
    assert raw.headers["warning"] == '299 - "unsupported fields ignored: top_k"'
    body = {"model": "tiny-gpt", "stream": True, "max_completion_tokens": 12, "ignore_eos": True,
            "stream_options": {"include_usage": True, "continuous_usage_stats": True},
            "messages": [{"role": "user", "content": [{"type": "text", "text": "1 0 m0 Finish"}]}]}  # fmt: skip
    with httpx.stream("POST", live.url + "/v1/chat/completions", json=body, headers=H) as r:
        events = [json.loads(ln[6:]) for ln in r.iter_lines() if ln.startswith("data: {")]
    counts = [e["usage"]["completion_tokens"] for e in events]  # guidellm's request, as it sent it
    assert counts == sorted(counts) and counts[0] == 0 and counts[-1] == 12
    assert _metric(live.url, "llm_kv_cache_usage_perc") == 0.0  # all finished: no block in use


def test_models_retrieve_head_cors_and_request_ids_through_uvicorn(live):
    client = openai.OpenAI(base_url=live.url + "/v1", api_key=KEY, max_retries=0, timeout=30)
    model = client.models.retrieve("tiny-gpt")
    assert (model.id, model.object, model.owned_by) == ("tiny-gpt", "model", "dlsys")
    with pytest.raises(openai.NotFoundError) as missing:
        client.models.retrieve("gpt-4o")
    assert missing.value.code == "model_not_found" and missing.value.request_id.startswith("req_")
    out = client.completions.create(model="tiny-gpt", prompt="Hi", max_tokens=0)
    assert out.choices[0].text == "" and out._request_id.startswith("req_")
    for path in ("/v1/models", "/health", "/metrics"):  # HEAD: the headers, not one body byte
        with socket.create_connection(("127.0.0.1", live.port), timeout=10) as s:
            s.sendall(f"HEAD {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\n"
                      "Connection: close\r\n\r\n".encode())  # fmt: skip
            answer = b""
            while chunk := s.recv(65536):
                answer += chunk
        head, _, rest = answer.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200") and rest == b"", (path, answer[:200])
    preflight = {"Origin": "http://localhost:5173", "Access-Control-Request-Method": "POST",
                 "Access-Control-Request-Headers": "authorization,content-type"}  # fmt: skip
    r = httpx.options(live.url + "/v1/chat/completions", headers=preflight)  # no key
    assert r.status_code == 200 and r.headers["access-control-allow-origin"] == preflight["Origin"]
    r = httpx.options(live.url + "/v1/chat/completions",
                      headers={**preflight, "Origin": "https://evil.example"})  # fmt: skip
    assert "access-control-allow-origin" not in r.headers


def test_disconnects_cancel_generation(live):
    cancelled = _metric(live.url, "llm_cancelled_requests_total")
    finished = _metric(live.url, "llm_generations_total", reason="length")
    body = {"prompt": "The", "max_tokens": 500, "stream": True}
    with httpx.stream("POST", live.url + "/v1/completions", json=body, headers=H) as r:
        for got, _ in enumerate(ln for ln in r.iter_lines() if ln.startswith("data: ")):
            if got == 3:
                break  # leaving the block closes the connection mid-stream
    assert _wait_for(lambda: _metric(live.url, "llm_cancelled_requests_total") == cancelled + 1)
    assert _wait_for(lambda: _metric(live.url, "llm_active_generations") == 0)
    raw = json.dumps({**body, "stream": False}).encode()
    with socket.create_connection(("127.0.0.1", live.port), timeout=15) as s:  # gives up waiting
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Authorization: Bearer " + KEY.encode() +
                  b"\r\nContent-Length: " + str(len(raw)).encode() + b"\r\n\r\n" + raw)  # fmt: skip
        assert _wait_for(lambda: _metric(live.url, "llm_active_generations") == 1)
    assert _wait_for(lambda: _metric(live.url, "llm_cancelled_requests_total") == cancelled + 2)
    assert _wait_for(lambda: _metric(live.url, "llm_active_generations") == 0)
    assert _metric(live.url, "llm_generations_total", reason="length") == finished  # none finished


def test_overload_answers_503_and_sizes_are_limited(live):
    async def burst():
        async with httpx.AsyncClient(timeout=60) as c:
            body = {"prompt": "x", "max_tokens": 480}
            return await asyncio.gather(
                *(c.post(live.url + "/v1/completions", json=body, headers=H) for _ in range(12))
            )

    codes = [r.status_code for r in asyncio.run(burst())]
    assert codes.count(503) >= 1 and codes.count(200) >= 2, codes
    big = {"Content-Length": str(50 * 2**20), "Content-Type": "application/json", **H}
    with socket.create_connection(("127.0.0.1", live.port), timeout=10) as s:  # no body sent
        head = "".join(f"{k}: {v}\r\n" for k, v in big.items())
        s.sendall(f"POST /v1/completions HTTP/1.1\r\nHost: x\r\n{head}\r\n".encode())
        assert s.recv(200).startswith(b"HTTP/1.1 413")  # answered before any of the body
    assert _metric(live.url, "llm_requests_total", status="503") >= 1
    assert httpx.get(live.url + "/health/live").status_code == 200


def test_half_open_connections_are_closed(live):
    socks = [socket.create_connection(("127.0.0.1", live.port), timeout=30) for _ in range(20)]
    try:
        for s in socks:
            s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n")  # never finished
        closed = 0
        for s in socks:  # --header-timeout 1: the server hangs up
            closed += s.recv(10) == b""
        assert closed == len(socks)
    finally:
        for s in socks:
            s.close()


def test_sigterm_drains_streams_and_is_not_held_by_a_slow_client():
    args = ("--shutdown-timeout", "3", "--body-timeout", "30")
    with ServiceProcess([KEY], *args, train_steps=0) as svc:
        slow = socket.create_connection(("127.0.0.1", svc.port), timeout=10)
        slow.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json"
                     b"\r\nContent-Length: 100\r\nAuthorization: Bearer " + KEY.encode() +
                     b"\r\n\r\n{\"prompt\"")  # fmt: skip
        body = {"prompt": "The", "max_tokens": 60, "stream": True}
        with httpx.stream("POST", svc.url + "/v1/completions", json=body, headers=H) as r:
            lines = r.iter_lines()
            next(ln for ln in lines if ln.startswith("data: "))
            t0 = time.monotonic()
            os.killpg(svc.proc.pid, signal.SIGTERM)
            rest = [ln for ln in lines if ln.startswith("data: ")]
        assert rest[-1] == "data: [DONE]"  # the stream in flight was finished
        svc.proc.wait(20)
        assert time.monotonic() - t0 < 15  # the slow client held it at most --shutdown-timeout
        slow.close()
    assert not svc.running


@pytest.mark.skipif(not redis_available(), reason="redis-server is not installed")
def test_shared_limit_through_redis_and_redis_down():
    with RedisProcess() as redis:
        args = ("--shared-limit", "4/minute", "--storage-uri", redis.uri, "--limiter", "none")
        with (
            ServiceProcess([KEY], *args, train_steps=0, wait=False) as a,
            ServiceProcess([KEY], *args, "--on-storage-error", "open", train_steps=0) as b,
        ):
            a.wait_ready()
            body = {"prompt": "a", "max_tokens": 1}
            codes = [httpx.post(s.url + "/v1/completions", json=body, headers=H).status_code
                     for s in (a, b, a, b, a, b)]  # fmt: skip
            assert codes == [200, 200, 200, 200, 429, 429]
            redis.stop()
            r = httpx.post(a.url + "/v1/completions", json=body, headers=H)
            assert r.status_code == 503 and r.json()["error"]["code"] == "limiter_unavailable"
            assert httpx.get(a.url + "/health/ready").status_code == 503  # fail closed
            assert httpx.get(a.url + "/health/live").status_code == 200
            assert httpx.post(b.url + "/v1/completions", json=body, headers=H).status_code == 200
            assert httpx.get(b.url + "/health/ready").status_code == 200  # fail open
    assert not redis.running and not a.running and not b.running


def test_bad_options_fail_fast_with_one_line(monkeypatch, capsys):
    import labs.serving.__main__ as cli

    def no_training(*a, **k):
        raise AssertionError("options must be checked before the model is trained")

    monkeypatch.setattr(cli, "train_tiny", no_training)
    monkeypatch.setenv("DLSYS_API_KEYS", KEY)
    cases = [
        (["--rate", "0"], "--rate must be > 0"),
        (["--burst", "0.5"], "--burst >= 1"),
        (["--shared-limit", "5/second"], "go together"),
        (["--storage-uri", "redis://127.0.0.1:1"], "go together"),
        (["--shared-limit", "lots", "--storage-uri", "redis://127.0.0.1:1"], "shared limit"),
        (["--max-batch-size", "0"], "must be > 0"),
        (["--port", "70000"], "--port"),
        (["--checkpoint", "/nonexistent/m.safetensors"], "--checkpoint"),
        (["--device", "meta"], '--device meta: use "cpu" or "cuda[:N]"'),
        (["--device", "tpu"], "--device"),
        (["--device", "cuda:x"], "--device"),
        (["--allowed-origins", "https://app.example.com/"], "not an origin"),
    ]
    if not torch.cuda.is_available():
        cases.append((["--device", "cuda"], "no CUDA device is available"))
    for extra, message in cases:
        with pytest.raises(SystemExit) as exit_info:
            cli.main(extra)
        err = capsys.readouterr().err
        assert exit_info.value.code == 2 and message in err, (extra, err)
    env = {k: v for k, v in os.environ.items() if not k.startswith("DLSYS_API_KEYS")}
    r = subprocess.run([sys.executable, "-m", "labs.serving", "--port", "1"], env=env,
                       capture_output=True, text=True, timeout=120)  # fmt: skip
    assert r.returncode == 2 and "no API key configured" in r.stderr
    assert "Traceback" not in r.stderr and r.stderr.strip().count("\n") == 0  # one line
