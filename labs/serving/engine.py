"""The service's engine: Chapter 10's continuous-batching scheduler over the paged KV cache.

One engine in the house. :class:`LLMEngine` drives :class:`labs.inference.batching.Scheduler`
and :func:`labs.inference.engine.paged_forward` one step at a time: every step, finished and
cancelled requests leave the running batch, waiting ones join as soon as a slot and KV blocks
are free, new requests are prefilled and all running ones decode one token in one batched
forward pass. Each request has its own sampling settings and seeded generator, and a request
whose step fails is removed with its own error while the others go on::

    eng = LLMEngine(checkpoint.train_tiny(150), max_batch=8)   # labs.serving.checkpoint
    req = GenRequest(eng.encode("The GPU"), max_new_tokens=8, temperature=0.7, seed=1)
    eng.generate([req])                   # in this thread; the server runs eng.start() instead
    req.text, req.finish_reason           # 'is a ...', 'length'
"""

from __future__ import annotations

import itertools
import math
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

import torch

from labs import data
from labs.inference.batching import Request, Scheduler
from labs.inference.engine import paged_forward
from labs.inference.kv_cache import kv_heads
from labs.inference.paged import PagedKVCache
from labs.inference.sampling import sample
from labs.serving.batcher import Overloaded  # the waiting queue is full: the server answers 503
from labs.serving.seeding import request_generator
from labs.serving.stopping import stop_strings, visible_text

__all__ = ["GREEDY_BELOW", "GenRequest", "Overloaded", "LLMEngine"]

GREEDY_BELOW = 1e-5  # temperatures below this decode greedily (as vLLM does): 1/T would overflow


@dataclass
class GenRequest:
    """One generation request as the engine sees it.

    Attributes:
        prompt: token ids, (T,) int64 tensor or list, T >= 1.
        max_new_tokens: most tokens to generate.
        temperature: 0 (or below :data:`GREEDY_BELOW`) for greedy decoding, else the softmax
            temperature; ``top_p``: nucleus sampling mass in [0, 1] (0: only the most likely
            token, greedy decoding).
        seed: any int64, the seed of this request's own generator (None: a fresh random seed;
            see :func:`labs.serving.seeding.request_generator`).
        stop: strings that end the completion; the text returned stops before the first one.
        eos: the model's end-of-sequence strings (the chat template's end of turn); they end the
            completion like ``stop`` unless ``ignore_eos``. ``min_tokens``: neither ends it
            before this many tokens (vLLM's meaning; see :mod:`labs.serving.stopping`).
        on_text: called from the engine thread with each new piece of text (held back while it
            could be the start of a stop string); ``on_finish(req)`` once at the end.
        cancelled: set it from any thread to stop the request at the next step.
        output, text, finish_reason, error: filled in by the engine. ``finish_reason`` is
            ``"stop"``, ``"length"``, ``"cancelled"`` or ``"error"`` (then ``error`` says why).
    """

    prompt: torch.Tensor | list[int]
    max_new_tokens: int
    temperature: float = 0.0
    top_p: float = 1.0
    seed: int | None = 0
    stop: tuple[str, ...] = ()
    eos: tuple[str, ...] = ()
    ignore_eos: bool = False
    min_tokens: int = 0
    on_text: Callable[[str], None] | None = None
    on_finish: Callable[[GenRequest], None] | None = None
    cancelled: threading.Event = field(default_factory=threading.Event)
    output: list[int] = field(default_factory=list)
    text: str = ""
    finish_reason: str | None = None
    error: str | None = None
    sent: int = 0  # characters of text handed to on_text so far


