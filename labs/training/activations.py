"""Activation memory: count what autograd saves, trade it for recomputation, scale fp16 losses.

Chapter 4 asks where the memory of a training step goes.  Weights, gradients and optimizer state
are tensors you can list (:func:`state_bytes`); activations are the tensors autograd *saves* in
the forward pass for the backward pass.  :class:`SavedTensorLedger` counts them with
``torch.autograd.graph.saved_tensors_hooks``: every tensor an operation stashes goes through the
pack hook, and the ledger adds up the bytes of each distinct storage (views of one buffer count
once; parameters, which autograd also saves, are not activations and are left out).

The formulas to check the count against are those of Korthikanti et al. (2022), "Reducing
Activation Recomputation in Large Transformer Models": per transformer layer, in fp16,
``s*b*h*(34 + 5*a*s/h)`` bytes (:func:`korthikanti_layer_bytes`).

Also here: activation checkpointing of the blocks of a model (:func:`checkpoint_blocks`) and a
dynamic loss scaler for fp16 training (:class:`LossScaler`, the algorithm of
``torch.amp.GradScaler`` written out).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch
import torch.nn as nn
from torch.utils.checkpoint import checkpoint

__all__ = [
    "SavedTensorLedger",
    "state_bytes",
    "tensor_bytes",
    "korthikanti_layer_bytes",
    "checkpoint_blocks",
    "LossScaler",
    "fp16_cast_report",
]


def tensor_bytes(tensors: Iterable[torch.Tensor]) -> int:
    """Bytes of the distinct storages behind ``tensors`` (a view or a tied weight counts once)."""
    seen: dict[int, int] = {}
    for t in tensors:
        if t is None:
            continue
        st = t.untyped_storage()
        seen[st.data_ptr()] = st.nbytes()
    return sum(seen.values())


def state_bytes(model: nn.Module, optimizer: torch.optim.Optimizer | None = None) -> dict[str, int]:
    """Bytes of the weights, gradients and optimizer state, counted from the actual tensors.

    Returns:
        ``{"weights": ..., "gradients": ..., "optimizer": ...}`` in bytes.  Gradients that are
        ``None`` count zero; optimizer state counts every tensor in ``optimizer.state`` (Adam's
        ``exp_avg`` and ``exp_avg_sq``; its scalar ``step`` is a 4-byte tensor per parameter).
    """
    params = list(model.parameters())
    opt_tensors: list[torch.Tensor] = []
    if optimizer is not None:
        for st in optimizer.state.values():
            opt_tensors += [v for v in st.values() if torch.is_tensor(v)]
    return {
        "weights": tensor_bytes(params),
        "gradients": tensor_bytes(p.grad for p in params),
        "optimizer": tensor_bytes(opt_tensors),
    }


@dataclass
class SavedTensorLedger:
    """Count the bytes autograd saves for backward while the ledger is active.

    Use it as a context manager around a forward pass::

        ledger = SavedTensorLedger(exclude=model.parameters())
        with ledger:
            loss = model.loss(x, y)
        ledger.total_bytes      # activations kept alive for backward, in bytes
        ledger.records          # one (shape, dtype, bytes) entry per distinct storage

    Attributes:
        exclude: tensors whose storages are not activations (pass the model's parameters).
        records: ``(shape, dtype, nbytes)`` of each distinct saved storage, in the order saved.
    """

    exclude: Iterable[torch.Tensor] = ()
    records: list[tuple[tuple[int, ...], torch.dtype, int]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._skip = {t.untyped_storage().data_ptr() for t in self.exclude}
        self._seen: set[int] = set()
        self._ctx = None

    def _pack(self, t: torch.Tensor) -> torch.Tensor:
        st = t.untyped_storage()
        ptr = st.data_ptr()
        if ptr not in self._skip and ptr not in self._seen and st.nbytes() > 0:
            self._seen.add(ptr)
            self.records.append((tuple(t.shape), t.dtype, st.nbytes()))
        return t

    def __enter__(self) -> SavedTensorLedger:
        self._ctx = torch.autograd.graph.saved_tensors_hooks(self._pack, lambda t: t)
        self._ctx.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self._ctx.__exit__(*exc)

    @property
    def total_bytes(self) -> int:
        """Bytes of all distinct saved storages (parameters excluded)."""
        return sum(r[2] for r in self.records)


def korthikanti_layer_bytes(
    s: int,
    b: int,
    h: int,
    a: int,
    t: int = 1,
    sequence_parallel: bool = False,
    recompute: str = "none",
) -> float:
    """Activation bytes one transformer layer keeps for backward (Korthikanti et al. 2022).

    The paper's accounting assumes 16-bit activations, dropout masks of 1 byte per element and an
    attention that materialises the ``a x s x s`` score matrix.

    Args:
        s: sequence length (tokens).  b: micro-batch size.  h: hidden size.  a: attention heads.
        t: tensor-parallel degree.
        sequence_parallel: also split the layer norms and dropouts across the ``t`` ranks.
        recompute: ``"none"``; ``"selective"`` (recompute the attention scores, dropping the
            ``5as/h`` term); ``"full"`` (keep only the layer input, ``2sbh``).

    Returns:
        Bytes per layer: ``sbh(34 + 5as/h)`` for ``t = 1``; ``sbh(10 + 24/t + 5as/(ht))`` with
        tensor parallelism; ``sbh(34/t + 5as/(ht))`` with sequence parallelism as well.
    """
    if min(s, b, h, a, t) <= 0:
        raise ValueError(f"s, b, h, a, t must be positive, got {s}, {b}, {h}, {a}, {t}")
    if recompute not in ("none", "selective", "full"):
        raise ValueError(f"recompute must be 'none', 'selective' or 'full', got {recompute!r}")
    sbh = s * b * h
    if recompute == "full":
        return 2.0 * sbh / (t if sequence_parallel else 1)
    scores = 0.0 if recompute == "selective" else 5.0 * a * s / (h * t)
    linear = 34.0 / t if sequence_parallel else 10.0 + 24.0 / t
    return sbh * (linear + scores)


@contextmanager
def checkpoint_blocks(blocks: Iterable[nn.Module]) -> Iterator[None]:
    """Run each module in ``blocks`` under activation checkpointing while the context is active.

    Inside the context, a block's forward keeps only its input; backward recomputes the block's
    forward to get the activations back (``torch.utils.checkpoint.checkpoint`` with
    ``use_reentrant=False``).  Leaving the context restores the original forwards::

        with checkpoint_blocks(model.blocks):
            loss = model.loss(x, y)
        loss.backward()        # recomputes every block once
    """
    blocks = list(blocks)
    originals = []
    for blk in blocks:
        fwd = blk.forward
        originals.append(fwd)
        blk.forward = (lambda f: lambda *a, **k: checkpoint(f, *a, use_reentrant=False, **k))(fwd)
    try:
        yield
    finally:
        for blk in blocks:
            del blk.forward  # drop the instance attribute: the class's forward is visible again


def fp16_cast_report(x: torch.Tensor) -> dict[str, float]:
    """What casting ``x`` to fp16 does to it: fractions that underflow to 0 and overflow to inf.

    Returns:
        ``{"underflow": ..., "overflow": ..., "subnormal": ...}``, each a fraction of the nonzero
        finite elements of ``x``.  fp16's largest finite value is 65504; its smallest normal
        value is 2**-14 and its smallest subnormal 2**-24 (values below half of it become 0).
    """
    x = x.detach().float()
    nz = (x != 0) & torch.isfinite(x)
    n = max(1, int(nz.sum()))
    h = x.half().float()
    return {
        "underflow": float(((h == 0) & nz).sum()) / n,
        "overflow": float((torch.isinf(h) & nz).sum()) / n,
        "subnormal": float(((h != 0) & (h.abs() < 2.0**-14) & nz).sum()) / n,
    }


class LossScaler:
    """Dynamic loss scaling for fp16 training, as ``torch.amp.GradScaler`` does it.

    Multiply the loss by ``scale`` before backward so that small gradients stay above fp16's
    underflow threshold; divide the gradients by ``scale`` before the optimizer step.  If any
    gradient is inf or NaN, skip the step and halve the scale; after ``growth_interval``
    clean steps in a row, double it.  bf16 has fp32's exponent range and needs none of this.

    Usage::

        scaler = LossScaler()
        scaler.scale(loss).backward()
        if scaler.unscale_(params):      # True when the gradients are finite
            optimizer.step()
        scaler.update()
    """

    def __init__(
        self,
        init_scale: float = 2.0**16,
        growth_factor: float = 2.0,
        backoff_factor: float = 0.5,
        growth_interval: int = 2000,
    ):
        if init_scale <= 0 or growth_factor <= 1 or not 0 < backoff_factor < 1:
            raise ValueError(
                "LossScaler: need init_scale > 0, growth_factor > 1 and 0 < backoff_factor < 1, "
                f"got {init_scale}, {growth_factor}, {backoff_factor}"
            )
        if growth_interval < 1:
            raise ValueError(f"LossScaler: growth_interval must be >= 1, got {growth_interval}")
        self.scale_value = float(init_scale)
        self.growth_factor = growth_factor
        self.backoff_factor = backoff_factor
        self.growth_interval = growth_interval
        self._good_steps = 0
        self._found_inf: bool | None = None
        self.skipped_steps = 0

    def scale(self, loss: torch.Tensor) -> torch.Tensor:
        """``loss * scale`` (call ``.backward()`` on the result)."""
        return loss * self.scale_value

    @torch.no_grad()
    def unscale_(self, params: Iterable[torch.Tensor]) -> bool:
        """Divide every ``p.grad`` by the scale in place; return True when all are finite."""
        finite = True
        inv = 1.0 / self.scale_value
        for p in params:
            if p.grad is None:
                continue
            if not bool(torch.isfinite(p.grad).all()):
                finite = False
            p.grad.mul_(inv)
        self._found_inf = not finite
        return finite

    def update(self) -> None:
        """Adjust the scale after a step: back off on inf/NaN, grow after a clean streak."""
        if self._found_inf is None:
            raise RuntimeError("LossScaler.update: call unscale_(params) first in this step")
        if self._found_inf:
            self.scale_value *= self.backoff_factor
            self._good_steps = 0
            self.skipped_steps += 1
        else:
            self._good_steps += 1
            if self._good_steps == self.growth_interval:
                self.scale_value *= self.growth_factor
                self._good_steps = 0
        self._found_inf = None
