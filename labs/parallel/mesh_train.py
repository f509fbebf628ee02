"""One training step of a tiny GPT on a 4-D mesh: tensor x context x pipeline x data parallel.

The model is :class:`labs.gpt.GPT` (untied head).  On a :class:`~labs.parallel.mesh.Mesh` with
dimensions ``tp``, ``cp``, ``pp`` and ``dp`` every rank holds

* **pp**: the blocks of its pipeline stage (stage 0 also the embeddings, the last stage also the
  final layer norm and the head); activations go forward and their gradients back with
  ``send`` / ``recv`` on the ``pp`` group, GPipe order (all forwards, then all backwards);
* **tp**: its heads and MLP hidden units (Megatron: q, k, v and up_proj split by output rows,
  o_proj and down_proj by input columns); with sequence parallelism (``sp=True``) the tokens
  between the parallel regions are split over ``tp`` too, and an all-gather / reduce-scatter on
  the ``tp`` group replaces each all-reduce;
* **cp**: a zig-zag shard of every sequence (:func:`labs.parallel.ring_attention.shard_index`);
  attention is ring attention on the ``cp`` group;
* **dp**: a slice of the batch.

Weights are replicated over ``dp`` and ``cp``, and each such rank saw different tokens, so the
gradients are summed over the joint ``dp+cp`` group (one flat bucket).  With ``sp`` the weights
that are replicated over ``tp`` (layer norms, embeddings, head, row-parallel biases) saw only
this rank's tokens as well, so they are summed over ``tp`` too.  Every rank's loss is its tokens'
share of the global mean, so the summed gradients are those of the global mean loss.

:func:`mesh_step` is the per-rank program (it also runs inside a torchrun process);
:func:`train_step` launches it on emulated ranks, :func:`reference_step` is the single-device
step it must equal, and :func:`collective_table` tallies the trace by group kind.
"""

from __future__ import annotations

import copy
from collections import Counter

import torch
import torch.nn.functional as F
from torch import nn

from labs import dist, gpt
from labs.parallel.mesh import Mesh
from labs.parallel.ring_attention import ring_attention, shard_index
from labs.parallel.sequence_parallel import gather_seq, scatter_seq
from labs.parallel.tensor_parallel import copy_to_tp, reduce_from_tp

__all__ = ["KINDS", "tiny_gpt", "shard_of", "mesh_step", "train_step", "reference_step",
           "collective_table"]  # fmt: skip

KINDS = ["tp", "cp", "pp", ["dp", "cp"]]  # the groups each rank creates, in this order
_ROWS = ("q_proj", "k_proj", "v_proj", "up_proj")  # column parallel: split output features
_COLS = ("o_proj.weight", "down_proj.weight")  # row parallel: split input features


def tiny_gpt(vocab: int = 11, seq_len: int = 12, width: int = 16, heads: int = 4,
             layers: int = 2, seed: int = 0) -> gpt.GPT:  # fmt: skip
    """A float64 :class:`labs.gpt.GPT` (untied head), its weights perturbed by N(0, 0.3^2) so
    attention is far from uniform and every gain and bias matters in a comparison."""
    cfg = gpt.GPTConfig(vocab_size=vocab, block_size=seq_len, n_layer=layers, n_head=heads,
                        n_embd=width, tie_weights=False, seed=seed)  # fmt: skip
    model = gpt.GPT(cfg).double()
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.3 * torch.randn(p.shape, generator=gen, dtype=p.dtype))
    return model


def shard_of(name: str, full: torch.Tensor, tp_rank: int, tp: int) -> torch.Tensor:
    """The slice of the full parameter (or gradient) ``name`` that TP rank ``tp_rank`` holds."""
    if any(f".{m}." in name for m in _ROWS):
        k = full.shape[0] // tp
        return full[tp_rank * k : (tp_rank + 1) * k]
    if name.endswith(_COLS):
        k = full.shape[1] // tp
        return full[:, tp_rank * k : (tp_rank + 1) * k]
    return full  # replicated over tp


