"""Pruning: remove weights (unstructured, N:M) or whole heads and channels (structured).

* :func:`magnitude_masks` -- keep the largest-magnitude weights, per layer or globally.
* :func:`nm_mask` -- N:M semi-structured sparsity (2:4 keeps 2 of every 4 consecutive inputs).
* :func:`apply_masks` -- attach masks with ``torch.nn.utils.prune`` so fine-tuning keeps zeros.
* :func:`sparsity` -- fraction of zero weights in a model's linear layers.
* :func:`sensitivity` -- quality after pruning one layer at a time.
* :func:`prune_mlp_channels`, :func:`prune_heads` -- structured pruning that *shrinks* the matrices
  of a :class:`labs.gpt.GPT`, so dense kernels do less work; :func:`head_importance` and
  :func:`heads_to_keep` choose the heads by importance instead of by index.

Calibration-aware masks live next door: :mod:`labs.compress.wanda`, :mod:`labs.compress.sparsegpt`.

A mask is a bool tensor shaped like the weight: ``True`` keeps a weight, ``False`` zeroes it.
"""

from __future__ import annotations

import copy
from collections.abc import Callable

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils import prune

from labs.compress.measure import linear_names

__all__ = [
    "check_sparsity",
    "magnitude_masks",
    "nm_mask",
    "apply_masks",
    "sparsity",
    "sensitivity",
    "prune_mlp_channels",
    "HeadPrunedAttention",
    "prune_heads",
    "head_importance",
    "heads_to_keep",
]


def check_sparsity(sparsity: float) -> float:
    """Return ``sparsity`` if it lies in [0, 1), else raise a ValueError naming the argument."""
    if not isinstance(sparsity, int | float) or not 0.0 <= sparsity < 1.0:
        raise ValueError(f"sparsity must be a fraction in [0, 1), got {sparsity!r}")
    return float(sparsity)


def _keep_largest(scores: torch.Tensor, n_prune: int) -> torch.Tensor:
    """Mask that drops the ``n_prune`` smallest scores (ties broken by position, like torch)."""
    mask = torch.ones_like(scores, dtype=torch.bool)
    if n_prune > 0:
        drop = torch.topk(scores.reshape(-1), n_prune, largest=False).indices
        mask.view(-1)[drop] = False
    return mask


@torch.no_grad()
def magnitude_masks(
    model: nn.Module, sparsity: float, scope: str = "layer", names: list[str] | None = None
) -> dict[str, torch.Tensor]:
    """Masks that zero the ``sparsity`` fraction of smallest-|w| weights of the named layers.

    Args:
        sparsity: fraction of weights to remove, in [0, 1).
        scope: ``"layer"`` removes that fraction from every layer; ``"global"`` ranks all the
            layers' weights together, so layers with many small weights lose more.
        names: linear layers to prune; default all but the tied output head.

    Returns:
        ``{name: bool mask of the weight's shape}``; ``round(sparsity * n)`` weights are pruned
        per layer (``"layer"``) or in total (``"global"``).
    """
    check_sparsity(sparsity)
    names = linear_names(model) if names is None else names
    weights = {n: model.get_submodule(n).weight.detach() for n in names}
    if scope == "layer":
        return {n: _keep_largest(w.abs(), round(sparsity * w.numel())) for n, w in weights.items()}
    if scope != "global":
        raise ValueError(f"scope must be 'layer' or 'global', got {scope!r}")
    flat = torch.cat([w.abs().reshape(-1) for w in weights.values()])
    keep = _keep_largest(flat, round(sparsity * flat.numel()))
    masks, start = {}, 0
    for n, w in weights.items():
        masks[n] = keep[start : start + w.numel()].view_as(w)
        start += w.numel()
    return masks


def nm_mask(weight: torch.Tensor, n: int = 2, m: int = 4) -> torch.Tensor:
    """N:M mask: in every run of ``m`` consecutive inputs of a row keep the ``n`` largest |w|.

    Args:
        weight: (out_features, in_features); ``in_features`` must be a multiple of ``m``.

    Returns:
        Bool mask of the weight's shape with exactly ``n`` True values in each group of ``m``.
    """
    if not 0 < n < m:
        raise ValueError(f"nm_mask: need 0 < n < m, got n={n}, m={m}")
    if weight.dim() != 2 or weight.shape[1] % m:
        raise ValueError(
            f"nm_mask: in_features must be a multiple of m={m}, got shape {tuple(weight.shape)}"
        )
    groups = weight.detach().abs().reshape(-1, m)
    keep = torch.zeros_like(groups, dtype=torch.bool)
    keep.scatter_(1, groups.topk(n, dim=1).indices, True)
    return keep.view_as(weight)


