"""Word embeddings trained with skip-gram and negative sampling (Mikolov et al., 2013).

Each word ``w`` gets an input vector ``v_w`` and an output vector ``u_w``. For every word and
each context word ``c`` within ``window`` positions, training raises ``sigma(u_c . v_w)`` and
lowers ``sigma(u_n . v_w)`` for ``negatives`` words ``n`` drawn from the unigram distribution
raised to the 3/4 power. Words used in similar contexts end up with similar input vectors, which
:func:`nearest` finds by cosine similarity.
"""

from __future__ import annotations

import re
from collections import Counter

import torch
import torch.nn.functional as F

__all__ = ["words", "build_vocab", "skipgram_pairs", "train_skipgram", "cosine", "nearest"]


def words(text: str) -> list[str]:
    """Lower-case alphabetic words of ``text``."""
    return re.findall(r"[a-z]+", text.lower())


def build_vocab(tokens: list[str], min_count: int = 3) -> tuple[list[str], dict[str, int]]:
    """Words seen at least ``min_count`` times, most frequent first, and their ids."""
    if not tokens:
        raise ValueError("build_vocab: tokens is empty; pass a tokenised corpus")
    itos = [w for w, c in Counter(tokens).most_common() if c >= min_count]
    return itos, {w: i for i, w in enumerate(itos)}


def skipgram_pairs(ids: torch.Tensor, window: int) -> tuple[torch.Tensor, torch.Tensor]:
    """All (center, context) id pairs at distance 1..window: two 1-D int64 tensors."""
    centers, contexts = [], []
    for d in range(1, window + 1):
        centers += [ids[:-d], ids[d:]]
        contexts += [ids[d:], ids[:-d]]
    return torch.cat(centers), torch.cat(contexts)


def train_skipgram(
    text: str,
    dim: int = 32,
    window: int = 3,
    negatives: int = 5,
    epochs: int = 5,
    batch_size: int = 512,
    lr: float = 0.01,
    min_count: int = 3,
    seed: int = 0,
) -> tuple[torch.Tensor, list[str], list[float]]:
    """Train skip-gram embeddings on ``text``.

    Returns:
        ``(vectors, itos, losses)``: input vectors (V, dim), the vocabulary (V words) and the
        mean loss of each epoch (binary cross entropy, nats).
    """
    gen = torch.Generator().manual_seed(seed)
    toks = words(text)
    itos, stoi = build_vocab(toks, min_count)
    ids = torch.tensor([stoi[w] for w in toks if w in stoi])
    center, context = skipgram_pairs(ids, window)
    counts = torch.bincount(ids, minlength=len(itos)).double()
    noise = counts**0.75 / (counts**0.75).sum()
    v_in = (torch.rand(len(itos), dim, generator=gen) - 0.5) / dim
    v_out = torch.zeros(len(itos), dim)
    v_in.requires_grad_(True)
    v_out.requires_grad_(True)
    opt = torch.optim.Adam([v_in, v_out], lr=lr)
    losses = []
    for _ in range(epochs):
        perm = torch.randperm(len(center), generator=gen)
        total = 0.0
        for start in range(0, len(perm), batch_size):
            b = perm[start : start + batch_size]
            c, o = center[b], context[b]
            neg = torch.multinomial(noise, len(b) * negatives, True, generator=gen).view(len(b), -1)
            vc = v_in[c]
            pos = (vc * v_out[o]).sum(-1)
            negs = torch.einsum("bd,bkd->bk", vc, v_out[neg])
            loss = -(F.logsigmoid(pos).mean() + F.logsigmoid(-negs).sum(-1).mean())
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += float(loss.detach()) * len(b)
        losses.append(total / len(perm))
    return v_in.detach(), itos, losses


def cosine(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Cosine similarity of the last dimension (broadcasting)."""
    return F.cosine_similarity(a, b, dim=-1)


def nearest(vectors: torch.Tensor, itos: list[str], word: str, k: int = 5):
    """The ``k`` words most cosine-similar to ``word`` (itself excluded), with similarities."""
    if word not in itos:
        raise ValueError(f"nearest: {word!r} is not in the vocabulary ({len(itos)} words)")
    i = itos.index(word)
    sims = cosine(vectors[i][None, :], vectors)
    sims[i] = -2.0
    top = torch.topk(sims, k)
    return [(itos[j], float(s)) for j, s in zip(top.indices.tolist(), top.values)]
