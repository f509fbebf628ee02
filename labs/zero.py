"""ZeRO stages 0-3 on emulated ranks, with a memory ledger measured from the actual tensors.

Rajbhandari et al. (2020), "ZeRO: Memory Optimizations Toward Training Trillion Parameter
Models", remove the redundancy of data parallelism in three steps.  With ``N`` ranks:

========  =======================================  ==========================  ===============
stage     what each rank keeps                     communication per step      paper's formula
========  =======================================  ==========================  ===============
0 (DDP)   all weights, gradients, optimizer state  all-reduce grads (2 psi)    (2 + 2 + K) psi
1         optimizer state of 1/N of the weights    reduce-scatter + all-gather 4 psi + K psi / N
2         ... and 1/N of the gradients             same (2 psi)                2 psi + (2+K) psi/N
3         ... and 1/N of the weights               all-gather twice + RS (3 psi) (2+2+K) psi / N
========  =======================================  ==========================  ===============

(psi parameters, ``K = 12`` bytes of optimizer state per parameter in mixed precision.)

:class:`ZeroTrainer` runs one rank of that scheme for any ``nn.Module`` whose ``loss(x, y)``
returns a scalar (the tiny GPT of :mod:`labs.gpt`), through :mod:`labs.dist`: call it inside
``dist.launch``.  Everything is fp32 here, so the per-parameter bytes are 4 + 4 + 8 (Adam's two
moments) rather than 2 + 2 + 12; :func:`zero_bytes_per_rank` takes the byte sizes as arguments.

Sharding rule: every parameter is flattened and zero-padded to a multiple of ``N`` elements; rank
``r`` owns the ``r``-th of ``N`` equal slices.  So any world size works for any shape (the padding
is at most ``N - 1`` elements per tensor and is counted in the ledger).

Stage 3 gathers a block's weights just before its forward (a forward pre-hook), frees them after
it (the storage is resized to 0 bytes, like FSDP), gathers them again when backward reaches the
block (a hook on the block's output gradient), and reduce-scatters each gradient as soon as
autograd has accumulated it (``register_post_accumulate_grad_hook``).  The parameters outside
the blocks (embeddings, final norm, head) form one more unit handled the same way around the
whole forward.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import torch
import torch.nn as nn

from labs import dist

__all__ = [
    "zero_bytes_per_rank",
    "zero_comm_bytes_per_rank",
    "padded_numel",
    "ZeroTrainer",
]


def zero_bytes_per_rank(
    n_params: float,
    world_size: int,
    stage: int,
    param_bytes: float = 2.0,
    grad_bytes: float = 2.0,
    optim_bytes: float = 12.0,
) -> dict[str, float]:
    """Model-state bytes per rank under ZeRO ``stage`` (0 = plain data parallelism).

    Defaults are the paper's mixed-precision Adam (2 + 2 + 12 bytes per parameter); pass
    ``4, 4, 8`` for fp32 Adam.  Activations are not included.

    Returns:
        ``{"weights", "gradients", "optimizer", "total"}`` in bytes.
    """
    if stage not in (0, 1, 2, 3):
        raise ValueError(f"ZeRO stage must be 0, 1, 2 or 3, got {stage!r}")
    if world_size < 1:
        raise ValueError(f"world_size must be >= 1, got {world_size}")
    n = world_size
    out = {
        "weights": n_params * param_bytes / (n if stage >= 3 else 1),
        "gradients": n_params * grad_bytes / (n if stage >= 2 else 1),
        "optimizer": n_params * optim_bytes / (n if stage >= 1 else 1),
    }
    out["total"] = out["weights"] + out["gradients"] + out["optimizer"]
    return out


def zero_comm_bytes_per_rank(
    n_params: float, world_size: int, stage: int, bytes_per_elem: float = 2.0
) -> float:
    """Bytes one rank sends per step with ring collectives: ``2(N-1)/N psi`` for stages 0-2
    (all-reduce, or reduce-scatter + all-gather), ``3(N-1)/N psi`` for stage 3."""
    if stage not in (0, 1, 2, 3):
        raise ValueError(f"ZeRO stage must be 0, 1, 2 or 3, got {stage!r}")
    k = 3 if stage == 3 else 2
    return k * (world_size - 1) / world_size * n_params * bytes_per_elem


def padded_numel(numel: int, world_size: int) -> int:
    """``numel`` rounded up to a multiple of ``world_size`` (each rank then owns an equal slice)."""
    return world_size * math.ceil(numel / world_size)


def _flat_view(storage: torch.UntypedStorage, numel: int, dtype: torch.dtype) -> torch.Tensor:
    """A fresh 1-D tensor over ``storage`` (its own version counter: writes bump nothing)."""
    return torch.empty(0, dtype=dtype).set_(storage, 0, (numel,))


class ZeroTrainer:
    """One rank of ZeRO-``stage`` data-parallel training with AdamW; call inside ``dist.launch``.

    Args:
        model: the full model, built identically (same seed) on every rank; ``model.loss(x, y)``
            must return the mean loss of a local batch.
        stage: 0 (data parallel), 1, 2 or 3.
        lr, betas, weight_decay, eps: AdamW hyperparameters (as ``torch.optim.AdamW``).
        units: modules whose weights stage 3 gathers and frees together (default:
            ``model.blocks``); the remaining parameters form one more unit around the forward.

    Each :meth:`step` trains on this rank's part of the global batch and returns its local loss.
    """

    def __init__(
        self,
        model: nn.Module,
        stage: int,
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.95),
        weight_decay: float = 0.0,
        eps: float = 1e-8,
        units: Iterable[nn.Module] | None = None,
    ):
        if stage not in (0, 1, 2, 3):
            raise ValueError(f"ZeroTrainer: stage must be 0, 1, 2 or 3, got {stage!r}")
        self.model, self.stage = model, stage
        self.rank, self.world = dist.get_rank(), dist.get_world_size()
        self.names: dict[nn.Parameter, str] = {}
        for name, p in model.named_parameters():  # tied weights appear once
            self.names[p] = name
        self.params = list(self.names)
        n = self.world
        self.numel = {p: p.numel() for p in self.params}
        self.shard_len = {p: padded_numel(p.numel(), n) // n for p in self.params}
        self.peak = 0
        self._gathered: set[nn.Parameter] = set()
        with torch.no_grad():
            for p in self.params:  # give every weight a padded storage
                buf = torch.zeros(padded_numel(p.numel(), n), dtype=p.dtype)
                buf[: p.numel()] = p.reshape(-1)
                p.data = buf[: p.numel()].view(p.shape)
        if stage == 0:
            self.shards = {p: p for p in self.params}
        elif stage in (1, 2):  # the optimizer updates this rank's slice of the full weight in place
            self.shards = {p: self._slice(self._padded(p)) for p in self.params}
        else:  # stage 3: the slice is the only persistent copy; the full weight is freed
            self.shards = {p: self._slice(self._padded(p)).clone() for p in self.params}
            for p in self.params:
                p.untyped_storage().resize_(0)
        for s in self.shards.values():
            s.requires_grad_(True)
        self.optimizer = torch.optim.AdamW(
            list(self.shards.values()), lr=lr, betas=betas, eps=eps, weight_decay=weight_decay
        )
        self._hooks = []
        if stage >= 2:
            for p in self.params:
                self._hooks.append(p.register_post_accumulate_grad_hook(self._reduce_scatter_hook))
        if stage == 3:
            self._install_stage3_hooks(units)

    # -- sharding helpers ---------------------------------------------------------------------
    def _padded(self, p: nn.Parameter) -> torch.Tensor:
        """The flat padded buffer behind full weight ``p``."""
        return _flat_view(p.untyped_storage(), self.shard_len[p] * self.world, p.dtype)

    def _slice(self, flat: torch.Tensor) -> torch.Tensor:
        k = flat.numel() // self.world
        return flat[self.rank * k : (self.rank + 1) * k]

    def _reduce_grad(self, p: nn.Parameter) -> None:
        """Reduce-scatter ``p.grad`` (summed over ranks, divided by N) into its shard's grad."""
        k = self.shard_len[p]
        flat = torch.zeros(k * self.world, dtype=p.dtype)
        flat[: self.numel[p]] = p.grad.reshape(-1)
        out = torch.empty(k, dtype=p.dtype)
        dist.reduce_scatter_tensor(out, flat)
        out /= self.world
        shard = self.shards[p]
        shard.grad = out if shard.grad is None else shard.grad + out

    def _reduce_grad_in_place(self, p: nn.Parameter) -> None:
        """Stage 1: keep the full gradient; reduce-scatter into this rank's slice of it."""
        k = self.shard_len[p]
        flat = torch.zeros(k * self.world, dtype=p.dtype)
        flat[: self.numel[p]] = p.grad.reshape(-1)
        p.grad = flat[: self.numel[p]].view(p.shape)
        mine = self._slice(flat)
        dist.reduce_scatter_tensor(mine, flat)
        mine /= self.world
        self.shards[p].grad = mine

    def _reduce_scatter_hook(self, p: nn.Parameter) -> None:
        self._observe()
        self._reduce_grad(p)
        p.grad = None  # stages 2 and 3 keep only the shard of the gradient
        if self.stage == 3:
            unit = self._unit_of[p]
            self._pending[unit].discard(p)
            if not self._pending[unit]:
                self._free(unit)

    # -- stage 3: gather before use, free after ------------------------------------------------
    def _install_stage3_hooks(self, units: Iterable[nn.Module] | None) -> None:
        mods = list(units) if units is not None else list(getattr(self.model, "blocks", []))
        in_units: set[nn.Parameter] = set()
        self._units: list[list[nn.Parameter]] = []
        for m in mods:
            ps = [p for p in m.parameters() if p in self.names and p not in in_units]
            in_units.update(ps)
            self._units.append(ps)
        self._units.append([p for p in self.params if p not in in_units])  # the root unit
        self._unit_of = {p: i for i, ps in enumerate(self._units) for p in ps}
        self._pending: dict[int, set[nn.Parameter]] = {}
        root = len(self._units) - 1
        for i, m in enumerate([*mods, self.model]):
            unit = root if m is self.model else i
            self._hooks.append(m.register_forward_pre_hook(self._pre_forward(unit)))
            self._hooks.append(m.register_forward_hook(self._post_forward(unit)))

    def _pre_forward(self, unit: int):
        def hook(module, args):
            self._pending[unit] = set(self._units[unit])
            self._gather(unit)

        return hook

    def _post_forward(self, unit: int):
        def regather(grad):
            self._gather(unit)

        def hook(module, args, output):
            self._observe()
            self._free(unit)
            if torch.is_tensor(output) and output.requires_grad:
                output.register_hook(regather)

        return hook

    def _gather(self, unit: int) -> None:
        for p in self._units[unit]:
            if p in self._gathered:
                continue
            k = self.shard_len[p]
            st = p.untyped_storage()
            st.resize_(k * self.world * p.element_size())
            dist.all_gather_into_tensor(
                _flat_view(st, k * self.world, p.dtype), self.shards[p].detach()
            )
            self._gathered.add(p)

    def _free(self, unit: int) -> None:
        for p in self._units[unit]:
            if p in self._gathered:
                p.untyped_storage().resize_(0)
                self._gathered.discard(p)

    # -- the training step ----------------------------------------------------------------------
    def _observe(self) -> None:
        self.peak = max(self.peak, self.ledger()["total"])

    def step(self, x: torch.Tensor, y: torch.Tensor) -> float:
        """One optimizer step on this rank's batch ``(x, y)``; returns this rank's mean loss.

        The global loss is the mean over ranks of the returned values (equal local batches).
        """
        loss = self.model.loss(x, y)
        self._observe()
        loss.backward()
        if self.stage == 0:
            for p in self.params:
                dist.all_reduce(p.grad)
                p.grad /= self.world
        elif self.stage == 1:
            for p in self.params:
                self._reduce_grad_in_place(p)
        self._observe()
        self.optimizer.step()
        if self.stage in (1, 2):  # every rank updated its slice: gather the full weights back
            with torch.no_grad():
                for p in self.params:
                    flat = self._padded(p)
                    dist.all_gather_into_tensor(flat, self._slice(flat).clone())
        self._observe()
        self.last_ledger = self.ledger()
        self.optimizer.zero_grad(set_to_none=True)
        for p in self.params:
            p.grad = None
        return float(loss.detach())

    # -- memory ledger ----------------------------------------------------------------------------
    def ledger(self) -> dict[str, int]:
        """Bytes of model state this rank holds right now, from the tensors' storages.

        ``weights``: full weights currently materialised plus the shards (a storage shared by
        both counts once); ``gradients``: full and shard gradients; ``optimizer``: AdamW's
        ``exp_avg`` and ``exp_avg_sq`` (its 4-byte step counters are left out).
        """
        seen: dict[int, int] = {}

        def add(tensors):
            total = 0
            for t in tensors:
                if t is None:
                    continue
                st = t.untyped_storage()
                if st.data_ptr() not in seen and st.nbytes():
                    seen[st.data_ptr()] = st.nbytes()
                    total += st.nbytes()
            return total

        w = add([*self.params, *self.shards.values()])
        g = add([*(p.grad for p in self.params), *(s.grad for s in self.shards.values())])
        opt = [v for st in self.optimizer.state.values() for v in st.values() if torch.is_tensor(v)]
        o = add([v for v in opt if v.dim() > 0])
        return {"weights": w, "gradients": g, "optimizer": o, "total": w + g + o}

    # -- checkpoints ------------------------------------------------------------------------------
    def _gather_full(self, p: nn.Parameter, shard: torch.Tensor) -> torch.Tensor:
        if self.stage == 0:  # nothing is sharded
            return shard.detach().reshape(p.shape).clone()
        flat = torch.empty(self.shard_len[p] * self.world, dtype=shard.dtype)
        dist.all_gather_into_tensor(flat, shard.detach().contiguous())
        return flat[: self.numel[p]].view(p.shape).clone()

    def full_state(self) -> dict[str, Any]:
        """The unsharded model and optimizer state (every rank must call; all get a copy).

        Format shared with :mod:`labs.fsdp_train`: ``{"model": state_dict, "optim": {name:
        {"exp_avg", "exp_avg_sq", "step"}}}`` with parameter names as in ``named_parameters``.
        """
        full = {p: self._gather_full(p, self.shards[p]) for p in self.params}
        model_sd = {}
        for key, t in self.model.state_dict(keep_vars=True).items():
            model_sd[key] = full[t].clone() if t in full else t.detach().clone()
        optim = {}
        for p in self.params:
            st = self.optimizer.state.get(self.shards[p], {})
            if st:
                optim[self.names[p]] = {
                    "exp_avg": self._gather_full(p, st["exp_avg"]),
                    "exp_avg_sq": self._gather_full(p, st["exp_avg_sq"]),
                    "step": float(st["step"]),
                }
        return {"model": model_sd, "optim": optim}

    @torch.no_grad()
    def load_full_state(self, state: dict[str, Any]) -> None:
        """Load a state made by :meth:`full_state` (or by any path of :mod:`labs.fsdp_train`)."""
        model_sd, optim = state["model"], state["optim"]
        n = self.world

        def padded(t: torch.Tensor, p: nn.Parameter) -> torch.Tensor:
            buf = torch.zeros(self.shard_len[p] * n, dtype=p.dtype)
            buf[: p.numel()] = t.reshape(-1)
            return buf

        for p in self.params:
            name = self.names[p]
            if self.stage == 3:
                self.shards[p].copy_(self._slice(padded(model_sd[name], p)))
            else:
                self._padded(p).copy_(padded(model_sd[name], p))
            if name not in optim:
                continue
            st = self.optimizer.state[self.shards[p]]
            for key in ("exp_avg", "exp_avg_sq"):
                v = optim[name][key]
                st[key] = (
                    v.reshape(p.shape).clone()
                    if self.stage == 0
                    else self._slice(padded(v, p)).clone()
                )
            st["step"] = torch.tensor(float(optim[name]["step"]))

    def shard_state(self) -> dict[str, Any]:
        """This rank's shards of the weights and of Adam's state, by parameter name (no gathers)."""
        out: dict[str, Any] = {"stage": self.stage, "model": {}, "optim": {}}
        for p, s in self.shards.items():
            name = self.names[p]
            out["model"][name] = s.detach().clone()
            st = self.optimizer.state.get(s)
            if st:
                out["optim"][name] = {
                    "exp_avg": st["exp_avg"].clone(),
                    "exp_avg_sq": st["exp_avg_sq"].clone(),
                    "step": float(st["step"]),
                }
        return out

    @torch.no_grad()
    def load_shard_state(self, state: dict[str, Any], source: str = "shard") -> None:
        """Load what :meth:`shard_state` returned on this rank (same world size and stage).

        Raises:
            ValueError: the shard was written by another ZeRO stage, or a shard's size differs
                (another model or world size); nothing is loaded then.
        """
        if state.get("stage") != self.stage:
            raise ValueError(
                f"{source}: written by ZeRO-{state.get('stage')}, this run is ZeRO-{self.stage}; "
                "resume with the same stage or from a full checkpoint"
            )
        for p, s in self.shards.items():
            got = state["model"].get(self.names[p])
            if got is None or got.shape != s.shape:
                raise ValueError(
                    f"{source}: shard of {self.names[p]} has shape "
                    f"{None if got is None else tuple(got.shape)}, expected {tuple(s.shape)}"
                )
        for p, s in self.shards.items():
            name = self.names[p]
            s.copy_(state["model"][name])
            if name in state["optim"]:
                o = state["optim"][name]
                self.optimizer.state[s] = {
                    "step": torch.tensor(float(o["step"])),
                    "exp_avg": o["exp_avg"].clone(),
                    "exp_avg_sq": o["exp_avg_sq"].clone(),
                }
        if self.stage in (1, 2):  # the full weights are views of the slices: gather them
            for p in self.params:
                flat = self._padded(p)
                dist.all_gather_into_tensor(flat, self._slice(flat).clone())

    def close(self) -> None:
        """Remove the hooks (the model is left sharded; build a new one to reuse it)."""
        for h in self._hooks:
            h.remove()
        self._hooks.clear()
