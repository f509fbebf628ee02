"""Mixture of experts and expert parallelism (Shazeer et al. 2017; Lepikhin et al. 2021; Fedus
et al. 2022).

A router scores every token against ``N`` experts; the token goes to its top-``k`` experts and
its output is their outputs weighted by the gate values.  Each expert accepts at most
``capacity = ceil(capacity_factor * tokens * k / N)`` tokens per batch; the rest are *dropped*
(their MoE output is zero, the residual connection carries them on).  The auxiliary loss
``alpha * N * sum_i f_i P_i`` (``f_i``: fraction of assignments routed to expert ``i``, ``P_i``:
mean router probability of ``i``) is smallest when the load is even.

Expert parallelism puts ``N / P`` experts on each of ``P`` ranks.  Each rank routes its own
tokens, then one ``all_to_all_single`` with uneven splits *dispatches* every kept assignment to
the rank owning its expert, the experts run, and a second all-to-all *combines* the outputs back
to the tokens' ranks.  :class:`ExpertParallelMoE` equals :class:`MoE` applied to each rank's
tokens, forward and backward.
"""

from __future__ import annotations

import copy
import math

import torch
import torch.nn.functional as F
from torch import nn

from labs import dist

__all__ = [
    "top_k_gating", "expert_capacity", "dispatch_plan", "load_balancing_loss", "Expert", "MoE",
    "ExpertParallelMoE", "all_to_all_differentiable",
]  # fmt: skip


def top_k_gating(logits: torch.Tensor, k: int):
    """Softmax over experts, then the top ``k``.  ``logits`` (T, N) ->
    ``(probs (T, N), experts (T, k) int64, gates (T, k))``; for ``k > 1`` the gates are the
    chosen probabilities renormalised to sum to 1 (as Mixtral does), for ``k = 1`` the
    probability itself (as the Switch Transformer does)."""
    if not 1 <= k <= logits.shape[-1]:
        raise ValueError(f"top_k_gating: k must be in [1, {logits.shape[-1]}], got {k}")
    probs = logits.softmax(dim=-1)
    top, experts = probs.topk(k, dim=-1)
    gates = top if k == 1 else top / top.sum(dim=-1, keepdim=True)
    return probs, experts, gates


def expert_capacity(tokens: int, n_experts: int, k: int = 1, capacity_factor: float = 1.25):
    """Most assignments one expert accepts from ``tokens`` tokens: ``ceil(cf * tokens * k / N)``."""
    return math.ceil(capacity_factor * tokens * k / n_experts)


def dispatch_plan(experts: torch.Tensor, n_experts: int, capacity: int):
    """Which assignments an expert keeps, first come first served.

    Args:
        experts: (T, k) expert of each token's choices.  n_experts: N.  capacity: per expert.

    Returns:
        ``(keep (T, k) bool, slot (T, k) int64 position in its expert's queue, wanted (N,)
        assignments each expert was offered)``.  First choices of all tokens queue before second
        choices (GShard's priority); within a choice, earlier tokens first.
    """
    t, k = experts.shape
    order = experts.t().reshape(-1)  # choice-major: all first choices, then all second ...
    onehot = F.one_hot(order, n_experts)
    slot = (onehot.cumsum(0) - 1).gather(1, order[:, None]).squeeze(1)
    slot = slot.view(k, t).t()
    return slot < capacity, slot, onehot.sum(0)


def load_balancing_loss(probs: torch.Tensor, experts: torch.Tensor, alpha: float = 0.01):
    """``alpha * N * sum_i f_i * P_i``: ``f_i`` fraction of the ``T k`` assignments that chose
    expert ``i`` (not differentiable), ``P_i`` mean router probability of expert ``i``.  Equals
    ``alpha`` for a perfectly even load, up to ``alpha * N`` when every token picks one expert."""
    n = probs.shape[-1]
    f = F.one_hot(experts.reshape(-1), n).float().mean(0)
    return alpha * n * (f * probs.mean(0)).sum()


