"""Third-party client calls, each run in the client's own virtual environment.

Each snippet is Python source run as ``<venv>/bin/python -c`` with ``ADV_BASE`` (the recording
proxy, no ``/v1``) and ``ADV_KEY`` in its environment; it prints one line ``ADV_RESULT {json}``
(``result`` or ``error``). ``expect`` says what OpenAI's API reference implies the call should
give; ``judge(result, records)`` decides from the snippet's result and the requests the proxy
recorded. ``kind`` is "claim" (the service documents it), "refusal" (it should refuse clearly),
or "gap" (an OpenAI endpoint the service does not claim; a clear 404 is all it owes).
"""

from __future__ import annotations

import json

PRELUDE = """
import json, os, sys, asyncio
BASE = os.environ["ADV_BASE"]; KEY = os.environ["ADV_KEY"]; V1 = BASE + "/v1"
def done(**kw):
    print("ADV_RESULT " + json.dumps(kw, default=repr))
"""


def _wrap(body: str) -> str:
    lines = "\n".join("    " + ln for ln in body.strip("\n").splitlines())
    return (
        PRELUDE
        + "try:\n"
        + lines
        + "\nexcept BaseException as e:\n"
        + "    done(error=(type(e).__name__ + ': ' + str(e))[:1500])\n"
    )


def _statuses(recs):
    return [r.get("status") for r in recs]


def _err_has(res, *words):
    e = res.get("error") or ""
    return all(w in e for w in words)


def _ok_text(res, recs):
    r = res.get("result")
    ok = isinstance(r, (str, list, dict)) and bool(r) and all(s == 200 for s in _statuses(recs))
    return ok, f"result={str(r)[:80]!r} statuses={_statuses(recs)}" + (
        f" error={res.get('error', '')[:200]}" if "error" in res else ""
    )


def _refused(param):
    def judge(res, recs):
        bad = [r for r in recs if r.get("status", 0) >= 400]
        ok = (
            bool(bad)
            and all(400 <= r["status"] < 500 for r in bad)
            and any(
                f'"param": "{param}"' in r["response"] or f'"param":"{param}"' in r["response"]
                for r in bad
            )
        )
        return ok, f"statuses={_statuses(recs)} error={res.get('error', '')[:220]!r}"

    return judge


def _clear_context_refusal(r):
    return r.get("status") == 400 and "context_length_exceeded" in r.get("response", "")


def _served_or_context(res, recs):
    """The tiny model's 128-token context: a clear context_length_exceeded is a fair answer."""
    ok = bool(recs) and all(
        r["status"] == 200
        or _clear_context_refusal(r)
        or '"param": "response_format"' in r["response"]
        for r in recs
    )
    return ok, f"statuses={_statuses(recs)} {str(res)[:200]}"


def _default_length(res, recs):
    """No max_tokens sent: OpenAI (and vLLM) generate to the end of the turn or the context."""
    try:
        b = json.loads(recs[-1]["response"])
        fin, u = b["choices"][0]["finish_reason"], b["usage"]
    except (IndexError, KeyError, ValueError):
        return False, f"statuses={_statuses(recs)} {str(res)[:160]}"
    sent = {k: (recs[-1]["body"] or {}).get(k) for k in ("max_tokens", "max_completion_tokens")}
    ok = fin == "stop" or u["total_tokens"] >= 128
    return ok, f"sent {sent}; got finish_reason={fin} usage={u}"


def _gap(res, recs):
    ok = recs and all(r["status"] == 404 for r in recs) and '"error"' in recs[-1]["response"]
    return bool(ok), f"statuses={_statuses(recs)} error={res.get('error', '')[:160]!r}"


