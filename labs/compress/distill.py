"""Knowledge distillation: train a small student on the soft predictions of a large teacher.

Hinton et al. (2015): soften both distributions with a temperature T, ``p = softmax(z / T)``, and
train the student to match the teacher's with the KL divergence, mixed with the ordinary
cross entropy on the true next token::

    loss = alpha * T^2 * KL(p_teacher || p_student) + (1 - alpha) * CE(z_student, y)

The ``T^2`` keeps the soft term's gradients the same size whatever T is (they scale as 1/T^2).
Soft targets carry more than the one right answer: which other tokens the teacher finds
plausible, and how much -- "dark knowledge".

* :func:`distillation_loss` -- the loss above from two sets of logits.
* :func:`distill` -- train a student with it, using :func:`labs.gpt.train`.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
import torch.nn as nn
import torch.nn.functional as F

from labs import gpt

__all__ = ["distillation_loss", "distill"]


def distillation_loss(
    student_logits: torch.Tensor,
    teacher_logits: torch.Tensor,
    targets: torch.Tensor,
    temperature: float = 2.0,
    alpha: float = 0.5,
) -> torch.Tensor:
    """Hinton's distillation loss, averaged over tokens (nats).

    Args:
        student_logits, teacher_logits: (..., vocab); the teacher's are not differentiated.
        targets: (...) int64 token ids for the hard cross-entropy term.
        temperature: T > 0; alpha in [0, 1]: weight of the soft term.
    """
    if temperature <= 0:
        raise ValueError(f"distillation_loss: temperature must be > 0, got {temperature}")
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"distillation_loss: alpha must be in [0, 1], got {alpha}")
    v = student_logits.shape[-1]
    s = student_logits.reshape(-1, v).float()
    t = teacher_logits.detach().reshape(-1, v).float()
    soft = F.kl_div(
        F.log_softmax(s / temperature, dim=-1),
        F.log_softmax(t / temperature, dim=-1),
        log_target=True,
        reduction="batchmean",
    )
    hard = F.cross_entropy(s, targets.reshape(-1))
    return alpha * temperature**2 * soft + (1 - alpha) * hard


def distill(
    student: nn.Module,
    teacher: nn.Module,
    batches: Iterable,
    steps: int,
    temperature: float = 2.0,
    alpha: float = 0.5,
    lr: float = 3e-3,
) -> list[float]:
    """Train ``student`` for ``steps`` steps on :func:`distillation_loss` against ``teacher``.

    The teacher runs in eval mode without gradients. Returns the per-step losses.
    """
    teacher.eval()

    def loss_fn(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            t_logits = teacher(x)
        return distillation_loss(model(x), t_logits, y, temperature, alpha)

    warmup = min(20, steps // 10)
    return gpt.train(student, batches, steps, lr=lr, warmup_steps=warmup, loss_fn=loss_fn)
