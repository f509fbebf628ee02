"""OpenAI's request shapes as third-party clients send them (recorded), vLLM's extensions.

The fixture ``fixtures/openai_clients.json`` holds request bodies captured at the service from
the official ``openai`` SDKs (Python sync and async, Node), ``langchain-openai``, ``litellm`` and
``guidellm``; the first test replays every one of them. The others cover each shape on its own:
null for absent, content parts, roles, fields refused by name, unknown fields served with a
warning, ``ignore_eos``/``min_tokens``/``continuous_usage_stats``.
"""

import json
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from labs import data, gpt
from labs.serving import app as app_mod
from labs.serving import chat, protocol
from labs.serving.app import create_app
from labs.serving.engine import GenRequest, LLMEngine

KEY = "test-key-123"
H = {"Authorization": f"Bearer {KEY}"}
RECORDED = json.loads((Path(__file__).parent / "fixtures" / "openai_clients.json").read_text())


@pytest.fixture(scope="module")
def model():
    return gpt.GPT(gpt.GPTConfig(block_size=128, n_layer=1))


@pytest.fixture(scope="module")
def client(model):
    app = create_app(LLMEngine(model, max_batch=8), [KEY], limiter=None, max_tokens_limit=64)
    with TestClient(app) as c:
        yield c


def call(c, path: str, body: dict):
    """(status, headers, JSON body or the list of stream events)."""
    r = c.post(path, json=body, headers=H)
    if not r.headers["content-type"].startswith("text/event-stream"):
        return r.status_code, r.headers, r.json()
    lines = [ln for ln in r.text.split("\n") if ln]
    assert lines[-1] == "data: [DONE]", lines[-3:]
    return r.status_code, r.headers, [json.loads(ln[6:]) for ln in lines[:-1]]


def check_reply(body: dict, out, chat_api: bool) -> None:
    """What a client of this body may rely on: the objects, usage, the vLLM extensions, and
    without a limit, 16 tokens (completions) or the rest of the context (chat)."""
    asked = body.get("max_completion_tokens") or body.get("max_tokens")
    if not body.get("stream"):
        assert out["object"] == ("chat.completion" if chat_api else "text_completion")
        n_out, n_prompt = out["usage"]["completion_tokens"], out["usage"]["prompt_tokens"]
    else:
        assert all("error" not in e for e in out), out[-1]
        kind = "chat.completion.chunk" if chat_api else "text_completion"
        assert all(e["object"] == kind for e in out)
        opts = body.get("stream_options") or {}
        if not opts.get("include_usage"):
            return
        assert out[-1]["choices"] == [] and out[-1]["usage"]["total_tokens"] > 0
        n_out, n_prompt = out[-1]["usage"]["completion_tokens"], out[-1]["usage"]["prompt_tokens"]
        if opts.get("continuous_usage_stats"):  # vLLM: the usage so far, in every chunk
            seen = [e["usage"]["completion_tokens"] for e in out]
            assert seen == sorted(seen) and seen[-1] == n_out
        else:  # OpenAI: "usage": null in the others
            assert all(e["usage"] is None for e in out[:-1])
    limit = asked or (128 - n_prompt if chat_api else 16)  # the context is 128 tokens
    assert n_out <= limit
    if not asked and chat_api and not body.get("stop"):  # no end of turn from this model
        assert n_out == limit
    if body.get("ignore_eos") and not body.get("stop"):
        assert n_out == limit
    assert n_out >= (body.get("min_tokens") or 0)


@pytest.mark.parametrize(
    "rec",
    RECORDED["requests"],
    ids=[f"{r['client']}-{i}" for i, r in enumerate(RECORDED["requests"])],
)
def test_recorded_client_requests_are_served(client, rec):
    status, headers, out = call(client, rec["path"], rec["body"])
    assert status == rec["expect"]["status"], (rec, out)
    if status != 200:
        assert out["error"]["param"] == rec["expect"]["param"], out
        return
    chat_api = rec["path"] == "/v1/chat/completions"
    known = (
        protocol.ChatCompletionRequest if chat_api else protocol.CompletionRequest
    ).model_fields
    unknown = sorted(set(rec["body"]) - set(known))  # vLLM's top_k, say: served, and named
    assert headers.get("warning", "").count(", ") + 1 == len(unknown) or not unknown
    assert all(name in headers["warning"] for name in unknown) and (
        unknown or "warning" not in headers
    )
    check_reply(rec["body"], out, chat_api)


