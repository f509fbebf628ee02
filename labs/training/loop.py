"""The training loop of the book: AdamW with warm-up and cosine decay, and an evaluation pass.

Works for any module whose ``loss(x, y)`` returns a scalar (the tiny GPT of :mod:`labs.gpt`), or
with a ``loss_fn``::

    from labs.training.loop import train, evaluate
    losses = train(model, batches, steps=200, lr=3e-3)   # per-step training losses (nats/token)
    val = evaluate(model, val_batches, n_batches=4)       # mean loss over 4 batches

:mod:`labs.gpt` re-exports both (``gpt.train``, ``gpt.evaluate``) next to ``gpt.pretrain``.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterable, Iterator

import torch
import torch.nn as nn

__all__ = ["train", "evaluate"]


def train(
    model: nn.Module,
    batches: Iterable[tuple[torch.Tensor, torch.Tensor]],
    steps: int,
    lr: float = 3e-3,
    weight_decay: float = 0.0,
    warmup_steps: int = 0,
    final_lr_ratio: float = 0.1,
    grad_clip: float | None = 1.0,
    optimizer: torch.optim.Optimizer | None = None,
    loss_fn: Callable[[nn.Module, torch.Tensor, torch.Tensor], torch.Tensor] | None = None,
    callback: Callable[[int, float], None] | None = None,
    autocast: torch.dtype | None = None,
    scaler: torch.amp.GradScaler | None = None,
) -> list[float]:
    """Train ``model`` for ``steps`` steps of AdamW on the parameters that require gradients.

    The learning rate warms up linearly for ``warmup_steps`` and then follows a cosine from
    ``lr`` down to ``lr * final_lr_ratio``.

    Args:
        model: a :class:`GPT` (or any module; then pass ``loss_fn``).
        batches: yields ``(inputs, targets)`` pairs of shape (B, T); see :func:`labs.data.batches`.
        steps: number of optimizer steps.
        lr: peak learning rate.
        optimizer: use this optimizer instead of a fresh AdamW (its learning rate is scheduled).
        loss_fn: ``loss_fn(model, x, y) -> scalar``; default ``model.loss(x, y)``.
        callback: called as ``callback(step, loss)`` after every step.
        autocast: run the forward pass under ``torch.autocast`` in this dtype (``float16`` or
            ``bfloat16``: mixed precision; weights and optimizer state stay as they are).
        scaler: a ``torch.amp.GradScaler`` (fp16): scales the loss, unscales the gradients
            before clipping, skips steps whose gradients overflow, adapts its scale.

    Returns:
        The training loss of every step (floats, in nats per token).
    """
    params = [p for p in model.parameters() if p.requires_grad]
    if not params:
        raise ValueError("train: the model has no parameter with requires_grad=True")
    if optimizer is None:
        optimizer = torch.optim.AdamW(params, lr=lr, betas=(0.9, 0.95), weight_decay=weight_decay)
    loss_fn = loss_fn or (lambda m, x, y: m.loss(x, y))

    def lr_at(step: int) -> float:
        if step < warmup_steps:
            return lr * (step + 1) / warmup_steps
        frac = (step - warmup_steps) / max(1, steps - warmup_steps)
        return lr * (final_lr_ratio + (1 - final_lr_ratio) * 0.5 * (1 + math.cos(math.pi * frac)))

    model.train()
    it: Iterator = iter(batches)
    losses = []
    device = params[0].device
    for step in range(steps):
        x, y = (t.to(device) for t in next(it))  # batches are built on the CPU
        for group in optimizer.param_groups:
            group["lr"] = lr_at(step)
        with torch.autocast(device.type, autocast) if autocast else contextlib.nullcontext():
            loss = loss_fn(model, x, y)
        optimizer.zero_grad(set_to_none=True)
        if scaler is None:
            loss.backward()
        else:
            scaler.scale(loss).backward()
            scaler.unscale_(optimizer)
        if grad_clip is not None:
            torch.nn.utils.clip_grad_norm_(params, grad_clip)
        if scaler is None:
            optimizer.step()
        else:
            scaler.step(optimizer)
            scaler.update()
        losses.append(float(loss.detach()))
        if callback is not None:
            callback(step, losses[-1])
    return losses


@torch.no_grad()
def evaluate(model: nn.Module, batches: Iterable, n_batches: int = 4) -> float:
    """Mean ``model.loss`` over the first ``n_batches`` batches, in nats per token."""
    was_training = model.training
    model.eval()
    it = iter(batches)
    device = next(model.parameters()).device
    total = sum(float(model.loss(*(t.to(device) for t in next(it)))) for _ in range(n_batches))
    total /= n_batches
    model.train(was_training)
    return total