def apply_masks(model: nn.Module, masks: dict[str, torch.Tensor], permanent: bool = False):
    """Attach ``masks`` with ``torch.nn.utils.prune.custom_from_mask`` (in place; returns model).

    While attached, the layer computes with ``weight_orig * weight_mask``, so an optimizer that
    updates ``weight_orig`` never revives a pruned weight. ``permanent=True`` folds the masks in
    (``prune.remove``) and leaves plain ``nn.Linear`` layers with zeros.
    """
    for name, mask in masks.items():
        layer = model.get_submodule(name)
        if mask.shape != layer.weight.shape:
            raise ValueError(
                f"apply_masks: mask for {name} has shape {tuple(mask.shape)}, "
                f"the weight {tuple(layer.weight.shape)}"
            )
        if prune.is_pruned(layer):
            prune.remove(layer, "weight")
        prune.custom_from_mask(layer, "weight", mask)
        if permanent:
            prune.remove(layer, "weight")
    return model


def sparsity(model: nn.Module, names: list[str] | None = None) -> float:
    """Fraction of exactly-zero weights over the named linear layers (default all but the head)."""
    names = linear_names(model) if names is None else names
    ws = [model.get_submodule(n).weight for n in names]
    return sum(int((w == 0).sum()) for w in ws) / sum(w.numel() for w in ws)


def sensitivity(
    model: nn.Module,
    sparsities: list[float],
    evaluate: Callable[[nn.Module], float],
    names: list[str] | None = None,
) -> dict[str, list[float]]:
    """``evaluate`` after magnitude-pruning one layer at a time: ``{name: [score per sparsity]}``."""
    names = linear_names(model) if names is None else names
    out: dict[str, list[float]] = {}
    for name in names:
        out[name] = []
        for s in sparsities:
            pruned = copy.deepcopy(model)
            apply_masks(pruned, magnitude_masks(pruned, s, names=[name]), permanent=True)
            out[name].append(evaluate(pruned))
    return out


@torch.no_grad()
def prune_mlp_channels(model: nn.Module, sparsity: float) -> nn.Module:
    """A copy of a GPT whose MLPs keep the ``1 - sparsity`` most important hidden channels.

    A hidden channel j of ``up_proj -> GELU -> down_proj`` is row j of ``up_proj`` and column j of
    ``down_proj``; its importance is the product of their L2 norms. Both matrices shrink.
    """
    check_sparsity(sparsity)
    model = copy.deepcopy(model)
    for block in model.blocks:
        up, down = block.mlp.up_proj, block.mlp.down_proj
        hidden = up.out_features
        keep = max(1, round(hidden * (1 - sparsity)))
        score = up.weight.norm(dim=1) * down.weight.norm(dim=0)
        idx = score.topk(keep).indices.sort().values
        factory_kwargs = {"device": up.weight.device, "dtype": up.weight.dtype}
        new_up = nn.Linear(up.in_features, keep, up.bias is not None, **factory_kwargs)
        new_down = nn.Linear(keep, down.out_features, down.bias is not None, **factory_kwargs)
        new_up.weight.copy_(up.weight[idx])
        new_down.weight.copy_(down.weight[:, idx])
        if up.bias is not None:
            new_up.bias.copy_(up.bias[idx])
        if down.bias is not None:
            new_down.bias.copy_(down.bias)
        block.mlp.up_proj, block.mlp.down_proj = new_up, new_down
    return model


