"""Every generation path creates its tensors on the model's device, so it runs on a GPU unchanged.

There is no GPU here, so the test uses a second device that is always there: ``meta``. The
model is built on the CPU explicitly, then each runner is called under
``torch.set_default_device("meta")``. A tensor the runner creates without ``device=``
(``torch.tensor(ids)``, ``torch.arange(t)``, a cache's ``torch.zeros``) lands on ``meta``, where
it has no data: mixing it with the CPU model raises, ``.tolist()`` on it raises, and where PyTorch
lets it through silently (indexing a CPU tensor with a meta index) the result is wrong. So each
runner must both run and return exactly what it returns in a plain CPU run. That is what a CUDA
model needs too: every tensor on its device.

``torch.Generator()`` ignores the default device (it is always a CPU generator), so inside the
same block ``torch.Generator`` refuses to be made without ``device=``: a generator that samples
from a model's logits must live on the model's device, as PyTorch requires.

Tokenizers build ids on the CPU, as every tokenizer does, and the caller moves them
(``ids.to(device)``); the prompting tests pin the tokenizer to the CPU for that reason. Such a
move from the CPU to the model's device is the one thing a machine whose only real device is the
CPU cannot check.
"""

from __future__ import annotations

import contextlib

import pytest
import torch

from labs import gpt
from labs.inference.attention import convert_to_gqa
from labs.inference.batching import Request, Scheduler, make_trace, run_trace
from labs.inference.chunked_prefill import ChunkedModelRunner, ChunkedScheduler, run_chunked
from labs.inference.engine import ModelRunner
from labs.inference.int8 import quantize_model_int8
from labs.inference.kv_cache import KVCache, forward_cached, generate, stream
from labs.inference.kv_quant import QuantizedKVCache
from labs.inference.speculative import accept_reject, speculative_generate
from labs.prompting import constrained, evaluate
from labs.serving.engine import GenRequest, LLMEngine
from labs.serving.static import PaddedRunner, StaticEngine, padded_logits

CPU = torch.device("cpu")
PROMPT = [[5, 17, 42, 8, 3], [9, 9, 1, 60, 2]]


@contextlib.contextmanager
def default_device(device):
    """Tensors created without ``device=`` go to ``device`` inside; the old default after."""
    old = torch.get_default_device()
    torch.set_default_device(device)
    try:
        yield
    finally:
        torch.set_default_device(old)


@contextlib.contextmanager
def generators_need_a_device():
    """``torch.Generator()`` without ``device=`` raises inside (it would be a CPU generator)."""
    real = torch.Generator

    class Generator(real):  # a class, so that ``torch.Generator | None`` in lazy imports works
        def __new__(cls, device=None):
            if device is None:
                raise RuntimeError("torch.Generator() without device=: it would sample on the CPU")
            return real(device)

    torch.Generator = Generator
    try:
        yield
    finally:
        torch.Generator = real


def same_on_meta(run):
    """``run()`` under a meta default device returns what it returns normally."""
    want = run()
    with default_device("meta"), generators_need_a_device():
        got = run()
    assert torch.get_default_device() == CPU
    assert got == want
    return got


def as_list(t: torch.Tensor):
    assert t.device == CPU, f"result on {t.device}, expected the model's device (cpu)"
    return t.tolist()


def tiny(seed=0, block_size=48, n_embd=16):
    cfg = gpt.GPTConfig(block_size=block_size, n_layer=1, n_head=2, n_embd=n_embd, seed=seed)
    return gpt.GPT(cfg).to(CPU).eval()


@pytest.fixture(scope="module")
def model():
    return tiny()


def ids():
    return torch.tensor(PROMPT, device=CPU)


def test_the_trick_catches_a_missing_device(model):
    """A cache made without ``device=``: it runs on the CPU and fails under a meta default."""

    def cache_without_device():
        k = torch.zeros(1, 3, 16)  # the bug the test looks for
        return as_list(model.tok_emb.weight[:3] + k[0])

    cache_without_device()
    with default_device("meta"), pytest.raises(RuntimeError, match="not on the expected device"):
        cache_without_device()

    def index_without_device():  # silently wrong on meta instead of raising
        return as_list(model.tok_emb.weight[torch.tensor([3, 1])])

    with pytest.raises(AssertionError):
        same_on_meta(index_without_device)


@pytest.mark.parametrize("use_cache", [True, False])
def test_generate_and_stream(model, use_cache):
    same_on_meta(lambda: as_list(generate(model, ids(), 6, use_cache=use_cache)))
    gen = lambda: torch.Generator(device=CPU).manual_seed(0)  # noqa: E731
    same_on_meta(
        lambda: as_list(generate(model, ids(), 6, 0.9, 5, 0.9, gen(), use_cache=use_cache))
    )
    same_on_meta(lambda: [as_list(t) for t in stream(model, ids(), 4, use_cache=use_cache)])


@pytest.mark.parametrize("cache", [KVCache, QuantizedKVCache])
def test_caches_are_made_on_the_models_device(model, cache):
    def run():
        c = cache.for_model(model, batch=2, max_len=12)
        first = forward_cached(model, ids(), c)
        second = forward_cached(model, ids()[:, :1], c)
        return as_list(first), as_list(second)

    same_on_meta(run)


