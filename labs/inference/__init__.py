"""LLM inference on the tiny GPT (Chapter 10): one module per idea.

* :mod:`~labs.inference.sampling` -- greedy, temperature, top-k, top-p sampling.
* :mod:`~labs.inference.attention` -- MHA / MQA / GQA with ``n_kv_heads``.
* :mod:`~labs.inference.kv_cache` -- the KV cache, a cached forward pass and ``generate``.
* :mod:`~labs.inference.paged` -- the paged KV cache: block manager and paged attention.
* :mod:`~labs.inference.batching` -- static and continuous batching: scheduler, engine, simulator.
* :mod:`~labs.inference.speculative` -- speculative decoding with a draft model.
* :mod:`~labs.inference.int8` -- int8 weight-only quantization of the linear layers.
* :mod:`~labs.inference.prefix_cache` -- prefix caching: full blocks found by chained hashes.
* :mod:`~labs.inference.chunked_prefill` -- chunked prefill under a per-step token budget.
* :mod:`~labs.inference.kv_quant` -- an int8 KV cache with one scale per token and head.
"""

from labs.inference.kv_cache import KVCache, forward_cached, generate, stream
from labs.inference.sampling import check_sampling_params, sample, sampling_probs

__all__ = [
    "KVCache",
    "forward_cached",
    "generate",
    "stream",
    "check_sampling_params",
    "sample",
    "sampling_probs",
]
