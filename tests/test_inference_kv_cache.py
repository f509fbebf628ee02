"""KV cache, cached generation and grouped-query attention on the tiny GPT."""

import pytest
import torch

from labs import gpt
from labs.basics import memory
from labs.inference.attention import GQAttention, causal_attention, convert_to_gqa, mha_to_gqa
from labs.inference.kv_cache import KVCache, forward_cached, generate, stream

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def model():
    return gpt.GPT(gpt.GPTConfig(n_embd=32, n_head=4, block_size=64)).eval()


def test_cached_forward_matches_full_forward(model):
    idx = torch.randint(0, 96, (2, 30), generator=torch.Generator().manual_seed(0))
    cache = KVCache.for_model(model, batch=2)
    chunks = [forward_cached(model, idx[:, a:b], cache) for a, b in ((0, 17), (17, 18), (18, 30))]
    torch.testing.assert_close(torch.cat(chunks, 1), model(idx), atol=1e-5, rtol=1e-5)
    assert cache.length == 30


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_greedy_with_and_without_cache_identical(model, seed):
    prompt = torch.randint(0, 96, (2, 5), generator=torch.Generator().manual_seed(seed))
    a = generate(model, prompt, 40)
    assert torch.equal(a, generate(model, prompt, 40, use_cache=False))
    assert torch.equal(a, model.generate(prompt, 40, temperature=0.0))


def test_sampling_with_cache_repeats_with_seed(model):
    prompt = torch.zeros(1, 3, dtype=torch.long)
    run = [
        generate(
            model,
            prompt,
            20,
            0.9,
            top_p=0.9,
            generator=torch.Generator().manual_seed(3),
            use_cache=c,
        )
        for c in (True, False)
    ]
    assert torch.equal(*run)


def test_cache_bytes_match_formula(model):
    cfg = model.config
    cache = KVCache.for_model(model, batch=3, max_len=50)
    want = memory.kv_cache_bytes(cfg.n_layer, cfg.n_head, cfg.n_embd // cfg.n_head, 50, 3, "fp32")
    assert cache.nbytes() == want


def test_bad_prompts(model):
    with pytest.raises(ValueError, match="T >= 1"):
        generate(model, torch.zeros(1, 0, dtype=torch.long), 5)
    with pytest.raises(ValueError, match="60 tokens \\+ max_new_tokens=10 = 70 exceeds"):
        generate(model, torch.zeros(1, 60, dtype=torch.long), 10)
    with pytest.raises(ValueError, match="top_k"):
        generate(model, torch.zeros(1, 2, dtype=torch.long), 5, temperature=1.0, top_k=0)


def test_gqa_tied_heads_equal_mha():
    torch.manual_seed(0)
    attn = gpt.CausalSelfAttention(gpt.GPTConfig(n_embd=32, n_head=4))
    with torch.no_grad():  # tie heads in pairs: heads 0,1 share K/V, heads 2,3 share K/V
        for proj in (attn.k_proj, attn.v_proj):
            w = proj.weight.view(2, 2, 8, 32)
            w[:, 1] = w[:, 0]
            b = proj.bias.view(2, 2, 8)
            b[:, 1] = b[:, 0]
    gqa = mha_to_gqa(attn, n_kv_heads=2)
    x = torch.randn(2, 11, 32)
    torch.testing.assert_close(gqa(x), attn(x), atol=1e-6, rtol=1e-5)
    assert gqa.k_proj.out_features == 16


def test_gqa_kv_cache_sizes_and_cached_forward(model):
    idx = torch.randint(0, 96, (1, 20))
    sizes = {}
    for n_kv in (4, 2, 1):
        m = convert_to_gqa(model, n_kv)
        cache = KVCache.for_model(m, 1, 20)
        torch.testing.assert_close(forward_cached(m, idx, cache), m(idx), atol=1e-5, rtol=1e-5)
        sizes[n_kv] = cache.nbytes()
    assert sizes[4] == 2 * sizes[2] == 4 * sizes[1]


def test_causal_attention_offsets():
    q, k, v = torch.randn(1, 2, 3, 4), torch.randn(1, 1, 7, 4), torch.randn(1, 1, 7, 4)
    out = causal_attention(q, k, v, q_start=4)  # queries at positions 4, 5, 6
    for i in range(3):
        kk, vv = k[:, :, : 5 + i].expand(1, 2, -1, -1), v[:, :, : 5 + i].expand(1, 2, -1, -1)
        att = torch.softmax(q[:, :, i : i + 1] @ kk.transpose(-1, -2) / 2.0, -1) @ vv
        torch.testing.assert_close(out[:, :, i : i + 1], att, atol=1e-6, rtol=1e-5)


def test_gqa_rejects_bad_heads():
    with pytest.raises(ValueError, match="n_kv_heads=3"):
        GQAttention(32, 4, 3)


def test_stream_yields_what_generate_returns_and_stops(model):
    prompt = torch.randint(0, 96, (1, 4), generator=torch.Generator().manual_seed(4))
    streamed = torch.stack(list(stream(model, prompt, 15)), dim=1)
    assert torch.equal(streamed, generate(model, prompt, 15)[:, 4:])
    first = int(streamed[0, 0])
    out = generate(model, prompt, 15, stop_token=first)
    assert out.shape == (1, 5) and model.training is False
    with pytest.raises(ValueError, match="temperature"):
        stream(model, prompt, 5, temperature=-1)