def test_the_recordings_cover_the_clients_and_what_failed_before():
    clients = {r["client"] for r in RECORDED["requests"]}
    assert clients == set(RECORDED["clients"]) >= {
        "openai-python", "openai-python-async", "openai-node", "langchain-openai", "litellm",
        "guidellm",
    }  # fmt: skip
    failed_before = [r for r in RECORDED["requests"] if r["status_before"] != 200]
    assert {r["client"] for r in failed_before} >= {"openai-python", "langchain-openai", "guidellm"}
    assert any(r["expect"]["status"] == 400 for r in RECORDED["requests"])  # refusals too


CHAT_FULL = {  # every optional field of the chat API at a value this server honours
    "model": "tiny-gpt", "max_tokens": 6, "max_completion_tokens": 6, "temperature": 0.8,
    "top_p": 0.9, "stop": ["zz"], "seed": 3, "stream": False, "stream_options": None,
    "n": 1, "user": "u-1", "frequency_penalty": 0, "presence_penalty": 0, "logit_bias": {},
    "ignore_eos": False, "min_tokens": 0, "logprobs": False, "top_logprobs": 0, "tools": [],
    "tool_choice": "none", "functions": [], "function_call": "none", "parallel_tool_calls": True,
    "response_format": {"type": "text"}, "modalities": ["text"], "audio": None,
    "reasoning_effort": "none", "verbosity": None, "web_search_options": None,
    "prediction": {"type": "content", "content": "Hi"}, "metadata": {"run": "1"}, "store": False,
    "service_tier": "auto", "prompt_cache_key": "k", "prompt_cache_retention": "in_memory",
    "prompt_cache_options": {}, "safety_identifier": "s-1", "moderation": None,
}  # fmt: skip
COMPLETION_FULL = {
    "model": "tiny-gpt", "max_tokens": 6, "temperature": 0.8, "top_p": 0.9, "stop": "zz",
    "seed": 3, "stream": False, "stream_options": None, "n": 1, "best_of": 1, "echo": False,
    "logprobs": None, "suffix": "", "user": "u-1", "frequency_penalty": 0, "presence_penalty": 0,
    "logit_bias": {}, "ignore_eos": True, "min_tokens": 2,
}  # fmt: skip


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(draws=st.data(), chat_api=st.booleans())
def test_null_means_absent_for_every_optional_field(client, draws, chat_api):
    full = CHAT_FULL if chat_api else COMPLETION_FULL
    nulled = draws.draw(st.sets(st.sampled_from(sorted(full))))
    required = {"messages": [{"role": "user", "content": "Hi"}]} if chat_api else {"prompt": "Hi"}
    path = "/v1/chat/completions" if chat_api else "/v1/completions"
    with_nulls = {**full, **dict.fromkeys(nulled), **required}
    without = {k: v for k, v in full.items() if k not in nulled} | required
    a, b = call(client, path, with_nulls), call(client, path, without)
    assert a[0] == b[0] == 200, (a, nulled)
    if "seed" not in nulled:  # the same seeded request, so the same text
        key = "message" if chat_api else "text"
        assert a[2]["choices"][0].get(key) == b[2]["choices"][0].get(key)


def test_content_parts_developer_role_names_and_empty_assistant_turns(client):
    parts = [{"role": "developer", "content": [{"type": "text", "text": "Be brief."}]},
             {"role": "user", "name": "ann", "content": [{"type": "text", "text": "Hi"},
                                                          {"type": "text", "text": "there"}]},
             {"role": "assistant", "content": None},
             {"role": "assistant", "content": [{"type": "refusal", "refusal": "No."}]},
             {"role": "user", "content": "Go"}]  # fmt: skip
    want = "Be brief.\nUser (ann): Hi\nthere\nAssistant: \nAssistant: No.\nUser: Go\nAssistant: "
    assert chat.chat_prompt(parts) == want  # parts joined with newlines, as vLLM does
    body = {"messages": parts, "max_tokens": 5, "temperature": 0}
    status, _, out = call(client, "/v1/chat/completions", body)
    assert status == 200 and out["usage"]["prompt_tokens"] == len(want)
    as_system = [{"role": "system", "content": "Be brief."}, *parts[1:]]
    _, _, same = call(client, "/v1/chat/completions", {**body, "messages": as_system})
    assert same["choices"] == out["choices"]  # developer is system