class HeadPrunedAttention(nn.Module):
    """Causal self-attention with fewer heads: q, k, v project C -> H'*d, o_proj H'*d -> C."""

    def __init__(self, attn: nn.Module, heads: list[int]):
        super().__init__()
        c = attn.q_proj.in_features
        d = c // attn.n_head
        self.n_head, self.head_dim = len(heads), d
        w = attn.q_proj.weight
        factory_kwargs = {"device": w.device, "dtype": w.dtype}
        rows = torch.cat([torch.arange(h * d, (h + 1) * d, device=w.device) for h in sorted(heads)])
        for name in ("q_proj", "k_proj", "v_proj"):
            old = getattr(attn, name)
            new = nn.Linear(c, len(rows), old.bias is not None, **factory_kwargs)
            with torch.no_grad():
                new.weight.copy_(old.weight[rows])
                if old.bias is not None:
                    new.bias.copy_(old.bias[rows])
            setattr(self, name, new)
        self.o_proj = nn.Linear(len(rows), c, attn.o_proj.bias is not None, **factory_kwargs)
        with torch.no_grad():
            self.o_proj.weight.copy_(attn.o_proj.weight[:, rows])
            if attn.o_proj.bias is not None:
                self.o_proj.bias.copy_(attn.o_proj.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, _ = x.shape

        def heads(y):  # (B, T, H'd) -> (B, H', T, d)
            return y.view(b, t, self.n_head, self.head_dim).transpose(1, 2)

        q, k, v = heads(self.q_proj(x)), heads(self.k_proj(x)), heads(self.v_proj(x))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.o_proj(y.transpose(1, 2).reshape(b, t, -1))


@torch.no_grad()
def prune_heads(model: nn.Module, keep: dict[int, list[int]]) -> nn.Module:
    """A copy of a GPT where block ``i`` keeps only the attention heads ``keep[i]`` (others all).

    Raises ValueError for an empty list or a head index outside ``0 .. n_head - 1``.
    """
    model = copy.deepcopy(model)
    for i, heads in keep.items():
        attn = model.blocks[i].attn
        if not heads or any(not 0 <= h < attn.n_head for h in heads):
            raise ValueError(
                f"prune_heads: block {i} must keep a non-empty subset of heads "
                f"0..{attn.n_head - 1}, got {heads}"
            )
        model.blocks[i].attn = HeadPrunedAttention(attn, list(heads))
    return model


def head_importance(model: nn.Module, batches: list[tuple[torch.Tensor, torch.Tensor]]):
    """Importance of every attention head of a GPT: ``E |dL / d gate_h|`` (Michel et al. 2019).

    A gate of value 1 multiplies each head's output before ``o_proj``; the absolute gradient of
    the loss with respect to it, summed over ``batches`` of ``(inputs, targets)``, estimates how
    much the loss would change if the head were removed. Returns (n_layer, n_head), float32, on
    the model's device (the batches are moved there).
    """
    w = model.blocks[0].attn.o_proj.weight
    gates = [
        torch.ones(b.attn.n_head, dtype=w.dtype, device=w.device, requires_grad=True)
        for b in model.blocks
    ]
    hooks = []
    for block, gate in zip(model.blocks, gates):

        def pre_hook(_m, inputs, gate=gate):
            (y,) = inputs
            b, t, c = y.shape
            return (y.view(b, t, len(gate), c // len(gate)) * gate[:, None]).view(b, t, c)

        hooks.append(block.attn.o_proj.register_forward_pre_hook(pre_hook))
    score = torch.zeros(len(gates), len(gates[0]), device=w.device)
    try:
        for x, y in batches:
            grads = torch.autograd.grad(model.loss(x.to(w.device), y.to(w.device)), gates)
            score += torch.stack([g.abs() for g in grads])
    finally:
        for h in hooks:
            h.remove()
    return score


def heads_to_keep(importance: torch.Tensor, n_prune: int) -> dict[int, list[int]]:
    """``{block: kept heads}`` after removing the ``n_prune`` least important heads overall.

    Every block keeps at least one head (its most important), so no block loses attention.
    """
    layers, heads = importance.shape
    if not 0 <= n_prune <= layers * (heads - 1):
        raise ValueError(
            f"heads_to_keep: n_prune must be in 0..{layers * (heads - 1)}, got {n_prune}"
        )
    protected = importance.argmax(dim=1)
    order = [
        (float(importance[i, h]), i, h)
        for i in range(layers)
        for h in range(heads)
        if h != int(protected[i])
    ]
    drop = {(i, h) for _, i, h in sorted(order)[:n_prune]}
    return {i: [h for h in range(heads) if (i, h) not in drop] for i in range(layers)}
