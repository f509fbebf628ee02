"""How many bytes a model needs: to serve it, to train it, and for its KV cache.

These are the rules of thumb of Chapter 1, made exact enough to compute with:

* serving (inference) keeps one copy of the weights: ``bytes_per_param(dtype)`` per parameter
  (2 B for fp16/bf16, 1 B for int8, 0.5 B for 4-bit);
* training with Adam keeps weights, gradients and two optimizer moments.  Two regimes give the same
  16 B/param total with different parts (a point the workshop slides blur):

  ========================  =======  =====  ==============================  =====
  regime                    weights  grads  optimizer state                 total
  ========================  =======  =====  ==============================  =====
  fp32 Adam                 4        4      8 (m, v in fp32)                16
  mixed precision Adam      2        2      12 (fp32 master copy + m + v)   16
  ========================  =======  =====  ==============================  =====

* the KV cache stores, per token, a key and a value vector for every layer and KV head:
  ``2 * n_layers * n_kv_heads * head_dim * bytes`` (Llama-2-7B in fp16: 0.5 MiB per token).

Activations and framework buffers come on top; Chapter 4 measures them.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "BYTES_PER_PARAM",
    "ModelSpec",
    "MODELS",
    "GPUS",
    "bytes_per_param",
    "inference_bytes",
    "training_bytes",
    "kv_cache_bytes",
    "gpus_needed",
    "format_bytes",
]

#: Storage per parameter in bytes for the number formats the book uses.
BYTES_PER_PARAM: dict[str, float] = {
    "fp32": 4.0,
    "tf32": 4.0,  # stored as fp32; TF32 only changes how tensor cores multiply
    "fp16": 2.0,
    "bf16": 2.0,
    "fp8": 1.0,
    "int8": 1.0,
    "nf4": 0.5,
    "int4": 0.5,
}


def bytes_per_param(dtype: str) -> float:
    """Bytes per stored parameter for ``dtype`` (one of :data:`BYTES_PER_PARAM`)."""
    try:
        return BYTES_PER_PARAM[dtype]
    except KeyError:
        known = ", ".join(BYTES_PER_PARAM)
        raise ValueError(f"unknown dtype {dtype!r}; use one of: {known}") from None


def inference_bytes(n_params: float, dtype: str = "bf16") -> float:
    """Bytes of the weights of an ``n_params``-parameter model stored in ``dtype``."""
    if n_params < 0:
        raise ValueError(f"n_params must be >= 0, got {n_params}")
    return n_params * bytes_per_param(dtype)


def training_bytes(n_params: float, regime: str = "mixed") -> dict[str, float]:
    """Bytes of weights, gradients and Adam state for full training, per regime.

    Args:
        n_params: number of parameters.
        regime: ``"fp32"`` (everything in fp32) or ``"mixed"`` (fp16/bf16 weights and gradients,
            fp32 master weights and moments, as in Micikevicius et al. 2018).

    Returns:
        ``{"weights": ..., "gradients": ..., "optimizer": ..., "total": ...}`` in bytes.
        Activations are not included: they depend on batch and sequence length (Chapter 4).
    """
    if n_params < 0:
        raise ValueError(f"n_params must be >= 0, got {n_params}")
    if regime == "fp32":
        parts = {"weights": 4.0, "gradients": 4.0, "optimizer": 8.0}
    elif regime == "mixed":
        parts = {"weights": 2.0, "gradients": 2.0, "optimizer": 12.0}
    else:
        raise ValueError(f"unknown regime {regime!r}; use 'fp32' or 'mixed'")
    out = {k: v * n_params for k, v in parts.items()}
    out["total"] = sum(out.values())
    return out


def kv_cache_bytes(
    n_layers: int,
    n_kv_heads: int,
    head_dim: int,
    tokens: int,
    batch: int = 1,
    dtype: str = "fp16",
) -> float:
    """Bytes of the KV cache for ``batch`` sequences of ``tokens`` tokens each.

    Every layer stores one key and one value vector of ``n_kv_heads * head_dim`` numbers per token:
    ``2 * n_layers * n_kv_heads * head_dim * bytes_per_param(dtype) * tokens * batch``.
    """
    for name, value in dict(n_layers=n_layers, n_kv_heads=n_kv_heads, head_dim=head_dim).items():
        if value <= 0:
            raise ValueError(f"{name} must be positive, got {value}")
    if tokens < 0 or batch < 0:
        raise ValueError(f"tokens and batch must be >= 0, got tokens={tokens}, batch={batch}")
    return 2.0 * n_layers * n_kv_heads * head_dim * bytes_per_param(dtype) * tokens * batch


@dataclass(frozen=True)
class ModelSpec:
    """The numbers of a published model that memory estimates need."""

    name: str
    n_params: float  #: parameters
    n_layers: int
    n_kv_heads: int  #: key/value heads (fewer than query heads under GQA/MQA)
    head_dim: int
    source: str  #: where the numbers come from

    def kv_bytes_per_token(self, dtype: str = "fp16") -> float:
        """KV-cache bytes for one token of one sequence."""
        return kv_cache_bytes(self.n_layers, self.n_kv_heads, self.head_dim, 1, 1, dtype)


#: Published configurations (parameter counts and shapes from the cited model papers/cards).
MODELS: dict[str, ModelSpec] = {
    m.name: m
    for m in [
        ModelSpec("Llama-2-7B", 6.74e9, 32, 32, 128, "Touvron et al. 2023, Llama 2, Table 1"),
        ModelSpec("Llama-2-13B", 13.0e9, 40, 40, 128, "Touvron et al. 2023, Llama 2, Table 1"),
        ModelSpec("Llama-2-70B", 69.0e9, 80, 8, 128, "Touvron et al. 2023 (GQA, 8 KV heads)"),
        ModelSpec("Mistral-7B", 7.24e9, 32, 8, 128, "Jiang et al. 2023, Mistral 7B, Table 1"),
        ModelSpec("Llama-3-8B", 8.03e9, 32, 8, 128, "Meta Llama 3 model card, 2024"),
        ModelSpec("BLOOM-176B", 176.2e9, 70, 112, 128, "BigScience 2022, BLOOM, Table 3"),
    ]
}

#: Memory of common accelerators in GB (10^9 bytes), from the vendors' data sheets.
GPUS: dict[str, float] = {
    "T4 (16 GB)": 16e9,
    "L4 (24 GB)": 24e9,
    "RTX 4090 (24 GB)": 24e9,
    "A100 (40 GB)": 40e9,
    "A100 (80 GB)": 80e9,
    "H100 (80 GB)": 80e9,
    "H200 (141 GB)": 141e9,
}


def gpus_needed(total_bytes: float, gpu_bytes: float, usable_fraction: float = 0.9) -> int:
    """How many GPUs of ``gpu_bytes`` hold ``total_bytes`` if only ``usable_fraction`` is usable.

    The default keeps 10% back for the CUDA context, the allocator's fragmentation and buffers.
    """
    if gpu_bytes <= 0 or not 0 < usable_fraction <= 1:
        raise ValueError(
            f"need gpu_bytes > 0 and 0 < usable_fraction <= 1, got {gpu_bytes}, {usable_fraction}"
        )
    usable = gpu_bytes * usable_fraction
    return max(1, -int(-total_bytes // usable))


def format_bytes(n: float, binary: bool = False) -> str:
    """``1.5e9 -> '1.5 GB'`` (decimal units) or, with ``binary=True``, ``'1.4 GiB'``."""
    base, units = (
        (1024.0, ["B", "KiB", "MiB", "GiB", "TiB", "PiB"])
        if binary
        else (
            1000.0,
            ["B", "KB", "MB", "GB", "TB", "PB"],
        )
    )
    value = float(n)
    for unit in units:
        if abs(value) < base or unit == units[-1]:
            return f"{value:.3g} {unit}" if unit != "B" else f"{value:.0f} B"
        value /= base
    raise AssertionError("unreachable")
