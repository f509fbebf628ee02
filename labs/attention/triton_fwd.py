"""FlashAttention-2 as Triton kernels (forward and backward), on a GPU or in Triton's interpreter.

On a CUDA GPU the kernels are compiled.  Without one they run in Triton's interpreter, which
executes the same kernel code with NumPy on the CPU -- slowly, so keep the shapes tiny there.
The interpreter is chosen by the environment variable ``TRITON_INTERPRET=1``, which Triton reads
when ``triton`` is first imported (its own helpers such as ``tl.max`` are kernels decorated at
import) and again whenever a kernel is decorated.  So the variable must be set *before* the first
``import triton`` of the process.  Importing this module does that when there is no GPU; Triton
itself is imported lazily, on first use, and a missing Triton gives an install hint.  In a
notebook of your own, run ``os.environ["TRITON_INTERPRET"] = "1"`` before ``import triton``.

Public API, tensors shaped ``(batch, heads, seq, head_dim)`` as in :mod:`labs.attention.flash`:

* :func:`triton_attention` -- differentiable exact attention (causal optional);
* :func:`triton_attention_forward` -- ``(o, lse)`` from the forward kernel.

The forward kernel is here; the two backward kernels are in :mod:`labs.attention.triton_bwd`.
"""

from __future__ import annotations

import math
import os

import torch

from labs.attention.flash import check_attention_inputs

__all__ = ["load_triton", "uses_interpreter", "triton_attention", "triton_attention_forward"]

_LOG2E = 1.4426950408889634  # the kernels use exp2: e^x = 2^(x * log2(e))
_KERNELS: dict = {}

if not torch.cuda.is_available():
    os.environ["TRITON_INTERPRET"] = "1"  # must precede the process's first `import triton`


def uses_interpreter() -> bool:
    """True when the kernels run in Triton's CPU interpreter (no CUDA device)."""
    return not torch.cuda.is_available()


def load_triton():
    """Import Triton (interpreter mode without a GPU) and decorate the kernels once.

    Returns:
        the ``triton`` module.

    Raises:
        ImportError: Triton is not installed; the message says how to install it.
        RuntimeError: no GPU, and Triton was imported before ``TRITON_INTERPRET=1`` was set.
    """
    global triton, tl
    if _KERNELS:
        return triton
    if uses_interpreter():
        os.environ["TRITON_INTERPRET"] = "1"
    try:
        import triton
        import triton.language as tl
    except ImportError as err:
        raise ImportError(
            "labs.attention.triton_fwd needs Triton: pip install 'dlsys-labs[triton]' "
            "(or pip install torch==<your torch version> triton)"
        ) from err
    if uses_interpreter() and type(tl.max).__name__ != "InterpretedFunction":
        raise RuntimeError(
            "triton was imported before TRITON_INTERPRET=1 was set, so its kernels cannot run on "
            "the CPU. Restart the Python process (notebook: restart the kernel) and import "
            "labs.attention.triton_fwd, or set os.environ['TRITON_INTERPRET'] = '1', before triton."
        )
    from labs.attention import triton_bwd as bwd  # imports triton: only now, after the checks

    _KERNELS["fwd"] = triton.jit(_fwd_kernel)
    _KERNELS["dkdv"] = triton.jit(bwd.bwd_dkdv_kernel)
    _KERNELS["dq"] = triton.jit(bwd.bwd_dq_kernel)
    return triton