def test_gqa_and_int8_copies_stay_on_the_models_device(model):
    same_on_meta(lambda: as_list(generate(convert_to_gqa(model, 1), ids(), 5)))
    same_on_meta(lambda: as_list(generate(quantize_model_int8(model), ids(), 5)))


def test_gpt_generate(model):
    same_on_meta(lambda: as_list(model.generate(ids(), 5, temperature=0.0)))
    gen = lambda: torch.Generator(device=CPU).manual_seed(1)  # noqa: E731
    same_on_meta(lambda: as_list(model.generate(ids(), 5, 1.0, top_k=8, generator=gen())))


def trace(n=5):
    """Requests that all arrive at 0 s, so that the steps do not depend on measured times."""
    requests = make_trace(n, rate=1.0, prompt_len=(3, 9), mean_output=5, max_output=8, seed=3)
    for r in requests:
        r.arrival = 0.0
    return requests


@pytest.mark.parametrize("temperature", [0.0, 0.8])
def test_model_runner(model, temperature):
    def run():
        gen = torch.Generator(device=CPU).manual_seed(0)
        runner = ModelRunner(model, num_blocks=10, block_size=4, temperature=temperature,
                             generator=gen)  # fmt: skip
        requests = trace()
        run_trace(requests, Scheduler("continuous", 3, runner.manager), runner)
        return [r.generated for r in requests]

    same_on_meta(run)


def test_chunked_runner_with_prefix_caching(model):
    def run():
        runner = ChunkedModelRunner(model, num_blocks=24, block_size=4, prefix_caching=True)
        system = list(range(20, 31))  # a shared prefix of 11 tokens: two full blocks are reused
        requests = [Request(i, 0.0, system + [i, 2 * i], 4) for i in range(4)]
        run_chunked(requests, ChunkedScheduler(3, runner.manager, token_budget=6), runner)
        return [r.generated for r in requests], runner.manager.hits

    _, reused = same_on_meta(run)
    assert reused > 0, "no prefix was reused: the test does not reach the cached path"


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_speculative(model, temperature):
    draft = tiny(seed=1)

    def run():
        gen = torch.Generator(device=CPU).manual_seed(2)
        out, stats = speculative_generate(model, draft, ids()[:1], 8, gamma=3,
                                          temperature=temperature, generator=gen)  # fmt: skip
        return as_list(out), stats

    same_on_meta(run)
    p, q = torch.full((3, 4), 0.25, device=CPU), torch.eye(4, device=CPU)[[1, 2]]
    drafts = torch.tensor([1, 2], device=CPU)
    same_on_meta(lambda: accept_reject(p, q, drafts, torch.Generator(device=CPU).manual_seed(0)))
    same_on_meta(lambda: (torch.manual_seed(0), accept_reject(p, q, drafts))[1])  # global RNG


def test_serving_engines(model):
    def requests():
        return [GenRequest(PROMPT[0], 6, temperature=0.8, seed=1), GenRequest(PROMPT[1], 4)]

    def continuous():
        done = LLMEngine(model, max_batch=2).generate(requests())
        return [(r.output, r.finish_reason, r.error) for r in done]

    def static():
        done = StaticEngine(model).run(requests())
        return [(r.output, r.text) for r in done]

    def padded():
        reqs = trace()
        run_trace(reqs, Scheduler("static", 3, ModelRunner(model, 20, 4).manager),
                  PaddedRunner(model))  # fmt: skip
        return [r.generated for r in reqs]

    got = same_on_meta(continuous)
    assert all(reason == "length" for _, reason, _ in got)
    same_on_meta(static)
    same_on_meta(padded)
    same_on_meta(lambda: as_list(padded_logits(model, [PROMPT[0], PROMPT[1][:2]])))


@pytest.fixture
def cpu_tokenizers(monkeypatch):
    """The prompting modules' tokenizer builds its ids on the CPU (the runner moves them)."""
    for module in (evaluate, constrained):
        tok = module._TOK
        encode = type(tok).encode

        def on_cpu(text, encode=encode, tok=tok):
            with torch.device(CPU):
                return encode(tok, text)

        monkeypatch.setattr(tok, "encode", on_cpu)


def test_prompting(cpu_tokenizers):
    model = tiny(block_size=72)
    prompts = evaluate.make_eval_set(3, shots=2, seed=0)
    same_on_meta(lambda: evaluate.answers(model, prompts))
    same_on_meta(lambda: evaluate.self_consistency(model, prompts, samples=(1, 2), seed=0))
    same_on_meta(lambda: constrained.constrained_generate(model, "id: ", r"[0-9]{3}"))
    gen = lambda: torch.Generator(device=CPU).manual_seed(0)  # noqa: E731
    same_on_meta(
        lambda: constrained.constrained_generate(model, "id: ", r"[a-c]{4}", 8, 1.0, gen())
    )


def test_a_prompt_on_another_device_is_named(model):
    prompt = torch.tensor(PROMPT, device="meta")
    with pytest.raises(
        ValueError, match=r"prompt is on meta but the model on cpu.*idx.to\('cpu'\)"
    ):
        generate(model, prompt, 2)
    with pytest.raises(ValueError, match="prompt is on meta"):
        speculative_generate(model, model, prompt[:1], 2)