class LLMEngine:
    """Continuous batching over a paged KV cache, with per-request sampling and error isolation.

    Args:
        model: a :class:`labs.gpt.GPT`; its ``block_size`` is the context length (prompt plus
            generated tokens) in tokens.
        max_batch: most requests decoding together.
        max_waiting: most requests waiting to join; one more raises :class:`Overloaded`.
        kv_block_size: tokens per KV block; ``kv_blocks``: blocks in the pool (default: enough
            for ``max_batch`` requests of full context, so nothing is ever preempted).

    The cache, the inputs and each request's generator live on the model's device.
    """

    def __init__(self, model, tokenizer=None, *, max_batch=16, max_waiting=64, kv_block_size=16,
                 kv_blocks=None):  # fmt: skip
        if max_batch < 1 or max_waiting < 1:
            raise ValueError(f"LLMEngine: need max_batch, max_waiting >= 1, got {max_batch}, "
                             f"{max_waiting}")  # fmt: skip
        cfg, w = model.config, model.tok_emb.weight
        self.model, self.tokenizer = model.eval(), tokenizer or data.CharTokenizer()
        self.context_length, self.max_waiting, self.device = cfg.block_size, max_waiting, w.device
        kv_blocks = kv_blocks or max_batch * math.ceil(cfg.block_size / kv_block_size)
        self.cache = PagedKVCache(cfg.n_layer, kv_blocks, kv_block_size, kv_heads(model),
                                  cfg.n_embd // cfg.n_head, w.dtype, w.device)  # fmt: skip
        self.scheduler = Scheduler("continuous", max_batch, self.cache.manager)
        self._ids = itertools.count()
        self._live: dict[int, tuple[GenRequest, Request, torch.Generator]] = {}
        self._incoming: list[GenRequest] = []
        self._lock, self._wake = threading.Lock(), threading.Event()
        self._thread: threading.Thread | None = None
        self._stopping = False
        self.steps = self.tokens = self.failures = 0  # counters for /metrics
        self.batch_sizes: list[int] = []  # requests per decode step (last 1000)
        self.on_step: Callable[[int], None] | None = None  # called with each decode batch size

    # -- the public, thread-safe side -------------------------------------------------------
    def encode(self, text: str) -> torch.Tensor:
        """Token ids (T,) of ``text``; ValueError names a character outside the vocabulary."""
        return self.tokenizer.encode(text)

    def decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids)

    @property
    def depth(self) -> int:
        """Requests waiting to join the running batch."""
        return len(self._incoming) + len(self.scheduler.waiting)

    @property
    def running(self) -> int:
        """Requests in the running batch."""
        return len(self.scheduler.running)

    @property
    def kv_usage(self) -> float:
        """Fraction of the KV cache's blocks in use, 0 to 1 (vLLM's ``kv_cache_usage_perc``)."""
        manager = self.cache.manager
        return 1.0 - manager.num_free / manager.num_blocks

    def submit(self, req: GenRequest) -> None:
        """Queue ``req``; :class:`Overloaded` when ``max_waiting`` requests wait already,
        ``ValueError`` when the prompt is empty or prompt + ``max_new_tokens`` exceeds the context.
        """
        n = len(req.prompt)
        if n < 1 or req.max_new_tokens < 1 or n + req.max_new_tokens > self.context_length:
            raise ValueError(f"a {n}-token prompt plus {req.max_new_tokens} new tokens; need "
                             f">= 1 of each and at most {self.context_length} in all")  # fmt: skip
        if not 0 <= req.min_tokens <= req.max_new_tokens:
            raise ValueError(f"min_tokens={req.min_tokens}: need 0 <= min_tokens <= "
                             f"max_new_tokens={req.max_new_tokens}")  # fmt: skip
        with self._lock:
            if self._stopping:
                raise Overloaded("the engine is shutting down")
            if self.depth >= self.max_waiting:
                raise Overloaded(f"queue full ({self.max_waiting} waiting)")
            self._incoming.append(req)
        self._wake.set()

    def generate(self, requests: list[GenRequest]) -> list[GenRequest]:
        """Serve ``requests`` to completion in the calling thread (for notebooks and tests)."""
        for r in requests:
            self.submit(r)
        while self.has_work():
            self.step()
        return requests

    def has_work(self) -> bool:
        return bool(self._incoming or self.scheduler.has_work())

    def start(self) -> None:
        """Run :meth:`step` in a background thread while there is work."""
        self._stopping = False
        self._thread = threading.Thread(target=self._loop, name="llm-engine", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        """Refuse new work, cancel what is left, and join the engine thread."""
        with self._lock:
            self._stopping = True  # the engine thread cancels what is left at its next step
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def _loop(self) -> None:
        while not (self._stopping and not self.has_work()):
            if not self.has_work():
                self._wake.wait(0.05)
                self._wake.clear()
                continue
            try:
                self.step()
            except Exception as err:  # a bug outside any one request: fail the live ones, go on
                for _, inner, _ in list(self._live.values()):
                    self._finish(inner, "error", err)

    # -- one step --------------------------------------------------------------------------
    @torch.no_grad()
    def step(self) -> None:
        """Admit new requests, drop cancelled ones, prefill the joiners, decode the batch."""
        with self._lock:
            incoming, self._incoming = self._incoming, []
        for req in incoming:
            inner = Request(next(self._ids), 0.0, list(map(int, req.prompt)), req.max_new_tokens)
            self._live[inner.rid] = (req, inner, request_generator(req.seed, self.device))
            self.scheduler.add(inner)
        for req, inner, _ in list(self._live.values()):
            if req.cancelled.is_set() or self._stopping:
                self._finish(inner, "cancelled")
        prefill, decode = self.scheduler.schedule()
        self.steps += 1
        tensor = partial(torch.tensor, dtype=torch.long, device=self.device)  # ids, positions
        for inner in prefill:  # prompts differ in length: one forward pass each
            self._run([inner], tensor([inner.tokens]), tensor([0]))
        if decode:
            self.batch_sizes = self.batch_sizes[-999:] + [len(decode)]
            if self.on_step is not None:
                self.on_step(len(decode))
            ids = tensor([[r.tokens[-1]] for r in decode])
            start = tensor([len(r.tokens) - 1 for r in decode])
            if not self._run(decode, ids, start, isolate=False):
                for i, inner in enumerate(decode):  # find the culprit: one request at a time
                    self._run([inner], ids[i : i + 1], start[i : i + 1])

    def _run(self, reqs: list[Request], ids, start, isolate: bool = True) -> bool:
        """Forward ``reqs`` and sample a token for each; returns False if the batch failed."""
        try:
            logits = paged_forward(self.model, self.cache, [r.rid for r in reqs], ids, start)
        except Exception as err:
            if isolate:
                self._finish(reqs[0], "error", err)
            return False
        for row, inner in enumerate(reqs):
            req, _, gen = self._live[inner.rid]
            try:
                if req.temperature < GREEDY_BELOW or req.top_p == 0:  # greedy
                    tok = sample(logits[row, -1:], 0.0)
                else:
                    tok = sample(logits[row, -1:], req.temperature, top_p=req.top_p, generator=gen)
                self._emit(inner, int(tok[0]))
            except Exception as err:  # this request alone fails; its neighbours go on
                self._finish(inner, "error", err)
        return True

    def _emit(self, inner: Request, tok: int) -> None:
        req = self._live[inner.rid][0]
        inner.generated.append(tok)
        req.output.append(tok)
        self.tokens += 1
        after = len(self.decode(req.output[: req.min_tokens])) if req.min_tokens else 0
        stops = stop_strings(req.stop, req.eos, req.ignore_eos)
        shown, stopped = visible_text(self.decode(req.output), stops, after)
        if inner.done and not stopped:
            shown = self.decode(req.output)
        if len(shown) > req.sent and req.on_text is not None:
            req.on_text(shown[req.sent :])
        req.sent, req.text = len(shown), shown
        if stopped or inner.done:
            self._finish(inner, "stop" if stopped else "length")

    def _finish(self, inner: Request, reason: str, err: Exception | None = None) -> None:
        req, _, _ = self._live.pop(inner.rid)
        if inner in self.scheduler.running:
            self.scheduler.retire(inner)
        elif inner in self.scheduler.waiting:
            self.scheduler.waiting.remove(inner)
        req.finish_reason = reason
        if err is not None:
            self.failures += 1
            req.error = f"{type(err).__name__}: {err}"
        if req.on_finish is not None:
            req.on_finish(req)