def _split_over_tp(name: str) -> bool:
    return any(f".{m}." in name for m in _ROWS) or name.endswith(_COLS)


def _stage_model(model: gpt.GPT, stage: int, pp: int, tp_rank: int, tp: int) -> nn.Module:
    """This rank's part of ``model``: parameter names as in the full model, TP slices cloned."""
    n = model.config.n_layer // pp
    part = nn.Module()
    part.blocks = nn.ModuleDict({str(i): copy.deepcopy(model.blocks[i])
                                 for i in range(stage * n, (stage + 1) * n)})  # fmt: skip
    if stage == 0:
        part.tok_emb, part.pos_emb = copy.deepcopy(model.tok_emb), copy.deepcopy(model.pos_emb)
    if stage == pp - 1:
        part.ln_f, part.lm_head = copy.deepcopy(model.ln_f), copy.deepcopy(model.lm_head)
    for name, p in list(part.named_parameters()):
        owner, attr = name.rsplit(".", 1)
        mine = shard_of(name, p.detach(), tp_rank, tp).clone()
        setattr(part.get_submodule(owner), attr, nn.Parameter(mine))
    return part


def _block(blk: gpt.Block, x: torch.Tensor, heads: int, seq_len: int, g: dict, sp: bool):
    """One pre-norm block on this rank.  x: ``(b, n_cp/tp, d)`` with sp, else ``(b, n_cp, d)``,
    where ``n_cp`` is this CP rank's share of the sequence; returns the same shape."""
    enter, leave = (gather_seq, scatter_seq) if sp else (copy_to_tp, reduce_from_tp)
    a, m = blk.attn, blk.mlp
    h = enter(blk.ln_1(x), g["tp"])  # (b, n_cp, d): every token of this CP shard
    b, n, _ = h.shape
    # q, k, v: (b, heads/tp, n_cp, dh), this rank's heads
    q, k, v = (F.linear(h, p.weight, p.bias).view(b, n, heads, -1).transpose(1, 2)
               for p in (a.q_proj, a.k_proj, a.v_proj))  # fmt: skip
    o = ring_attention(q, k, v, causal=True, layout="zigzag", seq_len=seq_len, group=g["cp"])
    o = o.transpose(1, 2).reshape(b, n, -1)  # (b, n_cp, d/tp)
    x = x + leave(F.linear(o, a.o_proj.weight), g["tp"]) + a.o_proj.bias
    u = F.gelu(F.linear(enter(blk.ln_2(x), g["tp"]), m.up_proj.weight, m.up_proj.bias))
    return x + leave(F.linear(u, m.down_proj.weight), g["tp"]) + m.down_proj.bias


