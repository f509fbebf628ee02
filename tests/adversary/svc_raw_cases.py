"""Raw HTTP cases against the Chapter 6 service, each judged by OpenAI's API reference.

Every case is one request (or a few) sent with `httpx` as OpenAI's documented examples send it.
`expect` quotes what the reference (openai/openai-openapi `openapi.yaml`, the schemas
CreateCompletionRequest, CreateChatCompletionRequest, ChatCompletionStreamOptions,
StopConfiguration, Error) implies; `judge(resp)` returns (passed, what was got).
A refusal passes only as a 4xx whose body is OpenAI's error object
(`{"error": {"message", "type", "param", "code"}}`) naming the field.
"""

from __future__ import annotations

import json

ERROR_KEYS = {"message", "type", "param", "code"}
HI = [{"role": "user", "content": "Hi"}]


def chat(**kw):
    return {"model": "tiny-gpt", "messages": HI, "max_tokens": 5} | kw


def comp(**kw):
    return {"model": "tiny-gpt", "prompt": "The GPU", "max_tokens": 5} | kw


def body(r):
    try:
        return r.json()
    except ValueError:
        return None


def error_object(r) -> dict | None:
    """The `error` member when the body is exactly OpenAI's error object, else None."""
    b = body(r)
    if isinstance(b, dict) and isinstance(b.get("error"), dict):
        if ERROR_KEYS <= set(b["error"]):
            return b["error"]
    return None


def got(r) -> str:
    e = error_object(r)
    if e is not None:
        return f"{r.status_code} param={e['param']} code={e['code']}: {e['message'][:90]}"
    b = body(r)
    if isinstance(b, dict) and b.get("choices"):
        ch = b["choices"][0]
        text = ch.get("text", (ch.get("message") or {}).get("content"))
        return f"{r.status_code} {text!r} finish={ch.get('finish_reason')} usage={b.get('usage')}"
    warn = r.headers.get("warning")
    return f"{r.status_code} {r.text[:110]!r}" + (f" Warning: {warn}" if warn else "")


def ok(pred=None):
    def judge(r):
        b = body(r)
        return r.status_code == 200 and (pred is None or bool(pred(b, r))), got(r)

    return judge


def refused(param: str, code: str | None = None, status: int = 400):
    def judge(r):
        e = error_object(r)
        passed = (
            r.status_code == status
            and e is not None
            and str(e["param"]).startswith(param)
            and (code is None or e["code"] == code)
        )
        return passed, got(r)

    return judge


def served_or_refused(param: str):
    """OpenAI would serve it; a service that cannot may refuse it by name."""

    def judge(r):
        return r.status_code == 200 or refused(param)(r)[0], got(r)

    return judge


def text_of(b):
    ch = b["choices"][0]
    return ch.get("text", (ch.get("message") or {}).get("content"))


C, H = "/v1/completions", "/v1/chat/completions"
# 104 characters: with the chat template's 18, a 122-token prompt that fits the 128-token context
# but leaves fewer than 16 tokens (the first run sent 112, a 129/130-token prompt that cannot fit)
LONG = "a b " * 26

