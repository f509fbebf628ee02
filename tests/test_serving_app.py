"""The service in process (FastAPI's TestClient): OpenAI-compatible API, validation, errors."""

import json
import threading

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from labs import gpt
from labs.serving import engine as engine_mod
from labs.serving import metrics
from labs.serving.app import create_app
from labs.serving.engine import LLMEngine

KEY = "test-key-123"
H = {"Authorization": f"Bearer {KEY}"}


@pytest.fixture(scope="module")
def model():
    return gpt.GPT(gpt.GPTConfig(block_size=64, n_layer=1))


@pytest.fixture(scope="module")
def client(model):
    app = create_app(LLMEngine(model, max_batch=4), [KEY], limiter=None, max_tokens_limit=40)
    with TestClient(app) as c:
        yield c


def by_status(c) -> dict:
    parsed = metrics.parse_metrics(c.get("/metrics").text)
    out: dict = {}
    for labels, v in parsed["llm_requests_total"]:
        out[labels["status"]] = out.get(labels["status"], 0) + v
    return out


def test_openai_response_objects_and_auth(client):
    for headers in ({}, {"X-API-Key": "wrong"}, {"Authorization": f"Bearer {KEY[:-1]}"},
                    {"Authorization": f"Basic {KEY}"}, {"X-API-Key": KEY[1:]}):  # fmt: skip
        r = client.post("/v1/completions", json={"prompt": "hi"}, headers=headers)
        assert r.status_code == 401 and r.json()["error"]["code"] == "invalid_api_key"
        assert "Bearer" in r.headers["WWW-Authenticate"]
    body = {"model": "tiny-gpt", "prompt": "The", "max_tokens": 5, "temperature": 0}
    r = client.post("/v1/completions", json=body, headers={"X-API-Key": KEY})
    out = r.json()
    assert r.status_code == 200 and out["object"] == "text_completion"
    assert set(out) == {"id", "object", "created", "model", "choices", "usage"}
    assert len(out["choices"][0]["text"]) == 5 and out["choices"][0]["finish_reason"] == "length"
    assert out["usage"] == {"prompt_tokens": 3, "completion_tokens": 5, "total_tokens": 8}
    chat = {"messages": [{"role": "system", "content": "Be brief."},
                         {"role": "user", "content": "Hi"}], "max_tokens": 4}  # fmt: skip
    r = client.post("/v1/chat/completions", json=chat, headers=H).json()
    assert r["object"] == "chat.completion" and r["choices"][0]["message"]["role"] == "assistant"
    assert r["usage"]["prompt_tokens"] == len("Be brief.\nUser: Hi\nAssistant: ")
    models = client.get("/v1/models", headers=H).json()
    assert models["data"][0]["id"] == "tiny-gpt"
    assert client.get("/v1/models").status_code == 401
    r = client.post("/v1/completions", json={**body, "model": "gpt-4"}, headers=H)
    assert r.status_code == 404 and r.json()["error"]["code"] == "model_not_found"
    assert client.get("/docs").status_code == 404  # off unless asked for