SNIPPETS = [
    # ----------------------------------------------------------------- openai (Python SDK)
    dict(
        id="openai-raw-response",
        venv="openai",
        kind="claim",
        call="chat.completions.with_raw_response.create(...).parse()",
        expect="200; raw headers readable; parse() gives a ChatCompletion",
        src="""
import openai
c = openai.OpenAI(base_url=V1, api_key=KEY, max_retries=0)
r = c.chat.completions.with_raw_response.create(model="tiny-gpt", max_tokens=4,
        messages=[{"role": "user", "content": "Hi"}])
done(result={"status": r.status_code, "ctype": r.headers.get("content-type"),
             "content": r.parse().choices[0].message.content})
""",
        judge=lambda res, recs: (
            (res.get("result") or {}).get("status") == 200,
            str(res)[:160],
        ),
    ),
    dict(
        id="openai-streaming-response",
        venv="openai",
        kind="claim",
        call="chat.completions.with_streaming_response.create(stream=True).iter_lines()",
        expect="200, SSE lines ending with 'data: [DONE]'",
        src="""
import openai
c = openai.OpenAI(base_url=V1, api_key=KEY, max_retries=0)
with c.chat.completions.with_streaming_response.create(model="tiny-gpt", max_tokens=4,
        stream=True, messages=[{"role": "user", "content": "Hi"}]) as r:
    lines = [ln for ln in r.iter_lines() if ln]
done(result={"status": r.status_code, "last": lines[-1], "n": len(lines)})
""",
        judge=lambda res, recs: (
            (res.get("result") or {}).get("last") == "data: [DONE]",
            str(res)[:160],
        ),
    ),
    dict(
        id="openai-parse-json-schema",
        venv="openai",
        kind="refusal",
        call="chat.completions.parse(response_format=PydanticModel)",
        expect="400 naming response_format (json_schema unsupported), BadRequestError",
        src="""
import openai, pydantic
class Answer(pydantic.BaseModel):
    answer: str
c = openai.OpenAI(base_url=V1, api_key=KEY, max_retries=0)
try:
    c.chat.completions.parse(model="tiny-gpt", response_format=Answer, max_tokens=8,
                             messages=[{"role": "user", "content": "Hi"}])
    done(result="parsed?!")
except openai.BadRequestError as e:
    done(error=f"BadRequestError {e.status_code} param={e.body.get('param')} code={e.body.get('code')}")
""",
        judge=_refused("response_format"),
    ),
    dict(
        id="openai-models-retrieve",
        venv="openai",
        kind="claim",
        sev="medium",
        call='models.retrieve("tiny-gpt")  (GET /v1/models/{model})',
        expect="200 Model object {id, object: 'model', created, owned_by}",
        src="""
import openai
c = openai.OpenAI(base_url=V1, api_key=KEY, max_retries=0)
m = c.models.retrieve("tiny-gpt")
done(result={"id": m.id, "object": m.object})
""",
        judge=lambda res, recs: (
            (res.get("result") or {}).get("id") == "tiny-gpt",
            f"statuses={_statuses(recs)} {str(res)[:140]}",
        ),
    ),
    dict(
        id="openai-models-retrieve-unknown",
        venv="openai",
        kind="claim",
        sev="low",
        call='models.retrieve("gpt-4o")',
        expect="404 NotFoundError, error code model_not_found",
        src="""
import openai
c = openai.OpenAI(base_url=V1, api_key=KEY, max_retries=0)
try:
    c.models.retrieve("gpt-4o"); done(result="found?!")
except openai.NotFoundError as e:
    done(error=f"NotFoundError code={e.body.get('code')} msg={e.body.get('message')}")
""",
        judge=lambda res, recs: (
            _err_has(res, "model_not_found"),
            f"statuses={_statuses(recs)} {res.get('error', '')[:140]}",
        ),
    ),
    dict(
        id="openai-completions-batched",
        venv="openai",
        kind="refusal",
        call='completions.create(prompt=["The GPU", "A cat"])',
        expect="OpenAI: 2 choices (index 0, 1); a service that cannot: 400 naming prompt",
        src="""
import openai
c = openai.OpenAI(base_url=V1, api_key=KEY, max_retries=0)
try:
    r = c.completions.create(model="tiny-gpt", prompt=["The GPU", "A cat"], max_tokens=4)
    done(result=[ch.index for ch in r.choices])
except openai.BadRequestError as e:
    done(error=f"BadRequestError param={e.body.get('param')} {e.body.get('message')}")
""",
        judge=lambda res, recs: (
            res.get("result") == [0, 1] or _refused("prompt")(res, recs)[0],
            f"statuses={_statuses(recs)} {str(res)[:160]}",
        ),
    ),
    dict(
        id="openai-async-stream-helper",
        venv="openai",
        kind="claim",
        call="AsyncOpenAI chat.completions.stream(stop=[...], include_usage) + get_final_completion",
        expect="text deltas, finish_reason, usage on the final completion",
        src="""
import openai
async def main():
    c = openai.AsyncOpenAI(base_url=V1, api_key=KEY, max_retries=0)
    async with c.chat.completions.stream(model="tiny-gpt", max_tokens=40, stop=["e"],
            stream_options={"include_usage": True}, temperature=0,
            messages=[{"role": "user", "content": "Tell me about GPUs"}]) as s:
        async for _ in s:
            pass
        try:
            fc = await s.get_final_completion()
        except openai.LengthFinishReasonError as e:
            fc = e.completion
    done(result={"content": fc.choices[0].message.content,
                 "finish": fc.choices[0].finish_reason, "usage": fc.usage.model_dump()})
asyncio.run(main())
""",
        judge=lambda res, recs: (
            bool((res.get("result") or {}).get("usage")),
            str(res)[:200],
        ),
    ),
    dict(
        id="openai-responses-api",
        venv="openai",
        kind="gap",
        call='responses.create(model="tiny-gpt", input="Hi")',
        expect="OpenAI: a Response. Not claimed by the service: a clear 404 error object",
        src="""
import openai
c = openai.OpenAI(base_url=V1, api_key=KEY, max_retries=0)
try:
    r = c.responses.create(model="tiny-gpt", input="Hi", max_output_tokens=16)
    done(result=r.output_text)
except openai.APIStatusError as e:
    done(error=f"{type(e).__name__} {e.status_code} {e.body}")
""",
        judge=_gap,
    ),
    # ----------------------------------------------------------------- instructor
    dict(
        id="instructor-tools-mode",
        venv="instructor",
        kind="refusal",
        call="instructor.from_openai(client) (Mode.TOOLS) .create(response_model=M)",
        expect="400 naming tools, surfaced once (no retry storm)",
        src="""
import openai, instructor, pydantic
class Answer(pydantic.BaseModel):
    answer: str
c = instructor.from_openai(openai.OpenAI(base_url=V1, api_key=KEY, max_retries=0))
r = c.chat.completions.create(model="tiny-gpt", response_model=Answer, max_retries=1,
        max_tokens=16, messages=[{"role": "user", "content": "Hi"}])
done(result=r.model_dump())
""",
        judge=_refused("tools"),
    ),
    dict(
        id="instructor-json-mode",
        venv="instructor",
        kind="refusal",
        call="instructor.from_openai(client, mode=Mode.JSON)",
        expect="400 naming response_format (json_object)",
        src="""
import openai, instructor, pydantic
class Answer(pydantic.BaseModel):
    answer: str
c = instructor.from_openai(openai.OpenAI(base_url=V1, api_key=KEY, max_retries=0),
                           mode=instructor.Mode.JSON)
r = c.chat.completions.create(model="tiny-gpt", response_model=Answer, max_retries=1,
        max_tokens=16, messages=[{"role": "user", "content": "Hi"}])
done(result=r.model_dump())
""",
        judge=_refused("response_format"),
    ),
    dict(
        id="instructor-md-json-mode",
        venv="instructor",
        kind="claim",
        call="instructor Mode.MD_JSON (plain chat, JSON asked for in the prompt)",
        expect="200, or a clear 400 context_length_exceeded (instructor's prompt vs 128 tokens)",
        src="""
import openai, instructor, pydantic
class Answer(pydantic.BaseModel):
    answer: str
c = instructor.from_openai(openai.OpenAI(base_url=V1, api_key=KEY, max_retries=0),
                           mode=instructor.Mode.MD_JSON)
r = c.chat.completions.create(model="tiny-gpt", response_model=Answer, max_retries=1,
        max_tokens=16, messages=[{"role": "user", "content": "Hi"}])
done(result=r.model_dump())
""",
        judge=_served_or_context,
    ),
    dict(
        id="instructor-plain",
        venv="instructor",
        kind="claim",
        call="instructor client .create(response_model=None)",
        expect="200 plain ChatCompletion",
        src="""
import openai, instructor
c = instructor.from_openai(openai.OpenAI(base_url=V1, api_key=KEY, max_retries=0))
r = c.chat.completions.create(model="tiny-gpt", response_model=None, max_tokens=8,
        messages=[{"role": "user", "content": "Hi"}])
done(result=r.choices[0].message.content)
""",
        judge=_ok_text,
    ),
    # ----------------------------------------------------------------- pydantic-ai
    dict(
        id="pydantic-ai-run-sync",
        venv="pydai",
        kind="claim",
        call="Agent(OpenAIChatModel('tiny-gpt', provider=OpenAIProvider(base_url))).run_sync",
        expect="200; str output; usage counted",
        src="""
from pydantic_ai import Agent
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider
m = OpenAIChatModel("tiny-gpt", provider=OpenAIProvider(base_url=V1, api_key=KEY))
a = Agent(m, instructions="Be terse.", model_settings={"max_tokens": 12, "temperature": 0.7})
r = a.run_sync("What is a GPU?")
u = r.usage()
done(result={"output": r.output, "input_tokens": u.input_tokens, "output_tokens": u.output_tokens})
""",
        judge=_ok_text,
    ),
    dict(
        id="pydantic-ai-run-stream",
        venv="pydai",
        kind="claim",
        call="Agent.run_stream(...).stream_text(delta=True)",
        expect="200 stream; text pieces; [DONE]",
        src="""
from pydantic_ai import Agent
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider
m = OpenAIChatModel("tiny-gpt", provider=OpenAIProvider(base_url=V1, api_key=KEY))
a = Agent(m, model_settings={"max_tokens": 12})
async def main():
    async with a.run_stream("What is a GPU?") as r:
        parts = [t async for t in r.stream_text(delta=True)]
    return parts
done(result=asyncio.run(main()))
""",
        judge=lambda res, recs: (
            _ok_text(res, recs)[0] and "data: [DONE]" in recs[-1]["response"],
            _ok_text(res, recs)[1],
        ),
    ),
    dict(
        id="pydantic-ai-structured-output",
        venv="pydai",
        kind="refusal",
        call="Agent(output_type=PydanticModel).run_sync (tool call)",
        expect="400 naming tools; ModelHTTPError, not a hang",
        src="""
import pydantic
from pydantic_ai import Agent
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider
class Answer(pydantic.BaseModel):
    answer: str
m = OpenAIChatModel("tiny-gpt", provider=OpenAIProvider(base_url=V1, api_key=KEY))
r = Agent(m, output_type=Answer, model_settings={"max_tokens": 12}).run_sync("Hi")
done(result=r.output.model_dump())
""",
        judge=_refused("tools"),
    ),
    # ----------------------------------------------------------------- openai-agents
    dict(
        id="openai-agents-chat-model",
        venv="agents",
        kind="claim",
        call="Agent(model=OpenAIChatCompletionsModel(...)); Runner.run_sync",
        expect="200; final_output str",
        src="""
from openai import AsyncOpenAI
from agents import Agent, ModelSettings, OpenAIChatCompletionsModel, Runner, set_tracing_disabled
set_tracing_disabled(True)
m = OpenAIChatCompletionsModel(model="tiny-gpt", openai_client=AsyncOpenAI(base_url=V1, api_key=KEY, max_retries=0))
a = Agent(name="tiny", instructions="Be terse.", model=m, model_settings=ModelSettings(max_tokens=12))
done(result=Runner.run_sync(a, "What is a GPU?").final_output)
""",
        judge=_ok_text,
    ),
    dict(
        id="openai-agents-chat-streamed",
        venv="agents",
        kind="claim",
        call="Runner.run_streamed(agent).stream_events() (chat completions model)",
        expect="200 stream; final_output str",
        src="""
from openai import AsyncOpenAI
from agents import Agent, ModelSettings, OpenAIChatCompletionsModel, Runner, set_tracing_disabled
set_tracing_disabled(True)
m = OpenAIChatCompletionsModel(model="tiny-gpt", openai_client=AsyncOpenAI(base_url=V1, api_key=KEY, max_retries=0))
a = Agent(name="tiny", model=m, model_settings=ModelSettings(max_tokens=12))
async def main():
    r = Runner.run_streamed(a, "What is a GPU?")
    async for _ in r.stream_events():
        pass
    return r.final_output
done(result=asyncio.run(main()))
""",
        judge=_ok_text,
    ),
    dict(
        id="openai-agents-default-responses",
        venv="agents",
        kind="gap",
        call="set_default_openai_client(AsyncOpenAI(base_url)); Agent(model='tiny-gpt') (Responses API)",
        expect="Not claimed (/v1/responses): a clear 404 error object",
        src="""
from openai import AsyncOpenAI
from agents import Agent, Runner, set_default_openai_client, set_tracing_disabled
set_tracing_disabled(True)
set_default_openai_client(AsyncOpenAI(base_url=V1, api_key=KEY, max_retries=0), use_for_tracing=False)
done(result=Runner.run_sync(Agent(name="tiny", model="tiny-gpt"), "Hi").final_output)
""",
        judge=_gap,
    ),
]

