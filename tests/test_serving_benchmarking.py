"""What benchmark tools need from the service: its tokenizer as a Hugging Face directory, and
the KV-cache usage gauge of /metrics beside the running and waiting counts."""

import json
import math
import subprocess
import threading
import time

import pytest
from fastapi.testclient import TestClient
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import script
from labs import data, gpt
from labs.serving import chat, hf_tokenizer, metrics
from labs.serving.app import create_app
from labs.serving.engine import LLMEngine
from labs.serving.hf_tokenizer import build_tokenizer, export_tokenizer

KEY = "test-key-123"
H = {"Authorization": f"Bearer {KEY}"}
CHARS = data.CharTokenizer().chars


@settings(max_examples=200, deadline=None)
@given(text=st.text(alphabet=CHARS, max_size=200))
def test_the_tokenizers_tokenizer_encodes_and_decodes_as_the_service(text):
    ours, theirs = data.CharTokenizer(), build_tokenizer()
    enc = theirs.encode(text)
    assert enc.ids == ours.encode(text).tolist()  # no special tokens added, nothing normalised
    assert theirs.decode(enc.ids) == text == ours.decode(enc.ids)


def test_the_corpus_and_a_character_outside_the_vocabulary():
    text = data.load_corpus()
    tok = build_tokenizer()
    assert tok.encode(text).ids == data.CharTokenizer().encode(text).tolist()
    with pytest.raises(Exception, match="UNK|unk|vocabulary"):
        tok.encode("caf\u00e9")  # refused, as the service refuses it, never a made-up id
    with pytest.raises(ValueError):
        data.CharTokenizer().encode("caf\u00e9")


def test_transformers_loads_the_directory_offline(tmp_path, monkeypatch):
    transformers = pytest.importorskip("transformers")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    out = export_tokenizer(tmp_path / "tok", context_length=96)
    assert sorted(p.name for p in out.iterdir()) == [
        "special_tokens_map.json", "tokenizer.json", "tokenizer_config.json",
    ]  # fmt: skip
    tok = transformers.AutoTokenizer.from_pretrained(str(out))
    text = "Hello,  world!\n  (a+b) * c ~ `x`  \n\n"
    ids = tok.encode(text)
    assert ids == data.CharTokenizer().encode(text).tolist() and tok.decode(ids) == text
    assert len(tok) == len(CHARS) and tok.model_max_length == 96
    conversations = [
        [{"role": "user", "content": "Hi"}],
        [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},
         {"role": "assistant", "content": "Yo"}, {"role": "user", "content": "GPU?"}],
        [{"role": "developer", "content": "Terse."},
         {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}],
        [{"role": "system", "content": "S", "name": "cfg"}, {"role": "user", "content": "Hi", "name": "ann"},
         {"role": "assistant", "content": "Yo", "name": "bot"}, {"role": "user", "content": "?"}],
    ]  # fmt: skip
    for messages in conversations:  # its chat template is the service's
        rendered = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        assert rendered == chat.chat_prompt(messages), messages


def test_the_console_script_writes_the_directory(tmp_path, capsys):
    out = tmp_path / "tok"
    r = subprocess.run([script("labs-export-tokenizer"), str(out)], capture_output=True, text=True)
    assert r.returncode == 0 and str(out) in r.stderr, r.stderr
    config = json.loads((out / "tokenizer_config.json").read_text())
    assert config["clean_up_tokenization_spaces"] is False and config["model_max_length"] == 128
    with pytest.raises(SystemExit) as stop:  # python -m labs.serving.hf_tokenizer is this main
        hf_tokenizer.main([str(out), "--context-length", "0"])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and err.count("\n") == 1 and "--context-length" in err


class SteppedEngine(LLMEngine):
    """The engine, one step per permit (until ``free_run()``): a test reads /metrics at known
    points."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.permits, self.free = threading.Semaphore(0), threading.Event()

    def step(self) -> None:
        if not self.free.is_set():
            self.permits.acquire()
        super().step()

    def free_run(self) -> None:
        self.free.set()
        self.permits.release()  # the engine thread may wait for a permit right now


def wait_for(condition, what: str) -> None:
    deadline = time.monotonic() + 60
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


def test_the_kv_cache_gauge_moves_under_load_and_returns_to_zero():
    eng = SteppedEngine(gpt.GPT(gpt.GPTConfig(block_size=128, n_layer=1)), max_batch=2)
    app = create_app(eng, [KEY], limiter=None)
    block, total = eng.cache.manager.block_size, eng.cache.manager.num_blocks
    prompts = ["x" * 5, "y" * 20, "z" * 40]  # 1, 2 and 3 blocks; the third waits for a slot
    with TestClient(app) as c:

        def gauges() -> dict:
            parsed = metrics.parse_metrics(c.get("/metrics").text)
            return {k: parsed[k][0][1] for k in ("llm_kv_cache_usage_perc", "llm_queue_depth",
                                                 "llm_active_generations")}  # fmt: skip

        def send(p):
            c.post("/v1/completions", json={"prompt": p, "max_tokens": 20}, headers=H)

        threads = [threading.Thread(target=send, args=(p,), daemon=True) for p in prompts]
        try:
            for i, t in enumerate(threads):  # one at a time: they join the engine in this order
                t.start()
                wait_for(lambda i=i: eng.depth == i + 1, f"{i + 1} waiting requests")
            assert gauges() == {"llm_kv_cache_usage_perc": 0.0, "llm_queue_depth": 3,
                                "llm_active_generations": 0}  # fmt: skip
            readings = []
            for k in range(1, 19):  # the cache holds the prompt and every token but the newest
                eng.permits.release()
                wait_for(lambda k=k: eng.steps == k, f"step {k}")
                n_tokens = [len(p) + k - 1 for p in prompts[:2]]
                want = sum(math.ceil(n / block) for n in n_tokens) / total
                g = gauges()
                assert g["llm_kv_cache_usage_perc"] == pytest.approx(want), k
                assert (g["llm_active_generations"], g["llm_queue_depth"]) == (2, 1)
                readings.append(g["llm_kv_cache_usage_perc"])
            assert readings[-1] > readings[0] > 0  # it moves as sequences cross block boundaries
        finally:
            eng.free_run()
            for t in threads:
                t.join(60)
        assert gauges() == {"llm_kv_cache_usage_perc": 0.0, "llm_queue_depth": 0,
                            "llm_active_generations": 0}  # fmt: skip
