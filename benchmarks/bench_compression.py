"""Benchmark of Chapters 19-22: size, speed and quality of every compression of the tiny GPT.

Run: ``python benchmarks/bench_compression.py [--width 256] [--steps 150] [--threads 1]``.

One GPT (2 blocks, width ``--width``) is trained for ``--steps`` steps on the book's corpus; every
variant below is derived from it and measured side by side in one run, with the timings
interleaved (round-robin over variants, median of the rounds):

* fp32 (the reference); pruned 50 % unstructured; pruned 2:4; MLP channels pruned 50 %;
* int8 dynamic (``torch.ao.quantization.quantize_dynamic``, fbgemm int8 kernels);
* int8 weight-only and int4 group-wise (groups of 32) ``QuantLinear`` (dequantized per call);
* a distilled student (1 block, half the width, same number of steps);
* the fp32 model exported to ONNX and run by ONNX Runtime, and ONNX Runtime's own int8.

Columns: file size (``torch.save`` of the state dict, or the ``.onnx`` file); memory: the growth
of the resident set size (``VmRSS``) of a fresh Python process, with torch and onnxruntime already
imported, after it loads the variant and runs one (1, 64) forward pass; tokens
per second of a forward pass over a (8, 64) batch, also relative to fp32; held-out perplexity. The book's goal
is an int8 model at least 1.5x faster than fp32 with perplexity within 5 %; the last line says
whether it was met on this machine.

A second table (``--quality``, on by default; ``--skip-speed`` runs only it) compares the one-shot
methods of Chapters 21-22 on the same model, calibrated on 512 training tokens: round-to-nearest,
AWQ and GPTQ at W4 and W3 with groups of 128 (bits per weight counting fp16 scales and packed zero
points), and magnitude, Wanda and SparseGPT pruning at 50 % and 2:4, each on the trained model and
on a copy with three planted outlier features (the function is unchanged; see
``labs.compress.outliers.plant_outliers``). Its goals: GPTQ W4 within 2 % of fp32 perplexity where
round-to-nearest is worse, and Wanda better than magnitude pruning at 50 %; the last lines say
whether each was met, with the numbers.

A third table (``--decode``, on by default) times what a phone does with a model: greedy decoding
of one sequence with the KV cache (``labs.inference.kv_cache.generate``, batch 1), for the fp32
model, int8 weight-only (``labs.inference.int8``: per-channel int8, dequantized per step) and int4
group-wise (``labs.compress.int4``: packed codes and fp16 scales per 32 weights, dequantized per
step), interleaved, with the bytes of the linear weights each step reads as stored. On a CPU
without int4/int8 matmul kernels the dequantizing layers trade fewer stored bytes for extra work,
so the ratio printed says which effect won on this machine; nothing here is a fixed verdict.
"""

from __future__ import annotations

import argparse
import copy
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from labs import data, gpt
from labs.compress import (
    awq,
    calibrate,
    distill,
    export,
    gptq,
    int8,
    measure,
    outliers,
    pruning,
    sparsegpt,
    wanda,
)
from labs.compress import quantize as Q