SNIPPETS += [
    # ----------------------------------------------------------------- llama-index
    dict(
        id="llama-index-openailike-chat",
        venv="llama",
        kind="claim",
        call="OpenAILike(is_chat_model=True).chat([ChatMessage])",
        expect="200; ChatResponse text",
        src="""
from llama_index.core.llms import ChatMessage
from llama_index.llms.openai_like import OpenAILike
llm = OpenAILike(model="tiny-gpt", api_base=V1, api_key=KEY, is_chat_model=True,
                 max_tokens=12, context_window=128, max_retries=0)
done(result=llm.chat([ChatMessage(role="system", content="Be terse."),
                      ChatMessage(role="user", content="What is a GPU?")]).message.content)
""",
        judge=_ok_text,
    ),
    dict(
        id="llama-index-openailike-complete",
        venv="llama",
        kind="claim",
        call="OpenAILike(is_chat_model=False).complete / .stream_complete",
        expect="200 on /v1/completions; text; stream ends [DONE]",
        src="""
from llama_index.llms.openai_like import OpenAILike
llm = OpenAILike(model="tiny-gpt", api_base=V1, api_key=KEY, is_chat_model=False,
                 max_tokens=12, context_window=128, max_retries=0)
a = llm.complete("The GPU").text
b = "".join(r.delta for r in llm.stream_complete("The GPU"))
done(result=[a, b])
""",
        judge=_ok_text,
    ),
    dict(
        id="llama-index-openailike-astream-chat",
        venv="llama",
        kind="claim",
        call="OpenAILike(is_chat_model=True).astream_chat",
        expect="200 stream; text deltas",
        src="""
from llama_index.core.llms import ChatMessage
from llama_index.llms.openai_like import OpenAILike
llm = OpenAILike(model="tiny-gpt", api_base=V1, api_key=KEY, is_chat_model=True,
                 max_tokens=12, context_window=128, max_retries=0)
async def main():
    g = await llm.astream_chat([ChatMessage(role="user", content="Hi")])
    return "".join([r.delta async for r in g])
done(result=asyncio.run(main()))
""",
        judge=_ok_text,
    ),
    dict(
        id="llama-index-openai-class",
        venv="llama",
        kind="claim",
        call="llama_index.llms.openai.OpenAI(model='tiny-gpt', api_base=...).chat",
        expect="200 (or a client-side 'unknown model' error before any request)",
        src="""
from llama_index.core.llms import ChatMessage
from llama_index.llms.openai import OpenAI
llm = OpenAI(model="tiny-gpt", api_base=V1, api_key=KEY, max_tokens=12, max_retries=0)
done(result=llm.chat([ChatMessage(role="user", content="Hi")]).message.content)
""",
        judge=lambda res, recs: (
            _ok_text(res, recs)[0] or (not recs and "tiny-gpt" in res.get("error", "")),
            _ok_text(res, recs)[1],
        ),
    ),
    # ----------------------------------------------------------------- dspy (via litellm)
    dict(
        id="dspy-lm-call",
        venv="dspy",
        kind="claim",
        call='dspy.LM("openai/tiny-gpt", api_base=..., max_tokens=16, cache=False)("Hi")',
        expect="200; list with one completion",
        src="""
import dspy
lm = dspy.LM("openai/tiny-gpt", api_base=V1, api_key=KEY, max_tokens=16, cache=False,
             num_retries=0)
done(result=lm("What is a GPU?"))
""",
        judge=_ok_text,
    ),
    dict(
        id="dspy-lm-default-max-tokens",
        venv="dspy",
        kind="claim",
        call='dspy.LM("openai/tiny-gpt", api_base=...) with its default max_tokens',
        expect="no max_tokens sent: the answer runs to the end of the turn or the context (OpenAI's default)",
        src="""
import dspy
lm = dspy.LM("openai/tiny-gpt", api_base=V1, api_key=KEY, cache=False, num_retries=0)
done(result=lm("Hi"))
""",
        judge=_default_length,
    ),
    dict(
        id="dspy-predict",
        venv="dspy",
        kind="claim",
        call='dspy.Predict("question -> answer") (ChatAdapter, then its JSON fallback)',
        expect="200, or a clear 400: context_length_exceeded (DSPy's prompt) / response_format (its JSON fallback)",
        src="""
import dspy
lm = dspy.LM("openai/tiny-gpt", api_base=V1, api_key=KEY, max_tokens=32, cache=False,
             num_retries=0)
dspy.configure(lm=lm)
done(result=dspy.Predict("question -> answer")(question="What is a GPU?").answer)
""",
        judge=_served_or_context,
    ),
    dict(
        id="aisuite-chat",
        venv="aisuite",
        kind="claim",
        call='aisuite.Client({"openai": {base_url}}).chat.completions.create(model="openai:tiny-gpt")',
        expect="200; content",
        src="""
import aisuite
c = aisuite.Client({"openai": {"api_key": KEY, "base_url": V1}})
r = c.chat.completions.create(model="openai:tiny-gpt", max_tokens=12,
        messages=[{"role": "user", "content": "What is a GPU?"}])
done(result=r.choices[0].message.content)
""",
        judge=_ok_text,
    ),
    # ----------------------------------------------------------------- haystack
    dict(
        id="haystack-chat-generator-streaming",
        venv="haystack",
        kind="claim",
        call="OpenAIChatGenerator(streaming_callback=...).run (haystack 3 has no OpenAIGenerator)",
        expect="200 stream; chunks; usage in meta; the stream ends [DONE]",
        src="""
from haystack.components.generators.chat import OpenAIChatGenerator
from haystack.dataclasses import ChatMessage
from haystack.utils import Secret
pieces = []
g = OpenAIChatGenerator(api_key=Secret.from_token(KEY), model="tiny-gpt", api_base_url=V1,
                        generation_kwargs={"max_tokens": 12},
                        streaming_callback=lambda ch: pieces.append(ch.content))
r = g.run([ChatMessage.from_user("What is a GPU?")])
done(result={"text": r["replies"][0].text, "usage": r["replies"][0].meta.get("usage"),
             "pieces": len(pieces)})
""",
        judge=lambda res, recs: (
            _ok_text(res, recs)[0] and "data: [DONE]" in recs[-1]["response"],
            _ok_text(res, recs)[1],
        ),
    ),
    dict(
        id="haystack-openai-chat-generator",
        venv="haystack",
        kind="claim",
        call="OpenAIChatGenerator(api_base_url=...).run([ChatMessage.from_system, from_user])",
        expect="200; replies[0].text",
        src="""
from haystack.components.generators.chat import OpenAIChatGenerator
from haystack.dataclasses import ChatMessage
from haystack.utils import Secret
g = OpenAIChatGenerator(api_key=Secret.from_token(KEY), model="tiny-gpt", api_base_url=V1,
                        generation_kwargs={"max_tokens": 12})
r = g.run([ChatMessage.from_system("Be terse."), ChatMessage.from_user("What is a GPU?")])
done(result={"text": r["replies"][0].text, "meta": r["replies"][0].meta})
""",
        judge=_ok_text,
    ),
]

