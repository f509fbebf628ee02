"""Low-rank adaptation (LoRA) and QLoRA, from scratch (Chapter 5).

LoRA (Hu et al. 2021) freezes a pretrained weight ``W`` (d_out x d_in) and learns a low-rank
update ``delta W = B @ A`` with ``A`` (r x d_in) and ``B`` (d_out x r)::

    y = x @ W.T + b + scaling * (dropout(x) @ A.T @ B.T),   scaling = alpha / r  (rsLoRA: alpha / sqrt r)

``A`` starts Kaiming-uniform and ``B`` at zero, so the adapted model starts exactly equal to the
base model; an adapter adds ``r * (d_in + d_out)`` trainable parameters. The names and the
initialisation follow Hugging Face peft (``lora_A``, ``lora_B``), so results can be compared
one to one.

QLoRA (Dettmers et al. 2023) is the same adapter around a frozen base whose weight is stored in
NF4 and dequantized in every forward: ``LoRALinear(labs.peft.nf4.NF4Linear(...))``. Build it with
:meth:`LoRALinear.qlora` or with ``apply_lora(model, targets, quantize=True)``.
"""

from __future__ import annotations

import math
import re

import torch
import torch.nn as nn
import torch.nn.functional as F

from labs.peft import nf4

__all__ = [
    "LoRALinear",
    "apply_lora",
    "lora_param_count",
    "count_parameters",
    "merge_lora",
    "unmerge_lora",
    "memory_footprint",
]


def lora_param_count(d_out: int, d_in: int, r: int) -> int:
    """Trainable parameters of a rank-``r`` adapter on a d_out x d_in weight: ``r (d_out + d_in)``."""
    return r * (d_out + d_in)


class LoRALinear(nn.Module):
    """A frozen linear layer plus a trainable low-rank update.

    Args:
        base: an ``nn.Linear`` or a :class:`labs.peft.nf4.NF4Linear` (then this is a QLoRA layer);
            its parameters are frozen.
        r: rank of the update, > 0.
        alpha: scaling numerator, > 0; the update is multiplied by ``alpha / r``.
        dropout: dropout probability applied to the adapter's input, in [0, 1).
        rslora: scale by ``alpha / sqrt(r)`` instead (rank-stabilised LoRA).

    Shapes: input (..., in_features) -> output (..., out_features).
    """

    def __init__(
        self,
        base: nn.Module,
        r: int = 8,
        alpha: float = 16.0,
        dropout: float = 0.0,
        rslora: bool = False,
    ):
        super().__init__()
        if not isinstance(r, int) or r <= 0:
            raise ValueError(f"LoRALinear: rank r must be a positive integer, got {r!r}")
        if not alpha > 0:
            raise ValueError(f"LoRALinear: alpha must be positive, got {alpha!r}")
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"LoRALinear: dropout must be in [0, 1), got {dropout!r}")
        if not hasattr(base, "in_features") or not hasattr(base, "out_features"):
            raise ValueError(
                f"LoRALinear: base must be nn.Linear or NF4Linear, got {type(base).__name__}"
            )
        self.base = base
        for p in base.parameters():
            p.requires_grad_(False)
        self.in_features, self.out_features = base.in_features, base.out_features
        self.r, self.alpha = r, alpha
        self.scaling = alpha / math.sqrt(r) if rslora else alpha / r
        device = next(iter([*base.parameters(), *base.buffers()])).device
        self.lora_A = nn.Parameter(torch.empty(r, self.in_features, device=device))
        self.lora_B = nn.Parameter(torch.zeros(self.out_features, r, device=device))
        nn.init.kaiming_uniform_(self.lora_A, a=math.sqrt(5))  # as nn.Linear and peft do
        self.dropout = nn.Dropout(dropout) if dropout > 0 else nn.Identity()
        self.merged = False

    @classmethod
    def qlora(
        cls,
        linear: nn.Linear,
        r: int = 8,
        alpha: float = 16.0,
        dropout: float = 0.0,
        rslora: bool = False,
        blocksize: int = 64,
        compute_dtype: torch.dtype = torch.float32,
    ) -> LoRALinear:
        """A QLoRA layer: ``linear`` quantized to NF4 (double quantization) plus an adapter."""
        base = nf4.NF4Linear.from_linear(linear, blocksize, True, compute_dtype)
        return cls(base, r=r, alpha=alpha, dropout=dropout, rslora=rslora)

    def delta_weight(self) -> torch.Tensor:
        """The update ``scaling * B @ A``, shape (out_features, in_features)."""
        return self.scaling * (self.lora_B @ self.lora_A)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.base(x)
        if self.merged:
            return y
        a = F.linear(self.dropout(x).to(self.lora_A.dtype), self.lora_A)
        return y + (F.linear(a, self.lora_B) * self.scaling).to(y.dtype)

    def _check_mergeable(self, what: str) -> None:
        if not isinstance(self.base, nn.Linear):
            raise ValueError(
                f"LoRALinear.{what}: the base is {type(self.base).__name__}, not nn.Linear; adding "
                "the update to a 4-bit weight would re-quantize it. Dequantize the base first."
            )

    @torch.no_grad()
    def merge(self) -> None:
        """Add the update into the base weight (inference then costs one matmul). Idempotent."""
        self._check_mergeable("merge")
        if not self.merged:
            self.base.weight += self.delta_weight().to(self.base.weight.dtype)
            self.merged = True

    @torch.no_grad()
    def unmerge(self) -> None:
        """Subtract the update from the base weight again (to keep training the adapter)."""
        self._check_mergeable("unmerge")
        if self.merged:
            self.base.weight -= self.delta_weight().to(self.base.weight.dtype)
            self.merged = False

    def extra_repr(self) -> str:
        return f"r={self.r}, alpha={self.alpha}, scaling={self.scaling:.4g}, merged={self.merged}"