def test_streaming_is_openai_sse_and_matches_non_streaming(client):
    body = {"prompt": "The GPU", "max_tokens": 6, "temperature": 0}
    full = client.post("/v1/completions", json=body, headers=H).json()["choices"][0]["text"]
    stream = {**body, "stream": True, "stream_options": {"include_usage": True}}
    with client.stream("POST", "/v1/completions", json=stream, headers=H) as r:
        assert r.headers["content-type"].startswith("text/event-stream")
        assert r.headers["cache-control"] == "no-cache"
        lines = [ln for ln in r.iter_lines() if ln]
    assert all(ln.startswith("data: ") for ln in lines) and lines[-1] == "data: [DONE]"
    events = [json.loads(ln[6:]) for ln in lines[:-1]]
    assert "".join(e["choices"][0]["text"] for e in events if e["choices"]) == full
    assert events[-2]["choices"][0]["finish_reason"] == "length"
    assert events[-1]["usage"]["completion_tokens"] == 6
    chat = {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 3, "stream": True}
    with client.stream("POST", "/v1/chat/completions", json=chat, headers=H) as r:
        events = [json.loads(ln[6:]) for ln in r.iter_lines() if ln and ln != "data: [DONE]"]
    assert events[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert all(e["object"] == "chat.completion.chunk" for e in events)


def test_stop_sequences_and_seeds(client):
    body = {"prompt": "abc", "max_tokens": 20, "temperature": 1.0, "seed": 7}
    a = client.post("/v1/completions", json=body, headers=H).json()["choices"][0]["text"]
    b = client.post("/v1/completions", json=body, headers=H).json()["choices"][0]["text"]
    c = client.post("/v1/completions", json={**body, "seed": 8}, headers=H).json()
    assert a == b != c["choices"][0]["text"]
    stop = a[5:7]
    r = client.post("/v1/completions", json={**body, "stop": [stop]}, headers=H).json()
    assert r["choices"][0] == {
        **r["choices"][0],
        "text": a[: a.index(stop)],
        "finish_reason": "stop",
    }


BAD = [  # body, status, param
    ({"prompt": 3}, 400, "prompt"),
    ({"prompt": ""}, 400, "prompt"),
    ({"max_tokens": 3}, 400, "prompt"),
    ({"prompt": "x", "max_tokens": -1}, 400, "max_tokens"),
    ({"messages": [{"role": "user", "content": "x"}], "max_tokens": 0}, 400, "max_tokens"),
    ({"prompt": "x", "max_tokens": "5"}, 400, "max_tokens"),
    ({"prompt": "x", "max_tokens": 41}, 400, "max_tokens"),
    ({"prompt": "x" * 40, "max_tokens": 30}, 400, "prompt"),  # context 64
    ({"prompt": "x", "stream": "yes"}, 400, "stream"),
    ({"prompt": "x", "temperature": 2.5}, 400, "temperature"),
    ({"prompt": "x", "top_p": -0.1}, 400, "top_p"),
    ({"prompt": "x", "seed": 2**64}, 400, "seed"),
    ({"prompt": "x", "n": 2}, 400, "n"),
    ({"prompt": "x", "stop": ["a"] * 5}, 400, "stop"),
    ({"prompt": "x", "best_of": 2}, 400, "best_of"),
    ({"prompt": "caf\u00e9"}, 400, "prompt"),
    ({"messages": []}, 400, "messages"),
]


def test_every_bad_input_is_a_4xx_json_error(client):
    before = by_status(client)
    for body, status, param in BAD:
        url = "/v1/chat/completions" if "messages" in body else "/v1/completions"
        r = client.post(url, json=body, headers=H)
        assert r.status_code == status and r.json()["error"]["param"] == param, (body, r.text)
    raw_bodies = [b'{"prompt": "a", "max_tokens": 1e400}', b'{"prompt": "a", "temperature": NaN}',
                  b'{"prompt": "\\ud800"}', b'{"prompt": "\xff\xfe"}', b"{not json", b"", b"[]"]  # fmt: skip
    for raw in raw_bodies:
        r = client.post("/v1/completions", content=raw,
                        headers={**H, "content-type": "application/json"})  # fmt: skip
        assert r.status_code == 400 and r.json()["error"]["type"] == "invalid_request_error", raw
    r = client.post(
        "/v1/completions", content=b"prompt=x", headers={**H, "content-type": "text/plain"}
    )
    assert r.status_code == 415
    big = json.dumps({"prompt": "x", "junk": "y" * 100_000})
    r = client.post(
        "/v1/completions", content=big, headers={**H, "content-type": "application/json"}
    )
    assert r.status_code == 413 and len(r.content) < 300  # the junk is not echoed back
    assert client.put("/v1/completions", headers=H).status_code == 405
    after = by_status(client)
    assert after.get("400", 0) - before.get("400", 0) == len(BAD) + len(raw_bodies)
    assert after["413"] >= 1 and after["415"] >= 1 and after["405"] >= 1
    assert client.get("/health/ready").status_code == 200  # nothing above hurt the engine


def test_a_poisoned_request_fails_alone(model, monkeypatch):
    real = engine_mod.sample

    def poisoned(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
        if generator is not None and generator.initial_seed() == 666:
            raise FloatingPointError("simulated numerical failure")
        return real(logits, temperature, top_k, top_p, generator)

    monkeypatch.setattr(engine_mod, "sample", poisoned)
    app = create_app(LLMEngine(model, max_batch=8), [KEY], limiter=None)
    results = {}
    with TestClient(app, raise_server_exceptions=False) as c:

        def call(name, seed, stream):
            body = {
                "prompt": "ab",
                "max_tokens": 12,
                "temperature": 0.9,
                "seed": seed,
                "stream": stream,
            }
            if stream:
                with c.stream("POST", "/v1/completions", json=body, headers=H) as r:
                    results[name] = (r.status_code, [ln for ln in r.iter_lines() if ln])
            else:
                r = c.post("/v1/completions", json=body, headers=H)
                results[name] = (r.status_code, r.json())

        jobs = [("bad", 666, False), ("bad-stream", 666, True)]
        jobs += [(f"good{i}", i, i % 2 == 0) for i in range(6)]
        threads = [threading.Thread(target=call, args=j) for j in jobs]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
    status, body = results["bad"]
    assert status == 500 and body["error"]["type"] == "server_error"
    assert "simulated" not in json.dumps(body)  # no internals in the response
    status, lines = results["bad-stream"]
    assert status == 200 and "error" in json.loads(lines[-2][6:]) and lines[-1] == "data: [DONE]"
    for i in range(6):
        status, out = results[f"good{i}"]
        assert status == 200, out
        if i % 2:
            assert out["usage"]["completion_tokens"] == 12
        else:
            assert out[-1] == "data: [DONE]" and '"finish_reason": "length"' in out[-2]


def test_rate_limit_per_key_answers_429_with_retry_after(model):
    with pytest.raises(ValueError, match="burst"):
        create_app(LLMEngine(model), [KEY], rate=5, burst=0.5)
    with pytest.raises(ValueError, match="together"):
        create_app(LLMEngine(model), [KEY], shared_limit="5/second")
    app = create_app(LLMEngine(model), [KEY, "other"], limiter="token_bucket", rate=0.01, burst=3)
    with TestClient(app) as c:
        body = {"prompt": "a", "max_tokens": 1}
        codes = [c.post("/v1/completions", json=body, headers=H) for _ in range(4)]
        assert [r.status_code for r in codes] == [200, 200, 200, 429]
        assert int(codes[-1].headers["Retry-After"]) >= 99  # 1 token at 0.01 tokens/s
        assert codes[-1].json()["error"]["code"] == "rate_limit_exceeded"
        r = c.post("/v1/completions", json=body, headers={"X-API-Key": "other"})
        assert r.status_code == 200  # limits are per key
        assert by_status(c)["429"] == 1


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats() | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=6), children, max_size=3)
    ),
    max_leaves=6,
)
FIELDS = ["model", "prompt", "messages", "max_tokens", "temperature", "top_p", "stop", "seed",
          "stream", "n", "user", "stream_options", "logprobs", "max_completion_tokens",
          "ignore_eos", "min_tokens", "tools", "tool_choice", "response_format", "logit_bias",
          "metadata", "echo", "best_of", "suffix", "top_logprobs", "presence_penalty",
          "reasoning_effort", "prediction", "x-unknown"]  # fmt: skip


