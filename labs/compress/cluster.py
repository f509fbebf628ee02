"""Weight clustering with fine-tuned centroids and entropy-coded indices (Deep Compression).

Han et al. (2016) replace each layer's weights by ``k`` shared values: a 1-D k-means over the
weights gives ``k`` centroids, and every weight stores only the index of its centroid
(``log2 k`` bits). The centroids are then *fine-tuned*: the gradient of a centroid is the sum of
the gradients of the weights that share it, which autograd computes for ``centroids[index]``.
Finally the indices are Huffman-coded: centroids near zero are used far more often than those in
the tails, so the average code is shorter than ``log2 k`` bits.

* :func:`kmeans_1d` -- k-means on a tensor's values with linear initialisation.
* :class:`ClusteredLinear` -- a linear layer holding indices (uint8) and trainable centroids.
* :func:`cluster_model` -- a copy of a model with every linear layer (but the tied head) clustered.
* :func:`huffman_lengths` -- code length of each symbol of an optimal prefix code.
* :func:`index_bits` -- fixed-width, entropy and Huffman sizes of a model's indices, in bits.
"""

from __future__ import annotations

import copy
import heapq
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

__all__ = ["kmeans_1d", "ClusteredLinear", "cluster_model", "huffman_lengths", "index_bits"]


@torch.no_grad()
def kmeans_1d(x: torch.Tensor, k: int, iters: int = 25) -> tuple[torch.Tensor, torch.Tensor]:
    """Cluster the values of ``x`` into ``k`` centroids (Lloyd's algorithm in one dimension).

    Centroids start evenly spaced between min and max (the linear initialisation Han et al. found
    best: it keeps centroids in the rare large-magnitude tails). An empty cluster keeps its
    centroid. Returns ``(centroids (k,) float32, index (x.shape) int64)``.
    """
    if not 1 <= k <= 256:
        raise ValueError(f"kmeans_1d: k must be in 1..256 (indices are stored in uint8), got {k}")
    v = x.detach().float().reshape(-1)
    c = torch.linspace(float(v.min()), float(v.max()), k, device=v.device)
    for _ in range(iters):
        idx = (v[:, None] - c[None, :]).abs().argmin(dim=1)
        sums = torch.zeros(k, device=v.device).index_add_(0, idx, v)
        counts = torch.bincount(idx, minlength=k).float()
        c = torch.where(counts > 0, sums / counts.clamp_min(1), c)
    idx = (v[:, None] - c[None, :]).abs().argmin(dim=1)
    return c, idx.reshape(x.shape)


class _Gather(torch.autograd.Function):
    """``centroids[index]`` whose backward is one ``index_add_`` (autograd's generic indexing
    backward is far slower on the CPU): the gradient of a centroid is the sum of the gradients of
    the weights that share it."""

    @staticmethod
    def forward(ctx, centroids, index):
        ctx.save_for_backward(index)
        ctx.k = centroids.shape[0]
        return centroids[index]

    @staticmethod
    def backward(ctx, grad):
        (index,) = ctx.saved_tensors
        g = grad.new_zeros(ctx.k).index_add_(0, index.reshape(-1), grad.reshape(-1))
        return g, None


class ClusteredLinear(nn.Module):
    """``nn.Linear`` whose weight is ``centroids[index]``: ``k`` trainable floats + uint8 indices.

    The centroids keep the linear layer's dtype and device (clustering itself runs in float32).
    """

    def __init__(self, linear: nn.Linear, k: int = 16, iters: int = 25):
        super().__init__()
        self.in_features, self.out_features, self.k = linear.in_features, linear.out_features, k
        c, idx = kmeans_1d(linear.weight, k, iters)
        self.centroids = nn.Parameter(c.to(linear.weight.dtype))
        self.register_buffer("index", idx.to(torch.uint8))
        self.bias = None if linear.bias is None else nn.Parameter(linear.bias.detach().clone())

    def weight(self) -> torch.Tensor:
        """The shared-value weight (out, in); differentiable in the centroids."""
        return _Gather.apply(self.centroids, self.index.long())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, self.weight(), self.bias)

    def extra_repr(self) -> str:
        return f"in={self.in_features}, out={self.out_features}, k={self.k}"


def cluster_model(model: nn.Module, k: int = 16, iters: int = 25) -> nn.Module:
    """A copy of ``model`` with each linear layer (all but the tied head) a :class:`ClusteredLinear`
    with its own ``k`` centroids. Only the centroids require gradients in the copy, so training it
    fine-tunes the shared values and nothing else."""
    from labs.compress.measure import linear_names

    model = copy.deepcopy(model)
    for name in linear_names(model):
        parent, _, child = name.rpartition(".")
        owner = model.get_submodule(parent) if parent else model
        setattr(owner, child, ClusteredLinear(getattr(owner, child), k, iters))
    for name, p in model.named_parameters():
        p.requires_grad_(name.endswith("centroids"))
    return model


def huffman_lengths(counts: list[int]) -> list[int]:
    """Code length in bits of each symbol of a Huffman code for the given symbol counts.

    Symbols with count 0 get length 0 (they are never coded); a single used symbol gets 1 bit.
    """
    used = [(c, i) for i, c in enumerate(counts) if c > 0]
    lengths = [0] * len(counts)
    if len(used) == 1:
        lengths[used[0][1]] = 1
        return lengths
    heap = [(c, n, [i]) for n, (c, i) in enumerate(used)]
    heapq.heapify(heap)
    tiebreak = len(heap)
    while len(heap) > 1:
        c1, _, s1 = heapq.heappop(heap)
        c2, _, s2 = heapq.heappop(heap)
        for i in s1 + s2:
            lengths[i] += 1  # every merge puts one more bit in front of the merged symbols
        heapq.heappush(heap, (c1 + c2, tiebreak, s1 + s2))
        tiebreak += 1
    return lengths


def index_bits(model: nn.Module) -> dict[str, float]:
    """Bits to store the indices of every :class:`ClusteredLinear` of ``model``, three ways.

    ``fixed``: ``ceil(log2 k)`` bits each; ``entropy``: the Shannon bound ``-sum n_i log2 p_i`` of
    each layer's own index histogram; ``huffman``: a Huffman code per layer. Also ``codebook``:
    the centroids at 32 bits each, and ``weights``: how many indices there are.
    """
    out = {"fixed": 0.0, "entropy": 0.0, "huffman": 0.0, "codebook": 0.0, "weights": 0.0}
    for m in model.modules():
        if isinstance(m, ClusteredLinear):
            counts = torch.bincount(m.index.reshape(-1).long(), minlength=m.k).tolist()
            n = sum(counts)
            out["fixed"] += n * math.ceil(math.log2(m.k)) if m.k > 1 else n
            out["entropy"] += -sum(c * math.log2(c / n) for c in counts if c)
            out["huffman"] += sum(c * b for c, b in zip(counts, huffman_lengths(counts)))
            out["codebook"] += 32 * m.k
            out["weights"] += n
    return out