def mesh_step(model: gpt.GPT, mesh: Mesh, idx: torch.Tensor, targets: torch.Tensor,
              micro_batches: int = 1, sp: bool = True, lr: float = 0.1) -> dict:  # fmt: skip
    """The per-rank program: one forward, backward and SGD step of ``model`` on ``mesh``.

    Every rank must call it with the same arguments (the full model and batch; each rank takes
    its part).  idx, targets: ``(batch, seq_len)`` int64.  Returns this rank's
    ``{"coords": mesh coordinates, "loss": global mean cross entropy (0-dim, every rank),
    "grads": {name: gradient of its shard}, "params": {name: shard after the SGD step}}``.
    """
    _check(model, mesh, idx, targets, micro_batches, sp)
    if dist.get_world_size() != mesh.world_size:
        raise ValueError(f"mesh_step: the mesh {mesh.dims} has {mesh.world_size} ranks but the "
                         f"world has {dist.get_world_size()}; launch one rank per mesh point")  # fmt: skip
    c = mesh.coords(dist.get_rank())
    g = mesh.new_groups(KINDS)
    tp, cp, pp, dp = (mesh.dims[k] for k in ("tp", "cp", "pp", "dp"))
    stage, first, last = c["pp"], c["pp"] == 0, c["pp"] == pp - 1
    part = _stage_model(model, stage, pp, c["tp"], tp)
    heads, seq_len = model.config.n_head // tp, idx.shape[1]
    pos = shard_index(seq_len, cp, "zigzag")[c["cp"]]  # global positions of my CP shard
    if sp:
        pos = pos.chunk(tp)[c["tp"]]
    rows = torch.arange(len(idx)).chunk(dp)[c["dp"]].chunk(micro_batches)
    total = idx.numel()  # the loss is a mean over every token of the global batch
    saved, loss = [], torch.zeros((), dtype=model.tok_emb.weight.dtype)
    for r in rows:  # GPipe: every micro-batch forward ...
        if first:
            x = part.tok_emb(idx[r][:, pos]) + part.pos_emb(pos)
        else:
            x = torch.empty(len(r), len(pos), model.config.n_embd, dtype=loss.dtype)
            dist.recv(x, group=g["pp"], group_src=stage - 1)
            x.requires_grad_()
        y = x
        for blk in part.blocks.values():
            y = _block(blk, y, heads, seq_len, g, sp)
        if last:
            logits = part.lm_head(part.ln_f(y))
            y = F.cross_entropy(logits.flatten(0, 1), targets[r][:, pos].flatten(),
                                reduction="sum") / total  # fmt: skip
            loss = loss + y.detach()
        else:
            dist.send(y.detach().contiguous(), group=g["pp"], group_dst=stage + 1)
        saved.append((x, y))
    for x, y in saved:  # ... then every micro-batch backward
        if last:
            y.backward()
        else:
            dy = torch.empty_like(y)
            dist.recv(dy, group=g["pp"], group_src=stage + 1)
            y.backward(dy)
        if not first:
            dist.send(x.grad.contiguous(), group=g["pp"], group_dst=stage - 1)
    params = dict(part.named_parameters())
    _sum_grads(list(params.values()), g["dp+cp"])  # replicas over dp and cp saw other tokens
    if sp:  # replicated over tp, but each tp rank saw only its own tokens
        _sum_grads([p for n, p in params.items() if not _split_over_tp(n)], g["tp"])
    if last:
        dist.all_reduce(loss, group=g["dp+cp"])
        if sp:
            dist.all_reduce(loss, group=g["tp"])
    dist.broadcast(loss, group=g["pp"], group_src=pp - 1)  # every rank reports the loss
    grads = {n: p.grad.detach().clone() for n, p in params.items()}
    with torch.no_grad():
        for p in params.values():
            p -= lr * p.grad
    return {"coords": c, "loss": loss, "grads": grads,
            "params": {n: p.detach().clone() for n, p in params.items()}}  # fmt: skip


def _sum_grads(params: list[nn.Parameter], group) -> None:
    """All-reduce (sum) the gradients of ``params`` over ``group`` as one flat bucket."""
    flat = torch.cat([p.grad.flatten() for p in params])
    dist.all_reduce(flat, group=group)
    for p, chunk in zip(params, flat.split([p.numel() for p in params])):
        p.grad.copy_(chunk.view_as(p))


