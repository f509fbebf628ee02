"""The engine the service had before Chapter 10's: static batches, no KV cache, right padding.

Kept as the baseline of ``benchmarks/bench_serving.py``. A batch is formed once and runs until
its longest request is done; every step recomputes every sequence from its first token. The GPT
has no padding mask, but its attention is causal, so *right* padding is harmless: the logits at a
row's last real position never look at the padding after it::

    eng = StaticEngine(model)
    eng.run([GenRequest(eng.encode("The GPU"), max_new_tokens=8)])

:class:`PaddedRunner` is the same computation as an executor of
:func:`labs.inference.batching.run_trace`, so the static and the continuous engine can be
replayed on the same trace.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import torch

from labs import data, gpt
from labs.inference.sampling import sample
from labs.serving.engine import GenRequest

__all__ = ["StaticEngine", "PaddedRunner", "padded_logits"]


@torch.no_grad()
def padded_logits(model: gpt.GPT, contexts: list[list[int]]) -> torch.Tensor:
    """Next-token logits of each context: list of id lists -> (B, vocab) float32, one padded
    forward pass over the whole of every sequence, on the model's device."""
    device, width = model.tok_emb.weight.device, max(len(c) for c in contexts)
    rows = [list(c) + [0] * (width - len(c)) for c in contexts]  # right padding, which causal
    logits = model(torch.tensor(rows, dtype=torch.long, device=device))  # attention never sees
    last = torch.tensor([len(c) - 1 for c in contexts], device=device)
    return logits[torch.arange(len(contexts), device=device), last].float()


class StaticEngine:
    """A model and a tokenizer, and :meth:`run`, which serves one static batch of requests
    (inputs and generators on the model's device)."""

    def __init__(self, model: gpt.GPT, tokenizer: data.CharTokenizer | None = None):
        self.model = model.eval()
        self.tokenizer = tokenizer or data.CharTokenizer()
        self.block_size = model.config.block_size
        self.forward_passes = 0

    def encode(self, text: str) -> torch.Tensor:
        return self.tokenizer.encode(text)

    def decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids)

    def run(self, requests: list[GenRequest]) -> list[GenRequest]:
        """Generate for every request together, one token per request per forward pass, until
        each has its ``max_new_tokens`` or is cancelled (greedy or seeded sampling)."""
        device = self.model.tok_emb.weight.device
        gens = [torch.Generator(device=device).manual_seed(r.seed or 0) for r in requests]
        seqs = [list(map(int, r.prompt)) for r in requests]
        while True:
            active = [
                i
                for i, r in enumerate(requests)
                if len(r.output) < r.max_new_tokens and not r.cancelled.is_set()
            ]
            if not active:
                for r in requests:
                    r.text = self.decode(r.output)
                return requests
            logits = padded_logits(self.model, [seqs[i][-self.block_size :] for i in active])
            self.forward_passes += 1
            for row, i in enumerate(active):
                r = requests[i]
                nxt = int(sample(logits[row : row + 1], r.temperature, generator=gens[i])[0])
                seqs[i].append(nxt)
                r.output.append(nxt)


class PaddedRunner:
    """Executor for :func:`~labs.inference.batching.run_trace`: every step recomputes every
    running sequence (prefill and decode alike) in one right-padded forward pass; greedy.
    Use it with ``Scheduler("static", ...)``. Returns the seconds the step took on ``clock``
    (the wall clock by default; :mod:`labs.serving.replay` explains ``time.thread_time``) and
    the tokens."""

    def __init__(self, model: gpt.GPT, clock: Callable[[], float] = time.perf_counter):
        self.model = model.eval()
        self.clock = clock

    def __call__(self, prefill, decode) -> tuple[float, list[int]]:
        t0 = self.clock()
        reqs = list(prefill) + list(decode)
        logits = padded_logits(self.model, [r.tokens for r in reqs])
        tokens = logits.argmax(-1).tolist()
        return self.clock() - t0, tokens