@pytest.mark.parametrize("part", [
    {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
    {"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}},
    {"type": "file", "file": {"file_id": "file-1"}},
    {"type": "refusal", "refusal": "no"},  # only an assistant's
])  # fmt: skip
def test_a_non_text_part_is_a_400_naming_its_type_and_index(client, part):
    msgs = [{"role": "system", "content": "s"},
            {"role": "user", "content": [{"type": "text", "text": "Look:"}, part]}]  # fmt: skip
    status, _, out = call(client, "/v1/chat/completions", {"messages": msgs})
    err = out["error"]
    assert status == 400 and err["type"] == "invalid_request_error"
    assert err["param"] == "messages[1].content[1].type" and repr(part["type"]) in err["message"]


REFUSED = [  # (endpoint, field, value): what this server cannot honour, refused by name
    ("chat", "tools", [{"type": "function", "function": {"name": "f"}}]),
    ("chat", "tool_choice", "required"),
    ("chat", "tool_choice", {"type": "function", "function": {"name": "f"}}),
    ("chat", "functions", [{"name": "f"}]),
    ("chat", "response_format", {"type": "json_object"}),
    ("chat", "logprobs", True),
    ("chat", "top_logprobs", 3),
    ("chat", "modalities", ["text", "audio"]),
    ("chat", "audio", {"voice": "alloy", "format": "wav"}),
    ("chat", "reasoning_effort", "high"),
    ("chat", "verbosity", "low"),
    ("chat", "web_search_options", {}),
    ("chat", "n", 2),
    ("chat", "logit_bias", {"5": 10}),
    ("chat", "presence_penalty", 0.5),
    ("completion", "frequency_penalty", -1.0),
    ("completion", "best_of", 3),
    ("completion", "echo", True),
    ("completion", "logprobs", 0),
    ("completion", "suffix", "end"),
    ("completion", "prompt", ["a", "b"]),
    ("completion", "prompt", [5, 96]),  # token id outside the vocabulary
    ("completion", "min_tokens", 7),  # more than max_tokens
    ("chat", "messages", [{"role": "tool", "content": "42", "tool_call_id": "c1"}]),
    ("chat", "messages", [{"role": "assistant", "content": None, "tool_calls": [{"id": "c1"}]}]),
    ("chat", "messages", [{"role": "user", "content": None}]),
    ("chat", "temperature", "0.5"),
    ("chat", "stream_options", {"include_usage": "yes"}),
]


@pytest.mark.parametrize("endpoint, field, value", REFUSED)
def test_what_cannot_be_honoured_is_a_400_naming_the_field(client, endpoint, field, value):
    chat_api = endpoint == "chat"
    body = {"messages": [{"role": "user", "content": "Hi"}]} if chat_api else {"prompt": "Hi"}
    body |= {"max_tokens": 4, field: value}
    status, _, out = call(client, "/v1/chat/completions" if chat_api else "/v1/completions", body)
    assert status == 400 and set(out["error"]) == {"message", "type", "param", "code"}, out
    assert out["error"]["param"].split(".")[0].split("[")[0] == field, out


def test_prompt_as_token_ids_and_as_a_list_of_one_string(client):
    base = {"max_tokens": 5, "temperature": 0}
    text = call(client, "/v1/completions", {**base, "prompt": "The GPU"})[2]
    ids = data.CharTokenizer().encode("The GPU").tolist()
    for prompt in (["The GPU"], [ids], ids):
        out = call(client, "/v1/completions", {**base, "prompt": prompt})[2]
        assert out["choices"] == text["choices"] and out["usage"] == text["usage"], prompt


def test_unknown_fields_are_served_and_named_in_a_warning_header(client):
    body = {"prompt": "Hi", "max_tokens": 3, "top_k": 5, "repetition_penalty": 1.1, "stream": True,
            "stream_options": {"include_usage": True, "frobnicate": 1}, "caf\u00e9\"": 1}  # fmt: skip
    r = client.post("/v1/completions", json=body, headers=H)
    assert r.status_code == 200
    warning = r.headers["warning"]
    assert warning.startswith('299 - "unsupported fields ignored: ') and warning.endswith('"')
    for name in ("top_k", "repetition_penalty", "stream_options.frobnicate", "caf??"):
        assert name in warning
    msgs = [{"role": "user", "content": [{"type": "text", "text": "Hi", "cache_control": {}}],
             "reasoning_content": "..."}]  # fmt: skip
    r = client.post("/v1/chat/completions", json={"messages": msgs, "stream": True}, headers=H)
    assert r.status_code == 200 and "messages[0].reasoning_content" in r.headers["warning"]
    r = client.post("/v1/completions", json={"prompt": "Hi", "max_tokens": 2}, headers=H)
    assert "warning" not in r.headers
    many = {"prompt": "Hi", "max_tokens": 1, **{f"x{i}": i for i in range(12)}}
    warning = client.post("/v1/completions", json=many, headers=H).headers["warning"]
    assert warning.endswith('x7 and 4 more"')


def greedy(eng, prompt, n, **kw):
    req = GenRequest(eng.encode(prompt), n, temperature=0.0, **kw)
    eng.generate([req])
    return req


def test_ignore_eos_and_min_tokens_end_requests_as_vllm_does(model):
    eng = LLMEngine(model, max_batch=4)
    full = greedy(eng, "ab", 40).text  # the reference: no stop, no end of sequence
    eos = full[6:8]
    first = full.index(eos)
    r = greedy(eng, "ab", 40, eos=(eos,))
    assert (r.text, r.finish_reason, len(r.output)) == (full[:first], "stop", first + 2)
    r = greedy(eng, "ab", 40, eos=(eos,), ignore_eos=True)
    assert (r.text, r.finish_reason, len(r.output)) == (full, "length", 40)
    r = greedy(eng, "ab", 40, stop=(eos,), ignore_eos=True)  # stop strings still apply
    assert (r.text, r.finish_reason) == (full[:first], "stop")
    for min_tokens in (0, first + 1, first + 2, first + 3, 39, 40):
        for key in ("eos", "stop"):
            r = greedy(eng, "ab", 40, min_tokens=min_tokens, **{key: (eos,)})
            # vLLM searches only the text after the first min_tokens tokens: a stop string
            # counts where it ends after them (it may begin before)
            at = full.find(eos, max(0, min_tokens - len(eos) + 1))
            want = (full[:at], "stop") if at >= 0 else (full, "length")
            assert (r.text, r.finish_reason) == want, (min_tokens, key)
            assert len(r.output) >= min_tokens
    with pytest.raises(ValueError, match="min_tokens"):
        eng.submit(GenRequest(eng.encode("ab"), 4, min_tokens=5))
    with pytest.raises(ValueError, match="min_tokens"):
        eng.submit(GenRequest(eng.encode("ab"), 4, min_tokens=-1))


def test_the_chat_endpoint_ends_at_the_end_of_turn_unless_ignore_eos(model, monkeypatch):
    eng = LLMEngine(model, max_batch=4)
    msgs = [{"role": "user", "content": "Hi"}]
    full = greedy(eng, chat.chat_prompt(msgs), 30).text
    monkeypatch.setattr(app_mod, "CHAT_END_OF_TURN", (full[4:6],))  # an end of turn it writes
    app = create_app(LLMEngine(model, max_batch=4), [KEY], limiter=None)
    with TestClient(app) as c:
        body = {"messages": msgs, "max_tokens": 30, "temperature": 0}
        out = call(c, "/v1/chat/completions", body)[2]["choices"][0]
        assert out["message"]["content"] == full[: full.index(full[4:6])]
        assert out["finish_reason"] == "stop"
        out = call(c, "/v1/chat/completions", {**body, "ignore_eos": True})[2]
        assert out["choices"][0]["message"]["content"] == full
        assert out["usage"]["completion_tokens"] == 30


def test_stream_usage_every_chunk_or_last_only(client):
    body = {"prompt": "The", "max_tokens": 12, "temperature": 0, "stream": True}
    every = {**body, "stream_options": {"include_usage": True, "continuous_usage_stats": True}}
    events = call(client, "/v1/completions", every)[2]
    text = ""
    for e in events[:-1]:  # one character per token, none held back: the count is exact
        text += e["choices"][0]["text"]
        assert e["usage"] == {"prompt_tokens": 3, "completion_tokens": len(text),
                              "total_tokens": 3 + len(text)}  # fmt: skip
    assert events[-1]["usage"]["completion_tokens"] == 12 == len(text)
    last = call(client, "/v1/completions", {**body, "stream_options": {"include_usage": True}})[2]
    assert [e["usage"] for e in last[:-1]] == [None] * (len(last) - 1)
    assert last[-1]["usage"]["completion_tokens"] == 12
    plain = call(client, "/v1/completions", body)[2]  # no usage asked: no usage key at all
    chat_every = {"messages": [{"role": "user", "content": "Hi"}], **every}
    first = call(client, "/v1/chat/completions", chat_every)[2][0]
    assert all("usage" not in e for e in plain) and first["usage"]["completion_tokens"] == 0