SNIPPETS += [
    # ----------------------------------------------------------------- defaults: no max_tokens
    dict(
        id="openai-chat-no-max-tokens",
        venv="openai",
        kind="claim",
        call="chat.completions.create(model, messages) with no max_tokens",
        expect="answer runs to the end of the turn or the context (OpenAI's default)",
        src="""
import openai
c = openai.OpenAI(base_url=V1, api_key=KEY, max_retries=0)
r = c.chat.completions.create(model="tiny-gpt", temperature=0,
        messages=[{"role": "user", "content": "Tell me about GPUs."}])
done(result=r.choices[0].message.content)
""",
        judge=_default_length,
    ),
    dict(
        id="pydantic-ai-default-settings",
        venv="pydai",
        kind="claim",
        call="Agent(OpenAIChatModel(...)).run_sync with no model_settings",
        expect="answer runs to the end of the turn or the context (OpenAI's default)",
        src="""
from pydantic_ai import Agent
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider
m = OpenAIChatModel("tiny-gpt", provider=OpenAIProvider(base_url=V1, api_key=KEY))
done(result=Agent(m).run_sync("Tell me about GPUs.").output)
""",
        judge=_default_length,
    ),
    dict(
        id="openai-agents-default-settings",
        venv="agents",
        kind="claim",
        call="Agent(model=OpenAIChatCompletionsModel(...)) with default ModelSettings",
        expect="answer runs to the end of the turn or the context (OpenAI's default)",
        src="""
from openai import AsyncOpenAI
from agents import Agent, OpenAIChatCompletionsModel, Runner, set_tracing_disabled
set_tracing_disabled(True)
m = OpenAIChatCompletionsModel(model="tiny-gpt", openai_client=AsyncOpenAI(base_url=V1, api_key=KEY, max_retries=0))
done(result=Runner.run_sync(Agent(name="tiny", model=m), "Tell me about GPUs.").final_output)
""",
        judge=_default_length,
    ),
]