class Expert(nn.Module):
    """One expert: the transformer MLP, ``d -> hidden -> d`` with GeLU."""

    def __init__(self, d: int, hidden: int):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(d, hidden), nn.Linear(hidden, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(F.gelu(self.fc1(x)))


class MoE(nn.Module):
    """Single-device MoE layer on (T, d) tokens: router, top-k, capacity, experts.

    ``forward`` returns ``(y (T, d), stats)`` with ``stats["aux_loss"]`` (differentiable),
    ``stats["load"]`` (kept assignments per expert), ``stats["dropped"]`` (assignments dropped).
    """

    def __init__(self, d: int, hidden: int, n_experts: int, k: int = 1,
                 capacity_factor: float = 1.25, alpha: float = 0.01, seed: int = 0):  # fmt: skip
        super().__init__()
        with torch.random.fork_rng():  # seeded weights, global random state left untouched
            torch.manual_seed(seed)
            self.router = nn.Linear(d, n_experts, bias=False)
            self.experts = nn.ModuleList(Expert(d, hidden) for _ in range(n_experts))
        self.k, self.capacity_factor, self.alpha = k, capacity_factor, alpha

    def route(self, x: torch.Tensor):
        """Routing of (T, d) tokens: (probs, experts, gates, keep, slot, stats)."""
        n = self.router.out_features
        probs, experts, gates = top_k_gating(self.router(x), self.k)
        cap = expert_capacity(x.shape[0], n, self.k, self.capacity_factor)
        keep, slot, wanted = dispatch_plan(experts, n, cap)
        load = torch.bincount(experts[keep], minlength=n)
        stats = {
            "aux_loss": load_balancing_loss(probs, experts, self.alpha),
            "load": load,
            "dropped": int((~keep).sum()),
            "capacity": cap,
        }
        return experts, gates, keep, stats

    def forward(self, x: torch.Tensor):
        experts, gates, keep, stats = self.route(x)
        y = torch.zeros_like(x)
        for e, expert in enumerate(self.experts):
            tok, choice = torch.nonzero((experts == e) & keep, as_tuple=True)
            if tok.numel():
                y = y.index_add(0, tok, expert(x[tok]) * gates[tok, choice, None])
        return y, stats


class _AllToAll(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, out_splits, in_splits, group):
        ctx.splits, ctx.group = (out_splits, in_splits), group
        out = x.new_empty((sum(out_splits), *x.shape[1:]))
        dist.all_to_all_single(out, x.contiguous(), out_splits, in_splits, group=group)
        return out

    @staticmethod
    def backward(ctx, g):
        out_splits, in_splits = ctx.splits
        back = g.new_empty((sum(in_splits), *g.shape[1:]))
        dist.all_to_all_single(back, g.contiguous(), in_splits, out_splits, group=ctx.group)
        return back, None, None, None


def all_to_all_differentiable(x, out_splits: list[int], in_splits: list[int], group=None):
    """``all_to_all_single`` along dim 0 whose backward sends the gradients back the same way."""
    return _AllToAll.apply(x, list(out_splits), list(in_splits), group)


class ExpertParallelMoE(nn.Module):
    """Rank ``rank``'s part of ``full``: the router (replicated) and experts
    ``[rank N/P, (rank+1) N/P)``.  ``forward(x)`` routes this rank's (T, d) tokens, dispatches
    them to the experts' ranks, and combines; returns ``(y, stats)`` like :class:`MoE`.
    Router gradients are this rank's share: all-reduce them (as data parallelism does)."""

    def __init__(self, full: MoE, rank: int, size: int, group=None):
        super().__init__()
        n = len(full.experts)
        if n % size:
            raise ValueError(f"ExpertParallelMoE: {n} experts do not split over {size} ranks")
        self.per, self.size, self.rank, self.group = n // size, size, rank, group
        self.router = copy.deepcopy(full.router)
        self.experts = copy.deepcopy(full.experts[rank * self.per : (rank + 1) * self.per])
        self.k, self.capacity_factor, self.alpha = full.k, full.capacity_factor, full.alpha

    route = MoE.route

    def forward(self, x: torch.Tensor):
        experts, gates, keep, stats = self.route(x)
        tok, choice = torch.nonzero(keep, as_tuple=True)
        ex = experts[tok, choice]
        order = torch.argsort(ex, stable=True)  # group the kept assignments by expert (= rank)
        tok, choice, ex = tok[order], choice[order], ex[order]
        n = self.per * self.size
        per_expert = torch.bincount(ex, minlength=n)  # what this rank sends to each expert
        # 1) exchange counts: rank j learns how many tokens each rank sends to each of its experts
        got_counts = torch.empty_like(per_expert)
        dist.all_to_all_single(got_counts, per_expert, group=self.group)
        got_counts = got_counts.view(self.size, self.per)  # (source rank, local expert)
        send = per_expert.view(self.size, self.per).sum(1).tolist()
        recv = got_counts.sum(1).tolist()
        # 2) dispatch the tokens, 3) run the local experts, 4) combine back
        inbox = all_to_all_differentiable(x[tok], recv, send, self.group)
        out, at = [], 0
        for src in range(self.size):
            for e in range(self.per):
                c = int(got_counts[src, e])
                out.append(self.experts[e](inbox[at : at + c]))
                at += c
        done = torch.cat(out) if out else inbox
        back = all_to_all_differentiable(done, send, recv, self.group)
        y = torch.zeros_like(x).index_add(0, tok, back * gates[tok, choice, None])
        return y, stats


def train_load(
    alpha: float,
    steps: int = 60,
    n_experts: int = 4,
    d: int = 16,
    tokens: int = 128,
    k: int = 1,
    lr: float = 0.05,
    seed: int = 0,
) -> torch.Tensor:
    """Train a small MoE to fit a fixed random MLP, starting from a router that favours expert 0;
    returns the kept assignments per expert at every step, ``(steps, n_experts)``.

    With ``alpha = 0`` nothing pushes the router to spread the load; with ``alpha > 0`` the
    auxiliary loss does.  Capacity factor 2, so overloaded experts still drop tokens.
    """
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny tensors: one thread is several times faster than many
    try:
        return _train_load(alpha, steps, n_experts, d, tokens, k, lr, seed)
    finally:
        torch.set_num_threads(threads)


def _train_load(alpha, steps, n_experts, d, tokens, k, lr, seed) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    moe = MoE(d, 2 * d, n_experts, k=k, capacity_factor=2.0, alpha=alpha, seed=seed)
    with torch.random.fork_rng():
        torch.manual_seed(seed + 1)
        teacher = Expert(d, 2 * d)
    with torch.no_grad():
        moe.router.weight[0] += 2.0  # tokens have a positive mean: expert 0 wins most of them
    opt = torch.optim.Adam(moe.parameters(), lr=lr)
    loads = []
    for _ in range(steps):
        x = torch.randn(tokens, d, generator=gen) + 0.5
        with torch.no_grad():
            target = teacher(x)
        y, st = moe(x)
        loss = F.mse_loss(y, target) + st["aux_loss"]
        opt.zero_grad()
        loss.backward()
        opt.step()
        loads.append(st["load"])
    return torch.stack(loads)