def _check(model: gpt.GPT, mesh: Mesh, idx: torch.Tensor, targets: torch.Tensor,
           micro_batches: int, sp: bool) -> None:  # fmt: skip
    """Raise a ValueError naming the mismatch if ``mesh`` cannot run this model and batch."""
    if sorted(mesh.dims) != ["cp", "dp", "pp", "tp"]:
        raise ValueError(f"mesh_train: the mesh needs dimensions tp, cp, pp, dp; got {mesh.dims}")
    cfg, (tp, cp, pp, dp) = model.config, (mesh.dims[k] for k in ("tp", "cp", "pp", "dp"))
    seq_len = idx.shape[1] if idx.dim() == 2 else 0
    problems = [
        (idx.dim() != 2, f"idx must be (batch, seq_len), got shape {tuple(idx.shape)}"),
        (targets.shape != idx.shape, f"targets {tuple(targets.shape)} must match idx "
         f"{tuple(idx.shape)}"),
        (cfg.tie_weights, "a tied embedding and head would need one more all-reduce, between "
         "the first and the last stage; build the model with tie_weights=False"),
        (not cfg.bias or cfg.dropout, "the step expects biases and no dropout "
         f"(bias=True, dropout=0), got bias={cfg.bias}, dropout={cfg.dropout}"),
        (cfg.n_head % tp, f"n_head={cfg.n_head} heads do not split over tp={tp} ranks"),
        (cfg.n_layer % pp, f"n_layer={cfg.n_layer} layers do not split into pp={pp} stages"),
        (len(idx) % (dp * micro_batches), f"a batch of {len(idx)} sequences does not split "
         f"into dp={dp} slices of micro_batches={micro_batches}"),
        (seq_len < 2 * cp, f"seq_len={seq_len} is too short for cp={cp}: zig-zag ring attention "
         f"needs 2 chunks of at least one token per rank ({2 * cp} tokens)"),
        (seq_len > cfg.block_size, f"seq_len={seq_len} exceeds block_size={cfg.block_size}"),
    ]  # fmt: skip
    for bad, what in problems:
        if bad:
            raise ValueError(f"mesh_train on {mesh.dims}: {what}")
    lengths = [len(i) for i in shard_index(seq_len, cp, "zigzag")]
    if sp and any(n % tp for n in lengths):
        raise ValueError(
            f"mesh_train on {mesh.dims}: with sp=True every CP shard must split over tp={tp} "
            f"ranks, but seq_len={seq_len} gives shards of {lengths} tokens; pick seq_len a "
            f"multiple of {2 * cp * tp} or pass sp=False"
        )


def train_step(model: gpt.GPT, mesh: Mesh, idx: torch.Tensor, targets: torch.Tensor,
               micro_batches: int = 1, sp: bool = True, lr: float = 0.1) -> list[dict]:  # fmt: skip
    """:func:`mesh_step` on ``mesh.world_size`` emulated ranks; returns the per-rank results
    (index = global rank).  Checks the mesh against the model and batch first."""
    _check(model, mesh, idx, targets, micro_batches, sp)
    return dist.launch(mesh_step, mesh.world_size, model, mesh, idx, targets,
                       micro_batches=micro_batches, sp=sp, lr=lr)  # fmt: skip


def reference_step(model: gpt.GPT, idx: torch.Tensor, targets: torch.Tensor,
                   lr: float = 0.1) -> dict:  # fmt: skip
    """The same step on one device (``model`` is not changed): ``{"loss", "grads", "params"}``
    with full tensors keyed by parameter name."""
    model = copy.deepcopy(model)
    logits = model(idx)
    loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten())
    loss.backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters()}
    with torch.no_grad():
        for p in model.parameters():
            p -= lr * p.grad
    return {"loss": loss.detach(), "grads": grads,
            "params": {n: p.detach().clone() for n, p in model.named_parameters()}}  # fmt: skip


def collective_table(trace: dist.Trace, mesh: Mesh) -> list[tuple[str, str, int, int]]:
    """``(operation, group kind, calls, bytes sent)`` summed over all ranks, from an emulated
    run's trace.  Point-to-point messages count once, on the sending side, as ``"send/recv"``;
    a group of one rank moves nothing and is left out.  Where two kinds have the same ranks
    (``cp`` and ``dp+cp`` when dp is 1) the kind reads ``"cp = dp+cp"``."""
    kinds: dict[tuple, str] = {}
    for kind in KINDS:
        name = kind if isinstance(kind, str) else "+".join(kind)
        for ranks in mesh.groups(kind):
            key = tuple(sorted(ranks))
            kinds[key] = f"{kinds[key]} = {name}" if key in kinds else name
    calls, sent = Counter(), Counter()
    for rec in (r for rs in trace.records for r in rs):
        if rec.kind == "compute" or rec.op in ("recv", "irecv") or len(rec.group) < 2:
            continue
        key = ("send/recv" if rec.kind == "p2p" else rec.op, kinds[tuple(sorted(rec.group))])
        calls[key] += 1
        sent[key] += rec.bytes_sent
    return [(op, kind, calls[op, kind], sent[op, kind]) for op, kind in sorted(calls)]