def build(width: int, steps: int) -> dict[str, torch.nn.Module]:
    cfg = gpt.GPTConfig(n_layer=2, n_head=4, n_embd=width, block_size=64, seed=0)
    model = measure.trained_gpt(steps=steps, config=cfg)
    tok = data.CharTokenizer()
    train_ids, _ = data.split(tok.encode(data.load_corpus()))
    nm = {n: pruning.nm_mask(model.get_submodule(n).weight) for n in measure.linear_names(model)}
    student = gpt.GPT(gpt.GPTConfig(n_layer=1, n_head=4, n_embd=width // 2, block_size=64, seed=1))
    distill.distill(
        student, model, data.batches(train_ids, 16, 64, seed=0), steps, temperature=1.0, alpha=0.9
    )
    work = Path(tempfile.mkdtemp())
    onnx_path = export.to_onnx(model, work / "model.onnx")
    return {
        "fp32": model,
        "pruned 50 % unstructured": pruning.apply_masks(
            copy.deepcopy(model), pruning.magnitude_masks(model, 0.5), permanent=True
        ),
        "pruned 2:4": pruning.apply_masks(copy.deepcopy(model), nm, permanent=True),
        "pruned MLP channels 50 %": pruning.prune_mlp_channels(model, 0.5),
        "int8 dynamic (torch.ao)": int8.dynamic_int8(model),
        "int8 weight-only": Q.quantize_weights(model, 8, granularity="channel"),
        "int4 group-wise (32)": Q.quantize_weights(model, 4, granularity="group", group_size=32),
        "distilled student": student.eval(),
        "ONNX Runtime fp32": export.OrtModel(onnx_path),
        "ONNX Runtime int8": export.OrtModel(export.ort_int8(onnx_path, work / "model-int8.onnx")),
    }


_PROBE = """
import sys, warnings
warnings.simplefilter("ignore")
import torch, onnxruntime
from labs.compress import export
torch.set_num_threads(1)


def rss_kb():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])


before = rss_kb()
path = sys.argv[1]
model = export.OrtModel(path) if path.endswith(".onnx") else torch.load(path, weights_only=False)
with torch.no_grad():
    model(torch.zeros(1, 64, dtype=torch.long))
print(rss_kb() - before)
"""


def peak_memory_kb(model: torch.nn.Module, work: Path, name: str) -> int:
    """Resident memory growth (kB, Linux VmRSS) of a fresh process loading and running ``model``."""
    if isinstance(model, export.OrtModel):
        path = str(model.path)
    else:
        path = str(work / f"{name}.pt")
        torch.save(model, path)
    out = subprocess.run(
        [sys.executable, "-c", _PROBE, path], capture_output=True, text=True, check=True
    )
    return int(out.stdout.strip().splitlines()[-1])


def quality(model: torch.nn.Module) -> None:
    """Perplexity of the one-shot quantizers and pruners of Chapters 21-22, side by side."""
    ids = calibrate.calibration_ids(n_seq=8, seq_len=64)
    names = measure.linear_names(model)
    numel = {n: model.get_submodule(n).weight.numel() for n in names}
    loud = model
    for channel, factor in [(5, 30.0), (40, 15.0), (77, 8.0)]:
        loud = outliers.plant_outliers(loud, channels=[channel], factor=factor)
    rows: dict[tuple[str, str], dict[str, float]] = {}
    for label, m in [("trained", model), ("outliers planted", loud)]:
        base = measure.perplexity(m)
        r = rows.setdefault(("fp32", ""), {})
        r[label] = base
        for bits in (4, 3):
            bpw = sum(
                gptq.bits_per_weight(bits, 128, model.get_submodule(n).in_features) * numel[n]
                for n in names
            ) / sum(numel.values())
            key = f"W{bits} g128 ({bpw:.2f} bits/weight)"
            variants = {
                "round-to-nearest": gptq.quantize_model(m, ids, bits, 128, method="rtn"),
                "AWQ": awq.awq_model(m, ids, bits, 128)[0],
                "GPTQ": gptq.quantize_model(m, ids, bits, 128, method="gptq"),
            }
            for meth, qm in variants.items():
                rows.setdefault((key, meth), {})[label] = measure.perplexity(qm)
        for pattern, kw in [("50 %", dict(sparsity=0.5)), ("2:4", dict(n=2, m=4))]:
            if pattern == "2:4":
                masks = {n: pruning.nm_mask(m.get_submodule(n).weight) for n in names}
            else:
                masks = pruning.magnitude_masks(m, 0.5)
            variants = {
                "magnitude": pruning.apply_masks(copy.deepcopy(m), masks, permanent=True),
                "Wanda": wanda.wanda_model(m, ids, **kw)[0],
                "SparseGPT": sparsegpt.sparsegpt_model(m, ids, **kw)[0],
            }
            for meth, pm in variants.items():
                rows.setdefault((f"pruned {pattern}", meth), {})[label] = measure.perplexity(pm)
    labels = ("trained", "outliers planted")
    print(f"\n{'one-shot compression':<46}" + "".join(f"{lb:>26}" for lb in labels))
    for (what, meth), vals in rows.items():
        cells = "".join(
            f"{vals[lb]:>16.3f} ({vals[lb] / rows['fp32', ''][lb] - 1:+6.2%})" for lb in labels
        )
        print(f"{what + ' ' + meth:<46}{cells}")
    w4 = next(k for k in rows if k[0].startswith("W4"))[0]
    for lb in labels:
        base = rows["fp32", ""][lb]
        g, r = rows[w4, "GPTQ"][lb], rows[w4, "round-to-nearest"][lb]
        ok = g <= 1.02 * base and r > g
        print(
            f"goal ({lb}: GPTQ W4 g128 within 2 % of fp32, round-to-nearest worse): "
            f"{'met' if ok else 'NOT met'} -- GPTQ {g / base - 1:+.2%}, RTN {r / base - 1:+.2%}"
        )
        wa, mg = rows["pruned 50 %", "Wanda"][lb], rows["pruned 50 %", "magnitude"][lb]
        print(
            f"goal ({lb}: Wanda beats magnitude pruning at 50 %): "
            f"{'met' if wa < mg else 'NOT met'} -- Wanda {wa / base - 1:+.2%}, "
            f"magnitude {mg / base - 1:+.2%}"
        )


@torch.no_grad()
def decode(model: torch.nn.Module, rounds: int, new_tokens: int = 48) -> None:
    """Tokens per second of batch-1 greedy decoding with the KV cache: fp32, int8, int4."""
    from labs.compress import int4
    from labs.inference import int8 as int8_weight_only
    from labs.inference.kv_cache import generate

    variants = {
        "fp32": model,
        "int8 weight-only": int8_weight_only.quantize_model_int8(model),
        "int4 group-wise (32)": int4.to_int4(model, group_size=32),
    }
    prompt = torch.randint(0, 96, (1, 8), generator=torch.Generator().manual_seed(1))
    reference = generate(model, prompt, new_tokens)
    times: dict[str, list[float]] = {k: [] for k in variants}
    with torch.no_grad():
        for m in variants.values():  # warm-up
            generate(m, prompt, 4)
        for _ in range(rounds):
            for k, m in variants.items():
                start = time.perf_counter()
                out = generate(m, prompt, new_tokens)
                times[k].append(time.perf_counter() - start)
                assert out.shape == reference.shape

    def weight_bytes(m: torch.nn.Module) -> int:
        return sum(b.numel() * b.element_size() for n, b in m.state_dict().items()
                   if "blocks" in n and not n.endswith(("ln_1.weight", "ln_2.weight", "ln_1.bias", "ln_2.bias")))  # fmt: skip

    med = {k: statistics.median(v) for k, v in times.items()}
    print(
        f"\ndecode: batch 1, {new_tokens} new tokens after an 8-token prompt, KV cache, median of {rounds}"
    )
    print(
        f"{'variant':<24}{'block weights kB':>18}{'tokens/s':>10}{'vs fp32':>9}{'perplexity':>12}"
    )
    for k, m in variants.items():
        print(
            f"{k:<24}{weight_bytes(m) / 1e3:>18.0f}{new_tokens / med[k]:>10.0f}"
            f"{med['fp32'] / med[k]:>8.2f}x{measure.perplexity(m):>12.4f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--width", type=int, default=256)
    parser.add_argument("--steps", type=int, default=150)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--skip-speed", action="store_true", help="only the quality table")
    parser.add_argument("--no-quality", action="store_true", help="only the speed table")
    parser.add_argument("--no-decode", action="store_true", help="skip the decode table")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if args.skip_speed:
        cfg = gpt.GPTConfig(n_layer=2, n_head=4, n_embd=args.width, block_size=64, seed=0)
        with torch.enable_grad():
            model = measure.trained_gpt(steps=args.steps, config=cfg)
        print(f"GPT 2 blocks x width {args.width}, {args.steps} training steps")
        quality(model)
        if not args.no_decode:
            decode(model, args.rounds)
        return
    with torch.enable_grad():
        variants = build(args.width, args.steps)
    x = torch.randint(0, 96, (8, 64), generator=torch.Generator().manual_seed(0))
    for m in variants.values():  # warm-up
        m(x)
        m(x)
    times: dict[str, list[float]] = {k: [] for k in variants}
    for _ in range(args.rounds):
        for k, m in variants.items():
            start = time.perf_counter()
            for _ in range(3):
                m(x)
            times[k].append((time.perf_counter() - start) / 3)
    med = {k: statistics.median(v) for k, v in times.items()}
    work = Path(tempfile.mkdtemp())
    rows = []
    for i, (k, m) in enumerate(variants.items()):
        size = m.nbytes if isinstance(m, export.OrtModel) else measure.file_bytes(m)
        mem = peak_memory_kb(m, work, f"variant{i}")
        rows.append((k, size, mem, x.numel() / med[k], med["fp32"] / med[k], measure.perplexity(m)))
    print(
        f"GPT 2 blocks x width {args.width}, {args.steps} training steps, "
        f"{args.threads} thread(s), batch 8 x 64 tokens, median of {args.rounds} rounds"
    )
    print(
        f"{'variant':<28}{'file kB':>9}{'RSS +kB':>13}{'tokens/s':>10}{'vs fp32':>9}"
        f"{'perplexity':>12}{'vs fp32':>9}"
    )
    base_ppl = rows[0][5]
    for k, size, mem, tps, speed, ppl in rows:
        print(
            f"{k:<28}{size / 1e3:>9.0f}{mem:>13,}{tps:>10.0f}{speed:>8.2f}x{ppl:>12.3f}"
            f"{ppl / base_ppl - 1:>+8.1%}"
        )
    best = max((r for r in rows if "int8" in r[0]), key=lambda r: r[4])
    ok = best[4] >= 1.5 and best[5] <= 1.05 * base_ppl
    print(
        f"goal (int8 >= 1.5x faster than fp32, perplexity within 5 %): "
        f"{'met' if ok else 'NOT met'} -- best int8 variant '{best[0]}': {best[4]:.2f}x, "
        f"perplexity {best[5] / base_ppl - 1:+.1%}"
    )
    if not args.no_quality:
        quality(variants["fp32"])
    if not args.no_decode:
        decode(variants["fp32"], args.rounds)


if __name__ == "__main__":
    main()
