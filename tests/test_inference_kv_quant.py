"""The int8 KV cache: error bounds, per-head scales, zero heads, torch cross-check, model quality."""

import pytest
import torch

from labs import gpt
from labs.inference.kv_cache import KVCache, forward_cached
from labs.inference.kv_quant import (
    QuantizedKVCache,
    dequantize_kv,
    kv_bytes_per_token,
    quantize_kv,
)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_error_is_at_most_half_a_step_per_head(dtype):
    x = torch.randn(5, 3, 4, 16, generator=torch.Generator().manual_seed(0))
    x[:, :, 0] *= 100  # one loud head
    x = x.to(dtype)
    q, s = quantize_kv(x)
    assert q.dtype == torch.int8 and s.shape == (5, 3, 4, 1)
    assert int(q.abs().max()) == 127
    err = (dequantize_kv(q, s) - x.float()).abs()
    assert bool((err <= s * (0.5 + 1e-5)).all())  # float rounding of x / s near a tie


def test_per_head_scales_keep_quiet_heads_and_zero_heads_are_exact():
    x = torch.randn(7, 2, 8, generator=torch.Generator().manual_seed(1))
    x[:, 0] *= 1000
    x[3, 1] = 0.0
    q, s = quantize_kv(x)
    out = dequantize_kv(q, s)
    assert torch.isfinite(out).all() and torch.equal(out[3, 1], torch.zeros(8))
    qt, st = quantize_kv(x, per="token")
    quiet = lambda y: (y[:, 1] - x[:, 1]).abs().max()  # noqa: E731
    assert quiet(out) * 50 < quiet(dequantize_kv(qt, st))


def test_matches_torch_per_channel_quantization():
    x = torch.randn(6, 4, 8, generator=torch.Generator().manual_seed(2))
    q, s = quantize_kv(x)
    flat = x.reshape(-1, 8)
    ref = torch.quantize_per_channel(
        flat, s.reshape(-1).double(), torch.zeros(flat.shape[0], dtype=torch.long), 0, torch.qint8
    )
    assert torch.equal(ref.int_repr().reshape(q.shape), q)


def test_bad_input_is_rejected():
    with pytest.raises(ValueError, match="float"):
        quantize_kv(torch.ones(3, 4, dtype=torch.long))
    with pytest.raises(ValueError, match="NaN"):
        quantize_kv(torch.tensor([[float("nan"), 1.0]]))
    with pytest.raises(ValueError, match="per"):
        quantize_kv(torch.ones(2, 2), per="tensor")


def test_quantized_cache_bytes_and_logits_close_to_fp32():
    model = gpt.GPT(gpt.GPTConfig(n_embd=32, n_head=4, n_layer=2, block_size=64)).eval()
    ids = torch.randint(0, 96, (2, 40), generator=torch.Generator().manual_seed(0))
    cache = QuantizedKVCache.for_model(model, batch=2, max_len=40)
    full = KVCache.for_model(model, batch=2, max_len=40)
    assert cache.nbytes() == 2 * 2 * 2 * 4 * 40 * (8 + 4)
    assert cache.nbytes() == kv_bytes_per_token(2, 4, 8, 1, 4) * 2 * 40
    with torch.no_grad():
        ref = forward_cached(model, ids[:, :30], full)
        got = forward_cached(model, ids[:, :30], cache)
        ref2 = forward_cached(model, ids[:, 30:], full)  # decode through the caches
        got2 = forward_cached(model, ids[:, 30:], cache)
    assert (got - ref).abs().max() < 0.05 * ref.abs().max()
    assert (got2 - ref2).abs().max() < 0.05 * ref2.abs().max()
    with pytest.raises(ValueError, match="max_len"):
        forward_cached(model, ids[:, :11], cache)
