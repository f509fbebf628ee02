"""Benchmark of Chapter 5: storage of the frozen weights, NF4 speed, fine-tuning step time.

Run: ``python benchmarks/bench_peft.py``. Everything is measured side by side in one run and
reported as ratios, which travel between machines better than absolute times:

1. bytes of the GPT's block weights in fp32, bf16, int8 (one fp32 scale per row) and NF4
   (labs.peft.nf4, double quantization), measured from the stored tensors;
2. NF4 quantize and dequantize throughput of labs.peft.nf4 vs bitsandbytes on CPU (same tensor);
3. time per fine-tuning step of the tiny GPT: full fine-tuning vs LoRA vs QLoRA.
"""

from __future__ import annotations

import copy
import os

import torch

from labs import data, gpt
from labs.basics.flops import time_fn
from labs.peft import lora, nf4

os.environ.setdefault("HF_HUB_OFFLINE", "1")
ALL_LINEAR = ["q_proj", "k_proj", "v_proj", "o_proj", "up_proj", "down_proj"]


def storage(cfg: gpt.GPTConfig) -> None:
    model = gpt.GPT(cfg)
    ws = [
        m.weight.detach()
        for n, m in model.named_modules()
        if isinstance(m, torch.nn.Linear) and n.startswith("blocks")
    ]
    n = sum(w.numel() for w in ws)
    sizes = {
        "fp32": sum(w.float().nbytes for w in ws),
        "bf16": sum(w.bfloat16().nbytes for w in ws),
        "int8": sum(w.numel() + 4 * w.shape[0] for w in ws),
        "nf4": sum(nf4.nf4_quantize(w).nbytes for w in ws),
    }
    print(f"1. block weights of GPT(n_layer={cfg.n_layer}, n_embd={cfg.n_embd}): {n:,} parameters")
    for k, b in sizes.items():
        print(
            f"   {k:>5}: {b:>10,} bytes  {8 * b / n:6.3f} bits/param  "
            f"fp32/{k} = {sizes['fp32'] / b:5.2f}x"
        )


def nf4_speed() -> None:
    w = torch.randn(2048, 2048, generator=torch.Generator().manual_seed(0))
    ours_q = time_fn(lambda: nf4.nf4_quantize(w))
    q = nf4.nf4_quantize(w)
    ours_d = time_fn(q.dequantize)
    print(f"2. NF4 on a 2048 x 2048 fp32 tensor (CPU, {torch.get_num_threads()} threads)")
    try:
        import bitsandbytes.functional as bnbf
    except ImportError:
        print("   bitsandbytes is not installed: comparison skipped")
        print(
            f"   labs quantize {w.numel() / ours_q / 1e6:.1f} M el/s, "
            f"dequantize {w.numel() / ours_d / 1e6:.1f} M el/s"
        )
        return
    bq = time_fn(
        lambda: bnbf.quantize_4bit(w, blocksize=64, quant_type="nf4", compress_statistics=True)
    )
    packed, state = bnbf.quantize_4bit(w, blocksize=64, quant_type="nf4", compress_statistics=True)
    bd = time_fn(lambda: bnbf.dequantize_4bit(packed, state))
    for what, ours, theirs in (("quantize", ours_q, bq), ("dequantize", ours_d, bd)):
        print(
            f"   {what:>10}: labs {w.numel() / ours / 1e6:8.1f} M el/s, bitsandbytes "
            f"{w.numel() / theirs / 1e6:8.1f} M el/s; labs time / bitsandbytes time = "
            f"{ours / theirs:.2f}"
        )


def step_time(cfg: gpt.GPTConfig) -> None:
    torch.manual_seed(0)
    base = gpt.GPT(cfg)
    tok = data.CharTokenizer()
    batch = next(data.batches(tok.encode(data.load_corpus()), 16, cfg.block_size))
    models = {
        "full": copy.deepcopy(base),
        "LoRA r=8": lora.apply_lora(copy.deepcopy(base), ALL_LINEAR, r=8, alpha=16),
        "QLoRA r=8": lora.apply_lora(copy.deepcopy(base), ALL_LINEAR, r=8, alpha=16, quantize=True),
    }
    times = {}
    for name, m in models.items():
        opt = torch.optim.AdamW([p for p in m.parameters() if p.requires_grad], lr=1e-4)

        def step(m=m, opt=opt):
            opt.zero_grad(set_to_none=True)
            m.loss(*batch).backward()
            opt.step()

        times[name] = time_fn(step, warmup=2, repeats=9)
    print(
        f"3. one fine-tuning step, GPT(n_layer={cfg.n_layer}, n_embd={cfg.n_embd}), "
        f"batch 16 x {cfg.block_size}"
    )
    for name, t in times.items():
        print(f"   {name:>9}: {t * 1e3:7.1f} ms   relative to full: {t / times['full']:.2f}")


if __name__ == "__main__":
    torch.manual_seed(0)
    storage(gpt.GPTConfig(n_layer=4, n_embd=256))
    nf4_speed()
    step_time(gpt.GPTConfig())