def _match(name: str, targets: str | list[str] | tuple[str, ...]) -> bool:
    """peft's rule: a string is a regular expression matched against the whole module name;
    a list matches a module whose name equals an entry or ends with ``"." + entry``."""
    if isinstance(targets, str):
        return re.fullmatch(targets, name) is not None
    return any(name == t or name.endswith("." + t) for t in targets)


def apply_lora(
    model: nn.Module,
    target_modules: str | list[str] | tuple[str, ...],
    r: int = 8,
    alpha: float = 16.0,
    dropout: float = 0.0,
    rslora: bool = False,
    quantize: bool = False,
    blocksize: int = 64,
    compute_dtype: torch.dtype = torch.float32,
) -> nn.Module:
    """Freeze ``model`` and wrap the linear layers named by ``target_modules`` with LoRA, in place.

    Args:
        model: any module, e.g. a :class:`labs.gpt.GPT`.
        target_modules: a list of name suffixes (``["q_proj", "v_proj"]``) or one regular
            expression matched against full module names (``r"blocks\\.0\\..*_proj"``).
        r, alpha, dropout, rslora: see :class:`LoRALinear`.
        quantize: QLoRA -- store the targeted weights and every other linear layer except the
            output head in NF4 (:func:`labs.peft.nf4.quantize_linears`) before adding adapters.

    Returns:
        ``model``, in which only the ``lora_A`` / ``lora_B`` parameters require gradients.

    Raises:
        ValueError: an entry of ``target_modules`` matches no module, or matches a module that is
            not a linear layer; or r, alpha, dropout are out of range.
    """
    if not 0.0 <= dropout < 1.0 or not isinstance(r, int) or r <= 0 or not alpha > 0:
        raise ValueError(
            f"apply_lora: need an integer r > 0, alpha > 0 and dropout in [0, 1); "
            f"got r={r!r}, alpha={alpha!r}, dropout={dropout!r}"
        )
    names = [n for n, _ in model.named_modules() if n]
    if isinstance(target_modules, str):
        if not any(_match(n, target_modules) for n in names):
            raise ValueError(f"apply_lora: the pattern {target_modules!r} matches no module")
    else:
        missing = [t for t in target_modules if not any(_match(n, [t]) for n in names)]
        if missing:
            linears = sorted({n.split(".")[-1] for n, m in model.named_modules() if _linear(m)})
            raise ValueError(
                f"apply_lora: target module(s) {missing} match no module of the model; "
                f"its linear layers are named {linears}"
            )
    chosen = [n for n in names if _match(n, target_modules)]
    bad = [n for n in chosen if not _linear(model.get_submodule(n))]
    if bad:
        raise ValueError(f"apply_lora: {bad} are not linear layers; LoRA wraps nn.Linear only")
    for p in model.parameters():
        p.requires_grad_(False)
    if quantize:
        nf4.quantize_linears(model, blocksize=blocksize, compute_dtype=compute_dtype)
    for name in chosen:
        parent_name, _, child = name.rpartition(".")
        parent = model.get_submodule(parent_name) if parent_name else model
        wrapped = LoRALinear(
            getattr(parent, child), r=r, alpha=alpha, dropout=dropout, rslora=rslora
        )
        setattr(parent, child, wrapped)
    return model


def _linear(m: nn.Module) -> bool:
    return isinstance(m, nn.Linear | nf4.NF4Linear)


def count_parameters(model: nn.Module) -> tuple[int, int]:
    """``(trainable, total)`` parameter counts; NF4 weights and their (frozen, buffer) biases
    count as the elements they stand for, so the total does not change when a model is quantized."""
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    total = sum(p.numel() for p in model.parameters())
    for m in model.modules():
        if isinstance(m, nf4.NF4Linear):
            total += m.qweight.numel + (0 if m.bias is None else m.bias.numel())
    return trainable, total


def merge_lora(model: nn.Module) -> nn.Module:
    """Merge every LoRA adapter of ``model`` into its base weight (in place)."""
    for m in model.modules():
        if isinstance(m, LoRALinear):
            m.merge()
    return model


def unmerge_lora(model: nn.Module) -> nn.Module:
    """Undo :func:`merge_lora` (in place)."""
    for m in model.modules():
        if isinstance(m, LoRALinear):
            m.unmerge()
    return model


def _nbytes(tensors) -> int:
    return sum(t.numel() * t.element_size() for t in tensors if t is not None)


def memory_footprint(model: nn.Module, optimizer: torch.optim.Optimizer | None = None) -> dict:
    """Bytes held by training state, counted from the actual tensors (activations excluded).

    Returns:
        ``{"weights", "gradients", "optimizer", "total"}`` in bytes. ``weights`` counts every
        parameter and buffer once (shared tensors once; NF4 codes and scales included);
        ``gradients`` the ``.grad`` tensors that exist; ``optimizer`` every tensor in
        ``optimizer.state`` (Adam: two moments per trainable element, plus step counters).
    """
    seen, weights = set(), []
    for t in [*model.parameters(), *model.buffers()]:
        if id(t) not in seen:
            seen.add(id(t))
            weights.append(t)
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    state = []
    if optimizer is not None:
        for per_param in optimizer.state.values():
            state += [v for v in per_param.values() if torch.is_tensor(v)]
    out = {"weights": _nbytes(weights), "gradients": _nbytes(grads), "optimizer": _nbytes(state)}
    out["total"] = sum(out.values())
    return out
