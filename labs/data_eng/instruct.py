"""Instruction data: chat templates, loss masking of prompt tokens, and annotator agreement.

* :func:`render_chat` -- a list of ``{"role", "content"}`` messages in a ChatML-style template.
* :func:`masked_targets` -- next-token targets that are ``-100`` (ignored by
  ``F.cross_entropy``) on every token the model should *read* but not learn to *write*.
* :func:`cohen_kappa` -- agreement of two annotators corrected for chance (Cohen, 1960).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import torch

__all__ = ["ROLES", "render_chat", "masked_targets", "cohen_kappa"]

ROLES = ("system", "user", "assistant")


def render_chat(messages: Sequence[dict[str, str]], add_generation_prompt: bool = False):
    """Render ``messages`` as ``<|role|>\\ncontent\\n<|end|>\\n`` blocks.

    Returns:
        ``(text, spans)``: the text and, for each assistant message, the ``(start, end)``
        character span of its content plus the end marker -- the part the model should learn.
        With ``add_generation_prompt`` the text ends with an open ``<|assistant|>`` header.
    """
    text, spans = "", []
    for m in messages:
        if m.get("role") not in ROLES:
            raise ValueError(f"render_chat: role must be one of {ROLES}, got {m.get('role')!r}")
        text += f"<|{m['role']}|>\n"
        start = len(text)
        text += f"{m['content']}\n<|end|>\n"
        if m["role"] == "assistant":
            spans.append((start, len(text)))
    if add_generation_prompt:
        text += "<|assistant|>\n"
    return text, spans


def masked_targets(ids: torch.Tensor, learn: torch.Tensor) -> torch.Tensor:
    """Next-token targets for ``ids`` (T,) that keep only positions the model should learn.

    Args:
        ids: token ids of one example, shape (T,).
        learn: bool (T,): True on tokens the model must produce (the response).

    Returns:
        int64 (T - 1,): ``ids[t + 1]`` where ``learn[t + 1]``, else -100. Pair it with
        ``ids[:-1]`` as the input.
    """
    if ids.shape != learn.shape or ids.ndim != 1:
        raise ValueError(
            f"masked_targets: ids and learn must be 1-D of equal length, got {tuple(ids.shape)} "
            f"and {tuple(learn.shape)}"
        )
    return torch.where(learn[1:], ids[1:], torch.full_like(ids[1:], -100))


def cohen_kappa(a: Sequence, b: Sequence) -> float:
    """Cohen's kappa ``(p_o - p_e) / (1 - p_e)`` of two annotators' labels for the same items.

    ``p_o`` is the observed agreement, ``p_e`` the agreement expected if both labelled at random
    with their own label frequencies. 1 is perfect agreement, 0 chance level.
    """
    if len(a) != len(b):
        raise ValueError(f"cohen_kappa: {len(a)} labels from a but {len(b)} from b")
    if len(a) == 0:
        raise ValueError("cohen_kappa: no labels; pass at least one item")
    n = len(a)
    p_o = sum(x == y for x, y in zip(a, b)) / n
    ca, cb = Counter(a), Counter(b)
    p_e = sum(ca[k] * cb[k] for k in ca) / n**2
    if p_e == 1.0:
        return 1.0 if p_o == 1.0 else 0.0
    return (p_o - p_e) / (1 - p_e)