def _fwd_kernel(
    Q, K, V, O, LSE, qk_scale,
    sqb, sqh, sqm, skb, skh, skn, svb, svh, svn, sob, soh, som,
    H, N_Q, N_K, D,
    CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    BLOCK_D: tl.constexpr, PRECISION: tl.constexpr,
):  # fmt: skip
    """One program = one query block of one (batch, head); loops over key/value blocks."""
    pid_m = tl.program_id(0)
    b = tl.program_id(1) // H
    h = tl.program_id(1) % H
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    dims = tl.arange(0, BLOCK_D)
    cols0 = tl.arange(0, BLOCK_N)
    q_ptrs = Q + b * sqb + h * sqh + rows[:, None] * sqm + dims[None, :]
    q = tl.load(q_ptrs, mask=(rows[:, None] < N_Q) & (dims[None, :] < D), other=0.0)
    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_D], dtype=tl.float32)
    hi = N_K
    if CAUSAL:  # key blocks entirely right of the diagonal are never loaded
        hi = tl.minimum(N_K, (pid_m + 1) * BLOCK_M)
    for start_n in range(0, hi, BLOCK_N):
        cols = start_n + cols0
        kv_mask = (cols[:, None] < N_K) & (dims[None, :] < D)
        k = tl.load(
            K + b * skb + h * skh + cols[:, None] * skn + dims[None, :], mask=kv_mask, other=0.0
        )
        v = tl.load(
            V + b * svb + h * svh + cols[:, None] * svn + dims[None, :], mask=kv_mask, other=0.0
        )
        s = tl.dot(q, tl.trans(k), input_precision=PRECISION) * qk_scale  # base-2 scores
        keep = cols[None, :] < N_K
        if CAUSAL:
            keep = keep & (cols[None, :] <= rows[:, None])
        s = tl.where(keep, s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        alpha = tl.exp2(m_i - m_new)
        p = tl.exp2(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v, input_precision=PRECISION)
        m_i = m_new
    acc = acc / l_i[:, None]
    o_ptrs = O + b * sob + h * soh + rows[:, None] * som + dims[None, :]
    tl.store(o_ptrs, acc.to(O.dtype.element_ty), mask=(rows[:, None] < N_Q) & (dims[None, :] < D))
    lse = (m_i + tl.log2(l_i)) * 0.6931471805599453  # natural-log log-sum-exp
    tl.store(LSE + tl.program_id(1) * N_Q + rows, lse, mask=rows < N_Q)


def _config(q, v, block_m, block_n):
    d = q.shape[-1]
    if v.shape[-1] != d:
        raise ValueError(f"triton_attention: v head_dim {v.shape[-1]} must equal q's {d}")
    if d > 256:
        raise ValueError(f"triton_attention: head_dim {d} > 256 is not supported")
    for name, blk in (("block_m", block_m), ("block_n", block_n)):
        if blk < 16 or blk & (blk - 1):
            raise ValueError(f"triton_attention: {name} must be a power of two >= 16, got {blk}")
    block_d = max(16, 1 << (d - 1).bit_length())
    precision = "ieee" if q.dtype in (torch.float32, torch.float64) else "tf32"
    return block_d, precision


def _check(q, k, v, block_m, block_n):
    check_attention_inputs(q, k, v, block_m, block_n)
    if q.dtype not in (torch.float16, torch.bfloat16, torch.float32):
        raise ValueError(f"triton_attention: dtype {q.dtype} not supported; use fp16/bf16/fp32")
    if q.device.type != ("cuda" if torch.cuda.is_available() else "cpu"):
        raise ValueError(
            f"triton_attention: tensors are on {q.device}; move them to "
            f"{'cuda' if torch.cuda.is_available() else 'cpu'} (interpreter runs on CPU only)"
        )


def triton_attention_forward(q, k, v, causal=False, scale=None, block_m=64, block_n=64):
    """Run the forward kernel; returns ``o`` ``(B, H, Nq, d)`` and ``lse`` ``(B, H, Nq)`` fp32."""
    _check(q, k, v, block_m, block_n)
    load_triton()
    block_d, precision = _config(q, v, block_m, block_n)
    sc = 1.0 / math.sqrt(q.shape[-1]) if scale is None else float(scale)
    b, h, n_q, d = q.shape
    n_k = k.shape[2]
    q, k, v = (t if t.stride(-1) == 1 else t.contiguous() for t in (q, k, v))
    o = torch.empty_like(q)
    lse = torch.empty(b, h, n_q, dtype=torch.float32, device=q.device)
    grid = (triton.cdiv(n_q, block_m), b * h)
    _KERNELS["fwd"][grid](
        q, k, v, o, lse, sc * _LOG2E,
        q.stride(0), q.stride(1), q.stride(2), k.stride(0), k.stride(1), k.stride(2),
        v.stride(0), v.stride(1), v.stride(2), o.stride(0), o.stride(1), o.stride(2),
        h, n_q, n_k, d,
        CAUSAL=bool(causal), BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_D=block_d,
        PRECISION=precision,
    )  # fmt: skip
    return o, lse


def _triton_attention_backward(q, k, v, o, lse, grad_o, causal, scale, block_m, block_n):
    block_d, precision = _config(q, v, block_m, block_n)
    sc = 1.0 / math.sqrt(q.shape[-1]) if scale is None else float(scale)
    b, h, n_q, d = q.shape
    n_k = k.shape[2]
    q, k, v, grad_o = (t.contiguous() for t in (q, k, v, grad_o))
    delta = (grad_o.float() * o.float()).sum(-1).contiguous()  # D = rowsum(dO * O)
    dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
    args = (h, n_q, n_k, d)
    meta = dict(
        CAUSAL=bool(causal), BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_D=block_d, PRECISION=precision
    )
    grid_kv = (triton.cdiv(n_k, block_n), b * h)
    _KERNELS["dkdv"][grid_kv](q, k, v, grad_o, lse, delta, dk, dv, sc, *args, **meta)
    grid_q = (triton.cdiv(n_q, block_m), b * h)
    _KERNELS["dq"][grid_q](q, k, v, grad_o, lse, delta, dq, sc, *args, **meta)
    return dq, dk, dv


class _TritonAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, causal, scale, block_m, block_n):
        o, lse = triton_attention_forward(q, k, v, causal, scale, block_m, block_n)
        ctx.save_for_backward(q, k, v, o, lse)
        ctx.args = (causal, scale, block_m, block_n)
        return o

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_o):
        q, k, v, o, lse = ctx.saved_tensors
        dq, dk, dv = _triton_attention_backward(q, k, v, o, lse, grad_o, *ctx.args)
        return dq, dk, dv, None, None, None, None


def triton_attention(q, k, v, causal=False, scale=None, block_m=64, block_n=64):
    """Exact attention by the Triton FlashAttention-2 kernels; differentiable.

    Args:
        q, k, v: ``(B, H, Nq, d)``, ``(B, H, Nk, d)``, ``(B, H, Nk, d)``; fp16, bf16 or fp32; on
            CUDA, or on CPU when there is no GPU (interpreter: tiny shapes only).
        causal: query ``i`` sees keys ``j <= i``.
        scale: score scale, default ``1/sqrt(d)``.
        block_m, block_n: tile sizes, powers of two >= 16.

    Returns:
        ``(B, H, Nq, d)`` in the input dtype.

    Raises:
        ValueError: invalid shapes, dtype, device or block sizes.
        ImportError: Triton is not installed.
    """
    _check(q, k, v, block_m, block_n)
    return _TritonAttention.apply(q, k, v, causal, scale, block_m, block_n)
