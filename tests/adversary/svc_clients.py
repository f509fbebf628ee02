"""Adversarial client run against the Chapter 6 service (``python -m labs.serving``).

Not a pytest module: it needs third-party clients that are no dependency of the book. Run it
from a throwaway virtual environment outside the repository that has ``httpx``, ``openai`` and
``tokenizers``; each other client lives in a venv of its own, named on the command line::

    python -m venv /tmp/advsvc-venv && /tmp/advsvc-venv/bin/pip install openai httpx tokenizers
    /tmp/advsvc-venv/bin/python tests/adversary/svc_clients.py \\
        --venv openai=/tmp/advsvc-venv/bin/python --venv pydai=/tmp/advsvc-pydai/bin/python ...

The client venvs of the recorded run (``svc_clients_record.json``), each made with
``python3.11 -m venv /tmp/advsvc-NAME && /tmp/advsvc-NAME/bin/pip install PKGS -c torch.txt``
(``torch.txt`` pins ``torch==2.13.0`` in case anything pulls it; nothing did): instructor
(``instructor openai``), pydai (``pydantic-ai-slim[openai]``), agents (``openai-agents``), llama
(``llama-index-llms-openai llama-index-llms-openai-like``), dspy (``dspy``), aisuite
(``aisuite[openai]``), haystack (``haystack-ai``); each row of the record names the versions.

It starts the service on 127.0.0.1 (a free port, the repository's ``.venv``), sends the raw
HTTP cases (``svc_raw_cases.py``), streaming/usage/seed/metrics checks, and each client snippet
(``svc_client_snippets.py``) through a recording proxy, stops the service by its PID, writes
every request body and answer to ``--out`` (JSON) and prints a Markdown table, failures first.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).parent))
from svc_client_snippets import SNIPPETS, _wrap  # noqa: E402
from svc_proxy import Recorder  # noqa: E402
from svc_raw_cases import CASES, HI, chat, comp, raw_http_cases, text_of  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
KEY = "adv-key"
AUTH = {"Authorization": f"Bearer {KEY}"}
PACKAGES = {
    "openai": ["openai"],
    "instructor": ["instructor", "openai"],
    "pydai": ["pydantic-ai-slim", "openai"],
    "agents": ["openai-agents", "openai"],
    "llama": ["llama-index-llms-openai-like", "llama-index-llms-openai", "openai"],
    "dspy": ["dspy", "litellm"],
    "aisuite": ["aisuite", "openai"],
    "haystack": ["haystack-ai", "openai"],
}
ORDER = {("FAIL", "high"): 0, ("FAIL", "medium"): 1, ("FAIL", "low"): 2, ("GAP", "gap"): 3}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Service:
    """``python -m labs.serving`` on a free loopback port; stopped by its PID."""

    def __init__(self, python: str, extra: list[str]):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = tempfile.NamedTemporaryFile("w+", suffix=".log", delete=False)
        env = os.environ | {"DLSYS_API_KEYS": KEY}
        self.proc = subprocess.Popen(
            [
                python,
                "-m",
                "labs.serving",
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--quiet",
                *extra,
            ],
            cwd=ROOT,
            env=env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )

    def wait_ready(self, timeout=600):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                raise RuntimeError(f"service exited {self.proc.returncode}: {self.tail()}")
            try:
                if httpx.get(self.url + "/health/ready", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(1)
        raise RuntimeError("service not ready: " + self.tail())

    def tail(self):
        self.log.flush()
        return Path(self.log.name).read_text()[-2000:]

    def stop(self):
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
        os.unlink(self.log.name)


def row(
    id, client, call, expect, passed, got_, sev="medium", request=None, response=None, kind="claim"
):
    verdict = "PASS" if passed else ("GAP" if kind == "gap" else "FAIL")
    return dict(
        id=id,
        client=client,
        call=call,
        expect=expect,
        got=got_,
        verdict=verdict,
        severity="gap" if kind == "gap" else sev,
        request=request,
        response=response,
    )


def sse(url, path, body, cancel_after=None):
    """(status, events, lines) of one streamed request; events are the parsed `data:` JSONs."""
    lines = []
    with httpx.stream("POST", url + path, json=body, headers=AUTH, timeout=120) as r:
        for ln in r.iter_lines():
            lines.append(ln)
            if cancel_after is not None and len([x for x in lines if x]) >= cancel_after:
                break
        if r.status_code != 200:
            r.read()
    data = [ln[6:] for ln in lines if ln.startswith("data: ")]
    events = [json.loads(d) for d in data if d != "[DONE]"]
    return r.status_code, events, [ln for ln in lines if ln]


def metric(url, name):
    for ln in httpx.get(url + "/metrics", timeout=10).text.splitlines():
        if ln.startswith(name + " ") or ln.startswith(name + "{"):
            return float(ln.rsplit(" ", 1)[1])
    return None


def field_cases(url):
    out = []
    for id, path, body, expect, judge, sev in CASES:
        r = httpx.post(url + path, json=body, headers=AUTH, timeout=120)
        passed, g = judge(r)
        out.append(
            row(
                id,
                "httpx " + httpx.__version__,
                f"POST {path}",
                expect,
                passed,
                g,
                sev,
                body if len(json.dumps(body)) < 800 else "(long)",
                r.text[:600],
            )
        )
    for c in raw_http_cases(url, AUTH):
        r = httpx.request(
            c["method"],
            url + c["path"],
            headers=c["headers"],
            content=c.get("content"),
            timeout=120,
        )
        passed, g = c["judge"](r)
        kind = "gap" if c["sev"] == "gap" else "claim"
        out.append(
            row(
                c["id"],
                "httpx " + httpx.__version__,
                f"{c['method']} {c['path']}",
                c["expect"],
                passed,
                g,
                c["sev"],
                {"headers": sorted(c["headers"])},
                r.text[:400],
                kind,
            )
        )
    return out


def stream_cases(url):
    out, client = [], "httpx " + httpx.__version__
    st, ev, lines = sse(
        url,
        "/v1/chat/completions",
        chat(max_tokens=6, stream=True, stream_options={"include_usage": True}),
    )
    content = "".join(e["choices"][0]["delta"].get("content") or "" for e in ev if e["choices"])
    checks = {
        "ends with data: [DONE]": lines[-1] == "data: [DONE]",
        "first delta has role assistant": ev[0]["choices"][0]["delta"].get("role") == "assistant",
        "one id, object chat.completion.chunk": len({e["id"] for e in ev}) == 1
        and all(e["object"] == "chat.completion.chunk" for e in ev),
        "last chunk: choices [] + usage": ev[-1]["choices"] == [] and bool(ev[-1].get("usage")),
        "other chunks: usage null": all("usage" in e and e["usage"] is None for e in ev[:-1]),
        "completion_tokens = streamed characters": ev[-1]["usage"]["completion_tokens"]
        == len(content),
    }
    out.append(
        row(
            "stream-chat-include-usage",
            client,
            "POST /v1/chat/completions stream",
            "chunks per ChatCompletionStreamOptions; usage chunk; [DONE]",
            all(checks.values()),
            f"{st} " + "; ".join(f"{k}: {'ok' if v else 'NO'}" for k, v in checks.items()),
            "high",
            response=lines[-3:],
        )
    )
    st, ev, lines = sse(
        url,
        "/v1/completions",
        comp(
            prompt="The GPU",
            max_tokens=30,
            stop=["in"],
            temperature=0,
            stream=True,
            stream_options={"include_usage": True},
        ),
    )
    fin = [e["choices"][0]["finish_reason"] for e in ev if e["choices"]][-1]
    out.append(
        row(
            "stream-completions-stop",
            client,
            "POST /v1/completions stream stop=['in']",
            "finish_reason stop, usage chunk, [DONE]",
            fin == "stop" and lines[-1] == "data: [DONE]" and ev[-1]["usage"] is not None,
            f"{st} finish={fin} last={lines[-1]!r} usage={ev[-1].get('usage')}",
            "high",
        )
    )
    for so in ({"include_usage": False}, {}, None):
        st, ev, lines = sse(
            url, "/v1/chat/completions", chat(max_tokens=3, stream=True, stream_options=so)
        )
        out.append(
            row(
                f"stream-options-{json.dumps(so)}",
                client,
                "chat stream",
                "no usage chunk; [DONE]",
                lines[-1] == "data: [DONE]" and all(e["choices"] for e in ev),
                f"{st} last={lines[-1]!r} chunks={len(ev)}",
                "medium",
            )
        )
    before = metric(url, "llm_cancelled_requests_total") or 0.0
    sse(url, "/v1/chat/completions", chat(max_tokens=100, stream=True), cancel_after=3)
    after = before
    for _ in range(40):
        after = metric(url, "llm_cancelled_requests_total") or 0.0
        if after > before:
            break
        time.sleep(0.25)
    r = httpx.post(url + "/v1/completions", json=comp(), headers=AUTH, timeout=60)
    out.append(
        row(
            "stream-client-disconnect",
            client,
            "close a chat stream after 3 events",
            "request cancelled (counter +1); the next request 200",
            after > before and r.status_code == 200,
            f"cancelled {before:.0f}->{after:.0f}; next {r.status_code}",
            "medium",
        )
    )
    return out


def usage_cases(url, service_python, tok):
    out, client = [], "httpx + tokenizers (labs-export-tokenizer)"
    if tok is None:
        return [row("usage", client, "-", "-", True, "skipped: no tokenizers module", "low")]

    def n(s):
        return len(tok.encode(s).ids)

    b = httpx.post(
        url + "/v1/completions",
        json=comp(prompt="The GPU is a", max_tokens=10),
        headers=AUTH,
        timeout=60,
    ).json()
    u, text = b["usage"], text_of(b)
    okk = (
        u["prompt_tokens"] == n("The GPU is a")
        and u["completion_tokens"] == n(text)
        and u["total_tokens"] == u["prompt_tokens"] + u["completion_tokens"]
    )
    out.append(
        row(
            "usage-completions",
            client,
            "POST /v1/completions",
            "prompt/completion tokens = the exported tokenizer's counts",
            okk,
            f"usage={u} tokenizer: prompt {n('The GPU is a')}, text {n(text)}",
            "high",
        )
    )
    msgs = [
        {"role": "system", "content": "Be terse."},
        {"role": "user", "content": "What is"},
        {"role": "assistant", "content": "A chip."},
        {"role": "user", "content": "Why?"},
    ]
    tmpl = subprocess.run(
        [
            service_python,
            "-c",
            "import json,sys; from labs.serving.chat import "
            "chat_prompt; print(json.dumps(chat_prompt(json.load(sys.stdin))))",
        ],
        input=json.dumps(msgs),
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    prompt = json.loads(tmpl.stdout)
    b = httpx.post(
        url + "/v1/chat/completions",
        json=chat(messages=msgs, max_tokens=8),
        headers=AUTH,
        timeout=60,
    ).json()
    okk = b["usage"]["prompt_tokens"] == n(prompt)
    out.append(
        row(
            "usage-chat",
            client,
            "POST /v1/chat/completions (4 messages)",
            "prompt_tokens = tokens of the chat template the chapter describes",
            okk,
            f"usage={b['usage']} template tokens {n(prompt)}",
            "high",
        )
    )
    body = chat(messages=msgs, max_tokens=8, seed=11, temperature=1.0)
    plain = httpx.post(url + "/v1/chat/completions", json=body, headers=AUTH, timeout=60).json()
    _, ev, _ = sse(
        url,
        "/v1/chat/completions",
        body | {"stream": True, "stream_options": {"include_usage": True}},
    )
    streamed = "".join(e["choices"][0]["delta"].get("content") or "" for e in ev if e["choices"])
    okk = ev[-1]["usage"] == plain["usage"] and streamed == text_of(plain)
    out.append(
        row(
            "usage-stream-equals-plain",
            client,
            "same seed, stream and not",
            "same text, same usage",
            okk,
            f"plain {text_of(plain)!r} {plain['usage']}; stream {streamed!r} {ev[-1]['usage']}",
            "medium",
        )
    )
    return out


def seed_cases(url):
    out, client = [], "httpx " + httpx.__version__

    def text(**kw):
        b = comp(prompt="The GPU", max_tokens=24, temperature=1.0) | kw
        return text_of(httpx.post(url + "/v1/completions", json=b, headers=AUTH, timeout=60).json())

    a, b = text(temperature=0), text(temperature=0)
    out.append(
        row(
            "temperature-0-greedy",
            client,
            "temperature 0, twice",
            "same text",
            a == b,
            f"{a!r} / {b!r}",
            "high",
        )
    )
    a, b = text(seed=7), text(seed=7)
    out.append(
        row(
            "seed-repeat",
            client,
            "seed 7, twice",
            "same text (best effort)",
            a == b,
            f"{a!r} / {b!r}",
            "medium",
        )
    )
    pairs = [(0, 2**32), (-1, 2**63 - 1)]
    same = [(x, y) for x, y in pairs if text(seed=x) == text(seed=y)]
    out.append(
        row(
            "seed-int64-distinct",
            client,
            "seeds 0 vs 2**32, -1 vs 2**63-1",
            "seed is int64: distinct seeds, distinct samples",
            not same,
            f"identical text for seeds {same}" if same else "distinct",
            "low",
        )
    )
    return out


def template(service_python, msgs):
    """The service's chat template applied to ``msgs`` (run in the service's environment)."""
    out = subprocess.run(
        [
            service_python,
            "-c",
            "import json,sys; from labs.serving.chat import "
            "chat_prompt; print(json.dumps(chat_prompt(json.load(sys.stdin))))",
        ],
        input=json.dumps(msgs),
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    return json.loads(out.stdout)


def template_cases(url, service_python):
    """What the chat template does with fields OpenAI documents for messages."""
    out, client = [], "httpx " + httpx.__version__

    def post(msgs, **kw):
        return httpx.post(
            url + "/v1/chat/completions", json=chat(messages=msgs, **kw), headers=AUTH, timeout=60
        )

    named = [
        {"role": "user", "content": "Hi", "name": "alice"},
        {"role": "user", "content": "Yo", "name": "bob"},
    ]
    a = post(named, seed=1)
    b = post([{k: v for k, v in m.items() if k != "name"} for m in named], seed=1)
    dropped = a.json()["usage"] == b.json()["usage"] and text_of(a.json()) == text_of(b.json())
    warned = "name" in (a.headers.get("warning") or "")
    out.append(
        row(
            "chat-message-name",
            client,
            "two user messages named alice and bob",
            "name tells participants apart: used in the prompt, or named in the "
            "documented Warning header",
            not dropped or warned,
            f"prompt and text identical to the unnamed request: {dropped}; "
            f"Warning: {a.headers.get('warning')}",
            "low",
        )
    )
    r = post(HI, temperature=0, max_tokens=8).json()
    content = text_of(r)
    again = post(
        [*HI, {"role": "assistant", "content": content}, {"role": "user", "content": "Yo"}],
        max_tokens=1,
    ).json()
    # the generation prompt is the template's (``chat_prompt([])``: "Assistant:" then, since the
    # fix, "Assistant: " with the separator), not a constant of this script
    expected_prompt = (
        len("User: Hi\nAssistant: ")
        + len(content.lstrip(" "))
        + len("\nUser: Yo\n")
        + len(template(service_python, []))
    )
    out.append(
        row(
            "chat-content-leading-space",
            client,
            "reply content, then sent back as the assistant turn",
            "content is the reply alone (no template separator); a round trip renders "
            "'Assistant: <reply>' as in training",
            not content.startswith(" ") and again["usage"]["prompt_tokens"] == expected_prompt,
            f"content={content!r}; round-trip prompt_tokens "
            f"{again['usage']['prompt_tokens']} vs {expected_prompt}",
            "low",
        )
    )
    return out


def metrics_cases(url):
    client = "httpx " + httpx.__version__
    text = httpx.get(url + "/metrics", timeout=10).text
    typed = "# TYPE llm_kv_cache_usage_perc gauge" in text
    seen, stop = [], threading.Event()

    def poll():
        while not stop.is_set():
            seen.append(metric(url, "llm_kv_cache_usage_perc"))
            time.sleep(0.05)

    threads = [
        threading.Thread(
            target=sse, args=(url, "/v1/completions", comp(max_tokens=100, stream=True))
        )
        for _ in range(8)
    ]
    p = threading.Thread(target=poll)
    p.start()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    time.sleep(0.5)
    stop.set()
    p.join()
    after = metric(url, "llm_kv_cache_usage_perc")
    peak = max(v for v in seen if v is not None)
    return [
        row(
            "metrics-kv-gauge",
            client,
            "GET /metrics during 8 streams",
            "llm_kv_cache_usage_perc typed gauge, in (0, 1] under load, 0 after",
            typed and 0 < peak <= 1 and after == 0,
            f"typed={typed} peak={peak:.3f} after={after}",
            "medium",
        )
    ]


def version_of(python, pkgs):
    code = (
        "import importlib.metadata as m, sys\nfor p in sys.argv[1:]:\n try: print(p, m.version(p))"
        "\n except Exception: pass"
    )
    r = subprocess.run([python, "-c", code, *pkgs], capture_output=True, text=True, timeout=60)
    return ", ".join(r.stdout.split("\n")).strip(", ")


def client_cases(url, venvs):
    out = []
    with Recorder(url) as proxy:
        for s in SNIPPETS:
            py = venvs.get(s["venv"])
            if py is None:
                continue
            proxy.tag = s["id"]
            env = os.environ | {
                "ADV_BASE": proxy.url,
                "ADV_KEY": KEY,
                "OPENAI_API_KEY": KEY,
                "OPENAI_AGENTS_DISABLE_TRACING": "1",
                "DSPY_CACHEDIR": tempfile.gettempdir() + "/advsvc-dspy-cache",
            }
            try:
                p = subprocess.run(
                    [py, "-c", _wrap(s["src"])],
                    capture_output=True,
                    text=True,
                    env=env,
                    timeout=240,
                    cwd=tempfile.gettempdir(),
                )
                line = [ln for ln in p.stdout.splitlines() if ln.startswith("ADV_RESULT ")]
                res = (
                    json.loads(line[-1][11:])
                    if line
                    else {"error": "no result: " + (p.stderr or p.stdout)[-600:]}
                )
            except subprocess.TimeoutExpired:
                res = {"error": "TIMEOUT after 240 s (hang)"}
            recs = proxy.take(s["id"])
            passed, g = s["judge"](res, recs)
            out.append(
                row(
                    s["id"],
                    version_of(py, PACKAGES[s["venv"]]),
                    s["call"],
                    s["expect"],
                    passed,
                    g,
                    s.get("sev", "high" if s["kind"] == "claim" else "medium"),
                    [{k: r.get(k) for k in ("method", "path", "body")} for r in recs],
                    [{k: r.get(k) for k in ("status", "warning", "response")} for r in recs],
                    s["kind"],
                )
            )
            print(f"  {out[-1]['verdict']:4} {s['id']}: {g[:120]}", file=sys.stderr)
    return out


def table(rows):
    rows = sorted(rows, key=lambda r: ORDER.get((r["verdict"], r["severity"]), 9))
    lines = [
        "| # | verdict | sev | case | client / version | call | expected (OpenAI ref) | got |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for i, r in enumerate(rows, 1):
        cells = [
            str(i),
            r["verdict"],
            r["severity"],
            r["id"],
            r["client"],
            r["call"],
            r["expect"],
            r["got"],
        ]
        lines.append(
            "| "
            + " | ".join(str(c).replace("|", "\\|").replace("\n", "\\n")[:240] for c in cells)
            + " |"
        )
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--service-python", default=str(ROOT / ".venv/bin/python"))
    ap.add_argument(
        "--venv",
        action="append",
        default=[],
        metavar="NAME=PYTHON",
        help=f"a client venv's python; NAME in {sorted(PACKAGES)}",
    )
    ap.add_argument("--out", default=str(Path(__file__).with_name("svc_clients_record.json")))
    ap.add_argument("--only", choices=["fields", "clients"], default=None)
    a = ap.parse_args()
    venvs = dict(v.split("=", 1) for v in a.venv)
    tok = None
    try:
        from tokenizers import Tokenizer

        d = tempfile.mkdtemp(prefix="advsvc-tok-")
        exporter = str(Path(a.service_python).with_name("labs-export-tokenizer"))
        subprocess.run([exporter, d], check=True, capture_output=True, timeout=120)
        tok = Tokenizer.from_file(d + "/tokenizer.json")
    except ImportError:
        pass
    svc = Service(a.service_python, ["--limiter", "none"])
    rows = []
    try:
        svc.wait_ready()
        if a.only != "clients":
            rows += field_cases(svc.url) + stream_cases(svc.url) + seed_cases(svc.url)
            rows += usage_cases(svc.url, a.service_python, tok) + metrics_cases(svc.url)
            rows += template_cases(svc.url, a.service_python)
        if a.only != "fields":
            rows += client_cases(svc.url, venvs)
        rows.append(
            row(
                "service-alive",
                "-",
                "GET /health/live after all cases",
                "200",
                httpx.get(svc.url + "/health/live", timeout=10).status_code == 200,
                "alive",
                "high",
            )
        )
    finally:
        svc.stop()
    Path(a.out).write_text(json.dumps(rows, indent=1, default=str) + "\n")
    print(table(rows))
    fails = [r for r in rows if r["verdict"] == "FAIL"]
    print(f"\n{len(rows) - len(fails)} passed, {len(fails)} failed")


if __name__ == "__main__":
    main()