# (id, endpoint, body, expected per OpenAI's reference, judge, severity if it fails)
CASES = [
    # -- completions: what OpenAI documents and the service claims
    (
        "compl-stop-string",
        C,
        comp(stop="in", temperature=0, max_tokens=20),
        "200; text cut before the stop string, finish_reason stop",
        ok(lambda b, r: "in" not in text_of(b) and b["choices"][0]["finish_reason"] == "stop"),
        "high",
    ),
    (
        "compl-stop-list",
        C,
        comp(stop=["in", "zz"], temperature=0, max_tokens=20),
        "200; as stop string",
        ok(lambda b, r: b["choices"][0]["finish_reason"] == "stop"),
        "high",
    ),
    (
        "compl-stop-5",
        C,
        comp(stop=list("abcde")),
        "400 param stop (maxItems 4)",
        refused("stop"),
        "low",
    ),
    (
        "compl-stop-empty-list",
        C,
        comp(stop=[]),
        "400 param stop (minItems 1) or served",
        served_or_refused("stop"),
        "low",
    ),
    (
        "compl-token-ids",
        C,
        comp(prompt=[53, 73, 70]),
        "200; prompt_tokens 3",
        ok(lambda b, r: b["usage"]["prompt_tokens"] == 3),
        "high",
    ),
    (
        "compl-token-id-arrays-1",
        C,
        comp(prompt=[[53, 73, 70]]),
        "200; prompt_tokens 3",
        ok(lambda b, r: b["usage"]["prompt_tokens"] == 3),
        "medium",
    ),
    (
        "compl-token-id-arrays-2",
        C,
        comp(prompt=[[53, 73], [40, 41]]),
        "OpenAI: 2 choices; else 400 param prompt",
        served_or_refused("prompt"),
        "medium",
    ),
    (
        "compl-batched-strings",
        C,
        comp(prompt=["The GPU", "A cat"]),
        "OpenAI: 2 choices; else 400 param prompt",
        served_or_refused("prompt"),
        "medium",
    ),
    (
        "compl-token-id-out-of-vocab",
        C,
        comp(prompt=[50256]),
        "400 param prompt",
        refused("prompt"),
        "medium",
    ),
    (
        "compl-max-tokens-0",
        C,
        comp(max_tokens=0),
        "200 with empty text (max_tokens minimum is 0)",
        ok(),
        "low",
    ),
    (
        "compl-echo-true",
        C,
        comp(echo=True),
        "changes the answer: honour or 400 param echo",
        refused("echo"),
        "high",
    ),
    (
        "compl-suffix",
        C,
        comp(suffix=" end."),
        "changes the answer: honour or 400 param suffix",
        refused("suffix"),
        "high",
    ),
    (
        "compl-best-of-3",
        C,
        comp(best_of=3),
        "honour or 400 param best_of",
        refused("best_of"),
        "medium",
    ),
    (
        "compl-logit-bias",
        C,
        comp(logit_bias={"0": -100}),
        "honour or 400 param logit_bias",
        refused("logit_bias"),
        "high",
    ),
    (
        "compl-max-completion-tokens",
        C,
        {"model": "tiny-gpt", "prompt": "Hi", "max_completion_tokens": 3},
        "not a completions field: served with the documented Warning naming it",
        ok(lambda b, r: "max_completion_tokens" in (r.headers.get("warning") or "")),
        "medium",
    ),
    (
        "compl-unicode",
        C,
        comp(prompt="caf\u00e9 \u65e5\u672c \U0001f600"),
        "400 param prompt (outside the vocabulary)",
        refused("prompt"),
        "medium",
    ),
    (
        "compl-long-60k",
        C,
        comp(prompt="a" * 60000),
        "400 context_length_exceeded",
        refused("prompt", "context_length_exceeded"),
        "medium",
    ),
    (
        "compl-wrong-model",
        C,
        comp(model="gpt-4o"),
        "404 code model_not_found",
        refused("model", "model_not_found", 404),
        "medium",
    ),
    (
        "compl-no-model",
        C,
        {"prompt": "Hi", "max_tokens": 3},
        "OpenAI: 400 (model is required); the README's own curl omits it",
        served_or_refused("model"),
        "low",
    ),
    (
        "compl-stream-options-without-stream",
        C,
        comp(stream_options={"include_usage": True}),
        "OpenAI: 400 param stream_options ('only allowed when stream is enabled')",
        refused("stream_options"),
        "low",
    ),
    # -- chat completions
    (
        "chat-max-completion-tokens",
        H,
        chat(max_tokens=None, max_completion_tokens=3),
        "200; completion_tokens 3, finish length",
        ok(lambda b, r: b["usage"]["completion_tokens"] == 3),
        "high",
    ),
    (
        "chat-optional-fields",
        H,
        chat(
            n=1,
            seed=3,
            user="u-1",
            logprobs=False,
            temperature=0,
            messages=[{"role": "user", "content": "Hi", "name": "alice"}],
        ),
        "200 (n=1, seed, user, logprobs false, temperature 0, message name)",
        ok(),
        "high",
    ),
    (
        "chat-assistant-content-null",
        H,
        chat(
            messages=[
                *HI,
                {"role": "assistant", "content": None},
                {"role": "user", "content": "Yo"},
            ]
        ),
        "content is 'required unless tool_calls': 400 param messages[1].content, or served",
        served_or_refused("messages"),
        "low",
    ),
    (
        "chat-empty-messages",
        H,
        chat(messages=[]),
        "400 param messages (minItems 1)",
        refused("messages"),
        "medium",
    ),
    (
        "chat-unicode",
        H,
        chat(messages=[{"role": "user", "content": "Gr\u00fc\u00dfe \U0001f600"}]),
        "400 naming messages[0].content",
        refused("messages"),
        "medium",
    ),
    (
        "chat-unknown-role",
        H,
        chat(messages=[{"role": "foo", "content": "x"}]),
        "400 naming messages[0].role",
        refused("messages"),
        "low",
    ),
    (
        "chat-no-max-tokens",
        H,
        {"model": "tiny-gpt", "messages": [{"role": "user", "content": "Tell me"}]},
        "no max_tokens: generate to end of turn or context (OpenAI and vLLM default), not 16",
        ok(
            lambda b, r: (
                b["usage"]["completion_tokens"] > 16 or b["choices"][0]["finish_reason"] == "stop"
            )
        ),
        "high",
    ),
    (
        "chat-no-max-tokens-long-prompt",
        H,
        {"model": "tiny-gpt", "messages": [{"role": "user", "content": LONG}]},
        "prompt fits the context: 200 (OpenAI caps the default at what is left)",
        ok(),
        "high",
    ),
    ("chat-response-format-text", H, chat(response_format={"type": "text"}), "200", ok(), "medium"),
    (
        "chat-response-format-json-object",
        H,
        chat(response_format={"type": "json_object"}),
        "400 param response_format",
        refused("response_format"),
        "high",
    ),
    ("chat-tool-choice-none", H, chat(tool_choice="none"), "200", ok(), "medium"),
    (
        "chat-tool-choice-required",
        H,
        chat(tool_choice="required"),
        "400 param tool_choice (no tools)",
        refused("tool_choice"),
        "high",
    ),
    (
        "chat-functions",
        H,
        chat(functions=[{"name": "f", "parameters": {"type": "object"}}]),
        "400 param functions",
        refused("functions"),
        "high",
    ),
    (
        "chat-modalities-audio",
        H,
        chat(modalities=["text", "audio"], audio={"voice": "alloy", "format": "wav"}),
        "400 param modalities/audio",
        refused(""),
        "high",
    ),
    (
        "chat-logit-bias",
        H,
        chat(logit_bias={"5": 100}),
        "400 param logit_bias",
        refused("logit_bias"),
        "high",
    ),
    (
        "chat-top-logprobs-2",
        H,
        chat(top_logprobs=2),
        "400 param top_logprobs",
        refused("top_logprobs"),
        "medium",
    ),
    (
        "chat-reasoning-effort",
        H,
        chat(reasoning_effort="low"),
        "400 param reasoning_effort",
        refused("reasoning_effort"),
        "low",
    ),
    (
        "chat-web-search",
        H,
        chat(web_search_options={}),
        "400 param web_search_options",
        refused("web_search_options"),
        "medium",
    ),
    (
        "chat-tool-message",
        H,
        chat(messages=[*HI, {"role": "tool", "tool_call_id": "c1", "content": "42"}]),
        "400 naming messages[1].role",
        refused("messages[1]"),
        "medium",
    ),
    (
        "chat-input-audio-part",
        H,
        chat(
            messages=[
                {
                    "role": "user",
                    "content": [
                        {"type": "input_audio", "input_audio": {"data": "AA==", "format": "wav"}}
                    ],
                }
            ]
        ),
        "400 naming messages[0].content[0]",
        refused("messages[0].content[0]"),
        "medium",
    ),
    ("chat-top-p-0", H, chat(top_p=0), "200 (top_p minimum is 0: greedy)", ok(), "low"),
    ("chat-temperature-2", H, chat(temperature=2), "200 (maximum 2)", ok(), "low"),
    (
        "chat-temperature-2.01",
        H,
        chat(temperature=2.01),
        "400 param temperature",
        refused("temperature"),
        "low",
    ),
    ("chat-n-2", H, chat(n=2), "400 param n", refused("n", "unsupported_value"), "high"),
    (
        "chat-stream-n-2",
        H,
        chat(n=2, stream=True),
        "400 JSON error before any SSE",
        refused("n"),
        "high",
    ),
    (
        "chat-prediction",
        H,
        chat(prediction={"type": "content", "content": "Hello"}),
        "200 (prediction only speeds up; same answer)",
        ok(),
        "low",
    ),
    (
        "chat-store-metadata",
        H,
        chat(
            store=False,
            metadata={"a": "b"},
            service_tier="auto",
            safety_identifier="s",
            prompt_cache_key="k",
        ),
        "200",
        ok(),
        "medium",
    ),
]