@settings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck))
@given(body=st.dictionaries(st.sampled_from(FIELDS), json_values, max_size=6),
       chat=st.booleans())  # fmt: skip
def test_fuzzed_bodies_never_give_a_5xx(client, body, chat):
    if isinstance(body.get("max_tokens"), int) and not isinstance(body["max_tokens"], bool):
        body["max_tokens"] = max(1, min(body["max_tokens"], 4))  # keep generation short
    url = "/v1/chat/completions" if chat else "/v1/completions"
    raw = json.dumps(body, allow_nan=True)
    r = client.post(url, content=raw, headers={**H, "content-type": "application/json"})
    assert r.status_code in (200, 400, 404), (body, r.status_code, r.text)
    if r.status_code != 200:
        assert set(r.json()["error"]) == {"message", "type", "param", "code"}
    elif r.headers["content-type"].startswith("text/event-stream"):
        assert r.text.rstrip().endswith("data: [DONE]")


def test_framework_errors_are_json_counted_and_logged_without_secrets(model, caplog):
    eng = LLMEngine(model)
    app = create_app(eng, [KEY], limiter=None)
    with TestClient(app, raise_server_exceptions=False) as c:
        eng.encode = lambda text: 1 / 0  # a bug in the route, not in the request
        with caplog.at_level("INFO", logger="labs.serving.access"):
            r = c.post("/v1/completions", json={"prompt": "secret prompt"}, headers=H)
            assert r.status_code == 500 and r.json()["error"] == {
                "message": "internal error", "type": "server_error", "param": None, "code": None,
            }  # fmt: skip
            c.post("/v1/completions", json={"prompt": "x"}, headers={"X-API-Key": "guess-1"})
        assert by_status(c)["500"] == 1 and by_status(c)["401"] == 1
    lines = [json.loads(r.message) for r in caplog.records if r.name == "labs.serving.access"]
    assert [ln["status"] for ln in lines] == [500, 401]
    assert lines[1]["key"] and lines[1]["client"]  # a failed guess leaves a trace
    text = caplog.text
    assert KEY not in text and "guess-1" not in text and "secret prompt" not in text


def test_a_short_request_does_not_wait_for_a_long_one(model):
    eng = LLMEngine(model, max_batch=2)
    done_at = {}
    long = engine_mod.GenRequest(
        eng.encode("a"), 50, on_finish=lambda r: done_at.setdefault("long", eng.steps)
    )
    short = engine_mod.GenRequest(
        eng.encode("b"), 1, on_finish=lambda r: done_at.setdefault("short", eng.steps)
    )
    eng.submit(long)
    eng.step()
    eng.step()  # the long request is decoding when the short one arrives
    eng.generate([short])
    assert done_at["short"] == 3 and done_at["long"] == 50  # joined at the next step, left at once
