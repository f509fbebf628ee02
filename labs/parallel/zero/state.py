"""Checkpoints of a ZeRO rank: full (gathered) and sharded states (Chapter 16).

:class:`ZeroStateMixin` holds the checkpoint methods of :class:`labs.parallel.zero.trainer.ZeroTrainer`:
:meth:`~ZeroStateMixin.full_state` gathers the unsharded model and AdamW state on every rank (the
format :mod:`labs.parallel.fsdp.train` shares), :meth:`~ZeroStateMixin.shard_state` returns this rank's
slices without any communication, and the two ``load_*`` methods put them back.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn as nn

from labs import dist

__all__ = ["ZeroStateMixin"]


class ZeroStateMixin:
    """Checkpoint methods for :class:`labs.parallel.zero.trainer.ZeroTrainer` (which provides the
    attributes used here: ``model``, ``optimizer``, ``stage``, ``world``, ``params``, ``names``,
    ``shards``, ``shard_len``, ``numel`` and the helpers ``_padded``, ``_slice``)."""

    def _gather_full(self, p: nn.Parameter, shard: torch.Tensor) -> torch.Tensor:
        if self.stage == 0:  # nothing is sharded
            return shard.detach().reshape(p.shape).clone()
        flat = torch.empty(self.shard_len[p] * self.world, dtype=shard.dtype)
        dist.all_gather_into_tensor(flat, shard.detach().contiguous())
        return flat[: self.numel[p]].view(p.shape).clone()

    def full_state(self) -> dict[str, Any]:
        """The unsharded model and optimizer state (every rank must call; all get a copy).

        Format shared with :mod:`labs.parallel.fsdp.train`: ``{"model": state_dict, "optim": {name:
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
        """Load a state made by :meth:`full_state` (or by any path of :mod:`labs.parallel.fsdp.train`)."""
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