def raw_http_cases(url: str, auth: dict) -> list[dict]:
    """Endpoints, methods and headers (not request fields)."""
    J = {"Content-Type": "application/json"}
    pre = {
        "Origin": "http://localhost:5173",
        "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "authorization,content-type",
    }
    return [
        dict(
            id="models-list",
            method="GET",
            path="/v1/models",
            headers=auth,
            expect="200 list of Model",
            sev="high",
            judge=ok(lambda b, r: b["object"] == "list" and b["data"][0]["object"] == "model"),
        ),
        dict(
            id="models-retrieve",
            method="GET",
            path="/v1/models/tiny-gpt",
            headers=auth,
            expect="200 Model object (GET /v1/models/{model})",
            sev="medium",
            judge=ok(lambda b, r: b.get("id") == "tiny-gpt" and b.get("object") == "model"),
        ),
        dict(
            id="models-retrieve-unknown",
            method="GET",
            path="/v1/models/gpt-4o",
            headers=auth,
            expect="404 code model_not_found",
            sev="low",
            judge=refused("model", "model_not_found", 404),
        ),
        dict(
            id="head-models",
            method="HEAD",
            path="/v1/models",
            headers=auth,
            expect="200, no body (RFC 9110: HEAD wherever GET is)",
            sev="low",
            judge=lambda r: (
                r.status_code == 200,
                f"{r.status_code} allow={r.headers.get('allow')}",
            ),
        ),
        dict(
            id="cors-preflight",
            method="OPTIONS",
            path="/v1/chat/completions",
            headers=pre,
            expect="2xx with Access-Control-Allow-Origin/-Headers (browser SDKs; vLLM allows *)",
            sev="medium",
            judge=lambda r: (
                r.status_code < 300 and "access-control-allow-origin" in r.headers,
                f"{r.status_code} {r.text[:80]!r}",
            ),
        ),
        dict(
            id="cors-simple-post",
            method="POST",
            path="/v1/chat/completions",
            headers=auth | J | {"Origin": "http://localhost:5173"},
            content=json.dumps(chat()),
            expect="200 with Access-Control-Allow-Origin",
            sev="medium",
            judge=lambda r: (
                r.status_code == 200 and "access-control-allow-origin" in r.headers,
                f"{r.status_code} ACAO={r.headers.get('access-control-allow-origin')}",
            ),
        ),
        dict(
            id="charset-content-type",
            method="POST",
            path=C,
            headers=auth | {"Content-Type": "application/json; charset=utf-8"},
            content=json.dumps(comp()),
            expect="200",
            sev="high",
            judge=ok(),
        ),
        dict(
            id="invalid-json",
            method="POST",
            path=C,
            headers=auth | J,
            content='{"prompt": "Hi",',
            expect="400 error object",
            sev="medium",
            judge=lambda r: (r.status_code == 400 and error_object(r) is not None, got(r)),
        ),
        dict(
            id="no-key",
            method="POST",
            path=C,
            headers=J,
            content=json.dumps(comp()),
            expect="401 error object, code invalid_api_key",
            sev="medium",
            judge=lambda r: (
                r.status_code == 401 and (error_object(r) or {}).get("code") == "invalid_api_key",
                got(r),
            ),
        ),
        dict(
            id="body-200k",
            method="POST",
            path=C,
            headers=auth | J,
            content=json.dumps(comp(prompt="a" * 200000)),
            expect="413 error object",
            sev="medium",
            judge=lambda r: (r.status_code == 413 and error_object(r) is not None, got(r)),
        ),
        dict(
            id="embeddings",
            method="POST",
            path="/v1/embeddings",
            headers=auth | J,
            content=json.dumps({"model": "tiny-gpt", "input": "Hi"}),
            expect="not claimed: 404 error object",
            sev="gap",
            judge=lambda r: (r.status_code == 404 and error_object(r) is not None, got(r)),
        ),
    ]
