"""One rank of ZeRO stages 0-3 on emulated ranks, with a memory ledger measured from the tensors.

:class:`ZeroTrainer` runs one rank for any ``nn.Module`` whose ``loss(x, y)`` returns a scalar (the
tiny GPT of :mod:`labs.gpt`), through :mod:`labs.dist`: call it inside ``dist.launch``.
Everything is fp32 here, so the per-parameter bytes are 4 + 4 + 8 (Adam's two moments); the
formulas it is checked against are in :mod:`labs.parallel.zero.formulas`, the checkpoint methods in
:mod:`labs.parallel.zero.state`.

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

from collections.abc import Iterable

import torch
import torch.nn as nn

from labs import dist
from labs.parallel.zero.formulas import padded_numel
from labs.parallel.zero.state import ZeroStateMixin

__all__ = ["ZeroTrainer"]


def _flat_view(storage: torch.UntypedStorage, numel: int, dtype: torch.dtype) -> torch.Tensor:
    """A fresh 1-D tensor over ``storage`` (its own version counter: writes bump nothing)."""
    return torch.empty(0, dtype=dtype).set_(storage, 0, (numel,))


class ZeroTrainer(ZeroStateMixin):
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

    def close(self) -> None:
        """Remove the hooks (the model is left sharded; build a new one to reuse it)."""
        for h in self._hooks:
            h.remove()
        self._hooks.clear()
