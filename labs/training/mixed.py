"""Mixed-precision training steps on a GPU: autocast, GradScaler, and what they do to memory.

:mod:`labs.training.activations` counts the bytes autograd saves and simulates fp16 gradients on
a CPU; this module runs the real thing on the device it is given, through the book's one
training loop (:func:`labs.training.loop.train`): ``torch.autocast`` in fp16 (with
``torch.amp.GradScaler``) or bf16 (no scaler: bf16 has fp32's range), against plain fp32, and
reads the allocator's peak with :func:`labs.systems.roofline.peak_memory_bytes` (on CUDA,
``torch.cuda.max_memory_allocated``). Weights and AdamW state stay fp32 in every mode: autocast
casts per operation, so the activations shrink, the model states do not.
"""

from __future__ import annotations

import itertools

import torch

from labs import gpt
from labs.basics import flops
from labs.systems import roofline
from labs.training.loop import train

__all__ = ["amp_step"]


def amp_step(
    dtype: torch.dtype | None,
    device: torch.device | str,
    n_layer: int = 4,
    n_embd: int = 256,
    batch: int = 16,
    seq: int = 256,
    steps: int = 3,
    seed: int = 0,
) -> dict[str, float]:
    """Train a tiny GPT for a few AdamW steps under autocast in ``dtype`` (``None``: fp32).

    Returns ``{"loss", "resident_bytes", "peak_bytes", "seconds"}``: the last training loss,
    the bytes allocated on the CUDA ``device`` after a warm-up step (weights, gradients and
    optimizer state; 0 elsewhere), the peak above what was allocated during one measured step
    (activations, casts, temporaries), and the median seconds of ``steps`` steps (CUDA events
    on a GPU). fp16 uses a ``GradScaler``.
    """
    device = torch.device(device)
    if dtype not in (None, torch.float16, torch.bfloat16):
        raise ValueError(f"amp_step: dtype must be None, float16 or bfloat16, got {dtype}")
    cfg = gpt.GPTConfig(n_layer=n_layer, n_embd=n_embd, n_head=max(1, n_embd // 64),
                        block_size=seq, seed=seed)  # fmt: skip
    model = gpt.GPT(cfg).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    scaler = torch.amp.GradScaler(device.type) if dtype == torch.float16 else None
    data = torch.randint(0, cfg.vocab_size, (batch, seq + 1),
                         generator=torch.Generator().manual_seed(seed))  # fmt: skip
    batches = itertools.repeat((data[:, :-1], data[:, 1:]))
    losses: list[float] = []

    def step() -> None:
        losses.extend(train(model, batches, 1, optimizer=opt, autocast=dtype, scaler=scaler))

    step()  # warm-up: gradients and optimizer state now exist
    resident = torch.cuda.memory_allocated(device) if device.type == "cuda" else 0
    peak = roofline.peak_memory_bytes(step, device)
    seconds = flops.time_fn(step, warmup=0, repeats=steps, device=device)
    return {"loss": losses[-1], "resident_bytes": resident, "peak_bytes": peak,
            "seconds": seconds}  # fmt: skip
