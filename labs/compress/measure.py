"""Measure a compressed model honestly: its bytes on disk, its CPU latency and its perplexity.

Every compression chapter compresses the same model, so this module also builds it:
:func:`trained_gpt` trains the tiny GPT of :mod:`labs.gpt` on the corpus of :mod:`labs.data` with
a fixed seed (a few seconds on one CPU core) and returns it with the held-out token ids.

* :func:`file_bytes` -- size of ``torch.save(model.state_dict())``, the file you would ship;
  :func:`zipped_bytes` -- the same after zlib compression.
* :func:`linear_flops` -- FLOPs per token of the linear layers as dense kernels execute them.
* :func:`perplexity` -- exp of the mean next-token loss over fixed held-out windows.
* :func:`latency_ms` -- median milliseconds of one forward pass (from :func:`labs.basics.flops.time_fn`);
  :func:`compare_times` -- several functions timed side by side, round-robin, fastest call each.
* :func:`linear_names` -- the names of a model's ``nn.Linear`` layers, in order;
  :func:`model_device` -- where its weights live (inputs the helpers build go there).
"""

from __future__ import annotations

import io
import itertools
import math
import zlib
from collections.abc import Callable

import torch
import torch.nn as nn
import torch.nn.functional as F

from labs import data, gpt
from labs.basics.flops import time_fn
from labs.systems import roofline

__all__ = [
    "COMPRESS_CONFIG",
    "trained_gpt",
    "heldout_ids",
    "perplexity",
    "file_bytes",
    "zipped_bytes",
    "linear_flops",
    "latency_ms",
    "compare_times",
    "linear_names",
    "model_device",
]

COMPRESS_CONFIG = gpt.GPTConfig(n_layer=2, n_head=4, n_embd=96, block_size=64, seed=0)
"""The model every compression chapter starts from: 2 blocks, width 96, 64-token context."""


def heldout_ids() -> torch.Tensor:
    """Token ids of the validation split of the corpus (the last 10 %), shape (N,), int64."""
    tok = data.CharTokenizer()
    return data.split(tok.encode(data.load_corpus()))[1]


def trained_gpt(steps: int = 150, seed: int = 0, config: gpt.GPTConfig | None = None) -> gpt.GPT:
    """The tiny GPT trained for ``steps`` AdamW steps on the corpus (deterministic for a seed).

    Args:
        steps: optimizer steps (batch 16 x 64 tokens); 150 take a few seconds on one core.
        seed: seed of the initialisation and of the batch stream.
        config: model size; default :data:`COMPRESS_CONFIG`.

    Returns:
        The trained model in eval mode.
    """
    model, _ = gpt.pretrain(config or COMPRESS_CONFIG, steps=steps, batch_size=16, seed=seed)
    return model.eval()


@torch.no_grad()
def perplexity(model: nn.Module, ids: torch.Tensor | None = None, window: int = 64) -> float:
    """Perplexity of ``model`` on ``ids`` cut into non-overlapping windows of ``window`` tokens.

    Args:
        model: maps ids (B, T) to logits (B, T, vocab).
        ids: 1-D held-out token ids; default :func:`heldout_ids`.
        window: tokens per window (at most the model's context length).

    Returns:
        ``exp(mean cross entropy in nats per token)``; 1 is perfect, ``vocab_size`` is guessing.
    """
    ids = (heldout_ids() if ids is None else ids).to(model_device(model))
    n = (len(ids) - 1) // window
    if n < 1:
        raise ValueError(f"perplexity: {len(ids)} ids cannot fill one window of {window} tokens")
    x = ids[: n * window].view(n, window)
    y = ids[1 : n * window + 1].view(n, window)
    logits = model(x).float()
    loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
    return math.exp(float(loss))


def file_bytes(model: nn.Module) -> int:
    """Bytes of ``torch.save(model.state_dict())``: what the model costs on disk or in a download.

    Tied weights are saved once; packed int8/int4 buffers count at their real size.
    """
    buf = io.BytesIO()
    torch.save(model.state_dict(), buf)
    return buf.getbuffer().nbytes


def zipped_bytes(model: nn.Module) -> int:
    """Bytes of the saved state dict after zlib compression (level 6): zeros compress, noise not."""
    buf = io.BytesIO()
    torch.save(model.state_dict(), buf)
    return len(zlib.compress(buf.getvalue(), 6))


def linear_flops(model: nn.Module) -> int:
    """FLOPs per token that dense kernels execute in the model's linear layers: 2 * in * out each.

    Counts every module with ``in_features`` and ``out_features`` (``nn.Linear``, quantized
    linears). Zeros inside a weight still count (a dense kernel multiplies them); so does the head,
    and a module used in several places (shared blocks) counts once per use.
    """
    mods = model.named_modules(remove_duplicate=False)  # a shared block runs once per use
    layers = [m for _, m in mods if hasattr(m, "in_features") and hasattr(m, "out_features")]
    return sum(2 * m.in_features * m.out_features for m in layers)


@torch.no_grad()
def latency_ms(model: nn.Module, batch: int = 1, tokens: int = 64, repeats: int = 7) -> float:
    """Median milliseconds of one forward pass over a (batch, tokens) input on the model's device.

    Pass ``batch=1`` for the latency a single user sees; divide by ``batch * tokens`` for the
    cost per token. Uses :func:`labs.basics.flops.time_fn` (median of ``repeats`` runs after
    warm-up) on the model's device: CUDA events on a GPU.
    """
    device = model_device(model)
    gen = torch.Generator(device).manual_seed(0)
    x = torch.randint(0, 96, (batch, tokens), generator=gen, device=device)
    return 1000 * time_fn(lambda: model(x), warmup=2, repeats=repeats, device=device)


@torch.no_grad()
def compare_times(
    fns: dict[str, Callable[[], object]],
    rounds: int = 15,
    device: torch.device | str | None = None,
    thread_time: bool = False,
) -> dict[str, float]:
    """Seconds per call of each function, timed side by side: ``{name: seconds}``.

    The functions run round-robin (one call each per round, after one warm-up call each), so a
    burst of load from other programs hits all of them alike, and each result is the *fastest* of
    ``rounds`` calls: on a shared machine interruptions only ever add time, so the minimum is the
    most repeatable estimate of what the code itself costs. Compare the ratios, not the values.
    This is :func:`labs.systems.roofline.compare_times` with ``rounds`` as its ``repeats``:
    CUDA events on a GPU, the wall clock on the CPU, or with ``thread_time=True`` the CPU time of
    the calling thread (PyTorch must then run on one thread, ``torch.set_num_threads(1)``), so
    that time the operating system gives to other programs does not count.
    """
    return roofline.compare_times(fns, rounds, device, thread_time=thread_time)


def linear_names(model: nn.Module, include_head: bool = False) -> list[str]:
    """Names of the ``nn.Linear`` modules of ``model`` in definition order.

    The tied output head (``lm_head`` of :class:`labs.gpt.GPT`) shares its weight with the token
    embedding, so it is left out unless ``include_head`` is true.
    """
    return [
        name
        for name, m in model.named_modules()
        if isinstance(m, nn.Linear) and (include_head or not name.endswith("lm_head"))
    ]


def model_device(model: nn.Module) -> torch.device:
    """The device of the first parameter or buffer of ``model``; the CPU if it has none (an
    :class:`labs.compress.export.OrtModel` runs its session on the CPU)."""
    for t in itertools.chain(model.parameters(), model.buffers()):
        return t.device
    return torch.device("cpu")
