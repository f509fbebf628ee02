"""Benchmark of Chapter 10: KV cache, continuous batching, paged KV waste, speculative decoding, int8.

Run: ``python benchmarks/bench_inference.py``. Everything is measured side by side in one run, on
one thread, and reported as ratios (interleaved best-of-N timings for speed):

1. tokens/s of the tiny GPT generating with vs without a KV cache at several context lengths;
2. continuous vs static batching on a Poisson trace: the real tiny GPT on this CPU (measured) and
   the roofline cost model of Llama-2-7B on an A100 (simulated) -- goal: continuous >= 2x;
3. KV memory wasted by max-length pre-allocation vs 16-token pages on a long-tailed length
   distribution -- goal: paged <= 4 % (vLLM reports 60-80 % vs under 4 %);
4. speculative decoding: tokens per target pass vs ``(1 - a^(g+1)) / (1 - a)`` and wall-clock
   speed-up vs the formula with the measured draft/target cost ratio -- goal: within 15 %;
5. int8 weight-only vs fp32: weight bytes, decode tokens/s, validation loss, and one layer's time
   with our dequantizing layer vs PyTorch's fused weight-only int8 kernel;
6. prefix caching on a trace with shared system prompts: block hit rate, prompt tokens computed
   and mean TTFT with vs without the cache, the tiny GPT on this CPU (the two runs interleaved,
   best of 3 each) and the Llama-2-7B cost model; chunked prefill: worst stall and TTFT with a
   256-token budget vs whole prompts (cost model).
"""

from __future__ import annotations

import numpy as np
import torch

from labs import data, gpt
from labs.inference import batching, chunked_prefill, engine, int8, paged, prefix_cache, speculative
from labs.inference.kv_cache import KVCache, forward_cached, generate
from labs.systems.roofline import compare_times

torch.set_num_threads(1)


def kv_cache_speed(model: gpt.GPT) -> None:
    print("1. KV cache: time per generated token (best of 15, interleaved)")
    ids = torch.randint(0, 96, (1, 128), generator=torch.Generator().manual_seed(0))
    cache = KVCache.for_model(model, 1, 128)
    with torch.no_grad():
        forward_cached(model, ids[:, :127], cache)
        for n in (16, 64, 127):

            def cached(n=n):
                cache.length = n
                forward_cached(model, ids[:, n : n + 1], cache)

            t = compare_times({"full": lambda n=n: model(ids[:, : n + 1]), "cached": cached}, 15)
            print(
                f"   context {n:4d}: {1 / t['full']:8.0f} tok/s without cache, "
                f"{1 / t['cached']:8.0f} tok/s with cache, speed-up {t['full'] / t['cached']:5.2f}x"
            )


def batching_throughput(model: gpt.GPT) -> None:
    print("2. continuous vs static batching")
    res = {}
    for policy in ("static", "continuous"):
        trace = batching.make_trace(60, rate=500.0, mean_output=24, max_output=96, seed=0)
        runner = engine.ModelRunner(model, num_blocks=200, block_size=8)
        batching.run_trace(trace, batching.Scheduler(policy, 16, runner.manager), runner)
        res[policy] = batching.summarize(trace)
    s, c = res["static"], res["continuous"]
    print(
        f"   tiny GPT (n_embd 64) on this CPU, 60 requests, max batch 16: static {s['throughput_tok_s']:.0f} "
        f"tok/s, continuous {c['throughput_tok_s']:.0f} tok/s -> "
        f"{c['throughput_tok_s'] / s['throughput_tok_s']:.2f}x; TTFT {s['ttft_mean_s']:.3f} s vs "
        f"{c['ttft_mean_s']:.3f} s; p99 latency {s['latency_p99_s']:.2f} s vs {c['latency_p99_s']:.2f} s"
    )
    for policy in ("static", "continuous"):
        trace = batching.make_trace(
            300, rate=32.0, prompt_len=(50, 400), mean_output=150, max_output=1000, seed=1
        )
        sched = batching.Scheduler(policy, 32, paged.BlockManager(4000, 16))
        batching.run_trace(trace, sched, batching.CostModel.llama2_7b_a100())
        res[policy] = batching.summarize(trace)
    s, c = res["static"], res["continuous"]
    print(
        f"   Llama-2-7B / A100 cost model, 300 requests at 32/s: static {s['throughput_tok_s']:.0f} "
        f"tok/s, continuous {c['throughput_tok_s']:.0f} tok/s -> "
        f"{c['throughput_tok_s'] / s['throughput_tok_s']:.2f}x (goal >= 2x)"
    )


def kv_waste() -> None:
    rng = np.random.default_rng(0)
    lengths = np.clip(rng.lognormal(np.log(300), 0.9, size=2000).round(), 1, 2048).astype(int)
    st, pg = paged.static_waste(lengths, 2048), paged.paged_waste(lengths, 16)
    print(
        f"3. KV slots wasted: static max-length {st:.1%}, paged (16-token blocks) {pg:.2%} "
        f"(goal <= 4 %)"
    )


def speculative_speedup(target: gpt.GPT, draft: gpt.GPT) -> None:
    print("4. speculative decoding (temperature 1, 100 new tokens, 3 seeds per gamma)")
    prompt = torch.tensor([data.CharTokenizer().encode("The scheduler ").tolist()])
    n_new = 100
    gammas = (2, 4, 6)
    ids = torch.randint(0, 96, (1, 8), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        tc, dc = KVCache.for_model(target, 1, 128), KVCache.for_model(draft, 1, 128)
        forward_cached(target, prompt, tc)
        forward_cached(draft, prompt, dc)

        def step(m, c, x):
            c.length = 20
            forward_cached(m, x, c)

        fns = {
            "target": lambda: step(target, tc, ids[:, :1]),
            "draft": lambda: step(draft, dc, ids[:, :1]),
        }
        for g in gammas:  # one target pass over g + 1 tokens
            fns[g] = lambda g=g: step(target, tc, ids[:, : g + 1])
        cost = compare_times(fns, 30)
    ratio = cost["draft"] / cost["target"]
    print(
        f"   draft/target cost per decode step c = {ratio:.3f}; verifying g + 1 tokens costs "
        + ", ".join(f"{cost[g] / cost['target']:.2f}x (g={g})" for g in gammas)
        + " a one-token step"
    )

    def plain(seed):
        generate(target, prompt, n_new, 1.0, generator=torch.Generator().manual_seed(seed))

    for gamma in gammas:
        stats = []

        def spec(seed, gamma=gamma, stats=stats):
            g = torch.Generator().manual_seed(seed)
            stats.append(
                speculative.speculative_generate(
                    target, draft, prompt, n_new, gamma, 1.0, generator=g
                )[1]
            )

        times = compare_times({"plain": lambda: plain(0), "spec": lambda: spec(0)}, 5)
        stats.clear()  # acceptance statistics from three distinct seeds
        for seed in (0, 1, 2):
            spec(seed)
        acc = sum(s["accepted"] for s in stats)
        alpha = acc / (acc + sum(s["rejected"] for s in stats))
        per_pass = sum(n_new for _ in stats) / sum(s["rounds"] for s in stats)
        formula = speculative.expected_tokens_per_round(alpha, gamma)
        paper = speculative.expected_speedup(alpha, gamma, ratio)  # verify costs one step
        round_cost = gamma * cost["draft"] + cost[gamma]  # measured verification cost
        predicted = formula * cost["target"] / round_cost
        measured = times["plain"] / times["spec"]
        print(
            f"   gamma {gamma}: alpha {alpha:.2f}; tokens per target pass {per_pass:.2f} vs formula "
            f"{formula:.2f} ({per_pass / formula - 1:+.0%}); wall-clock speed-up {measured:.2f}x vs "
            f"predicted {predicted:.2f}x ({measured / predicted - 1:+.0%}) [paper's formula, "
            f"verification as cheap as one step: {paper:.2f}x]"
        )


def int8_decode(model: gpt.GPT, val_ids: torch.Tensor) -> None:
    print("5. int8 weight-only vs fp32")
    qmodel = int8.quantize_model_int8(model)
    prompt = torch.zeros(1, 8, dtype=torch.long)
    t = compare_times(
        {
            "fp32": lambda: generate(model, prompt, 100),
            "int8": lambda: generate(qmodel, prompt, 100),
        },
        3,
    )
    stream = data.batches(val_ids, 8, model.config.block_size, seed=1)
    val = [next(stream) for _ in range(4)]
    with torch.no_grad():
        loss = {
            n: float(np.mean([float(m.loss(x, y)) for x, y in val]))
            for n, m in (("fp32", model), ("int8", qmodel))
        }
    wb = {"fp32": int8.weight_bytes(model), "int8": int8.weight_bytes(qmodel)}
    for name in ("fp32", "int8"):
        print(
            f"   {name}: {wb[name]:>9,} weight bytes, {100 / t[name]:7.0f} tok/s, "
            f"validation loss {loss[name]:.4f} (perplexity {np.exp(loss[name]):.3f})"
        )
    print(
        f"   int8/fp32: bytes {wb['int8'] / wb['fp32']:.3f}x, tokens/s {t['fp32'] / t['int8']:.2f}x"
    )
    lin = model.blocks[0].mlp.up_proj
    qlin = int8.Int8Linear.from_linear(lin)
    x = torch.randn(1, lin.in_features)
    with torch.no_grad():
        k = compare_times(
            {
                "fp32 F.linear": lambda: lin(x),
                "Int8Linear (dequantize, then F.linear)": lambda: qlin(x),
                "aten._weight_int8pack_mm": lambda: torch.ops.aten._weight_int8pack_mm(
                    x, qlin.weight_int8, qlin.scale
                ),
            },
            50,
        )
    base = k["fp32 F.linear"]
    print(
        f"   one {lin.in_features}->{lin.out_features} layer at batch 1, time relative to fp32: "
        + ", ".join(f"{n} {v / base:.2f}x" for n, v in k.items())
    )


def _shared_trace(n, system_len, question, output, rate, vocab, n_system, seed=0):
    rng = np.random.default_rng(seed)
    systems = [rng.integers(0, vocab, system_len).tolist() for _ in range(n_system)]
    arrivals = np.cumsum(rng.exponential(1 / rate, n))
    return [
        batching.Request(
            i,
            float(arrivals[i]),
            systems[i % n_system] + rng.integers(0, vocab, int(rng.integers(*question))).tolist(),
            int(rng.integers(*output)),
        )
        for i in range(n)
    ]


def _serve(trace, executor, manager, budget=None, token_times=None):
    computed = []

    def counting(chunks, decode):
        computed.append(sum(c.length for c in chunks))
        return executor(chunks, decode)

    sched = chunked_prefill.ChunkedScheduler(8, manager, budget)
    chunked_prefill.run_chunked(trace, sched, counting, token_times)
    return batching.summarize(trace), sum(computed)


def prefix_caching(model: gpt.GPT) -> None:
    print("6. prefix caching (2 shared 80-token system prompts, 32 requests, greedy)")
    ttft, tokens, hit = {False: [], True: []}, {}, 0.0
    for _ in range(3):  # interleaved rounds: both variants see the same load
        for caching in (False, True):
            trace = _shared_trace(32, 80, (8, 16), (8, 9), 300.0, 96, 2)
            runner = chunked_prefill.ChunkedModelRunner(model, 256, 8, prefix_caching=caching)
            summary, computed = _serve(trace, runner, runner.manager)
            ttft[caching].append(summary["ttft_mean_s"])
            hit = max(hit, getattr(runner.manager, "hit_rate", 0.0))
            tokens[caching] = computed
        print(
            f"   round: TTFT off {ttft[False][-1] * 1e3:.1f} ms, on {ttft[True][-1] * 1e3:.1f} ms"
        )
    print(
        f"   tiny GPT on this CPU: block hit rate {hit:.0%}, best mean TTFT with/without cache "
        f"{min(ttft[True]) / min(ttft[False]):.2f}x; prompt tokens computed {tokens[True]} vs "
        f"{tokens[False]} ({tokens[True] / tokens[False]:.2f}x)"
    )
    cost = chunked_prefill.ChunkCost(batching.CostModel.llama2_7b_a100())
    sim = {}
    for caching in (False, True):
        trace = _shared_trace(200, 1000, (50, 201), (50, 301), 4.0, 32000, 4)
        manager = (prefix_cache.PrefixCachingBlockManager if caching else paged.BlockManager)(
            4000, 16
        )
        sim[caching] = _serve(trace, cost, manager)
    print(
        f"   Llama-2-7B / A100 cost model, 4 system prompts of 1,000 tokens: mean TTFT "
        f"{sim[False][0]['ttft_mean_s'] * 1e3:.0f} ms -> {sim[True][0]['ttft_mean_s'] * 1e3:.0f} ms "
        f"({sim[True][0]['ttft_mean_s'] / sim[False][0]['ttft_mean_s']:.2f}x), prompt tokens "
        f"computed {sim[True][1] / sim[False][1]:.2f}x"
    )
    res = {}
    for budget in (None, 256):
        trace = _shared_trace(100, 1500, (1, 501), (50, 301), 2.0, 32000, 100, seed=2)
        times = {}
        summary, _ = _serve(trace, cost, paged.BlockManager(8000, 16), budget, times)
        res[budget] = (summary, chunked_prefill.max_token_gap(times))
    (s0, g0), (s1, g1) = res[None], res[256]
    print(
        f"   chunked prefill (budget 256 vs whole prompts, cost model): worst stall "
        f"{g1['gap_max_s'] / g0['gap_max_s']:.2f}x, mean TTFT "
        f"{s1['ttft_mean_s'] / s0['ttft_mean_s']:.2f}x, mean TPOT "
        f"{s1['tpot_mean_s'] / s0['tpot_mean_s']:.2f}x"
    )


def main() -> None:
    tok = data.CharTokenizer()
    _, val_ids = data.split(tok.encode(data.load_corpus()))
    cfg = gpt.GPTConfig(n_embd=128, n_head=4, n_layer=4, block_size=128)
    target, _ = gpt.pretrain(cfg, steps=200, batch_size=8, lr=3e-3, seed=0)
    draft_cfg = gpt.GPTConfig(n_embd=32, n_head=2, n_layer=1, block_size=128, seed=1)
    draft, _ = gpt.pretrain(draft_cfg, steps=200, batch_size=8, lr=5e-3, seed=1)
    target.eval()
    draft.eval()
    print(f"target {target.num_params():,} parameters, draft {draft.num_params():,}")
    kv_cache_speed(target)
    batching_throughput(gpt.GPT(gpt.GPTConfig(n_embd=64, block_size=128)).eval())  # Ch. 10's size
    kv_waste()
    speculative_speedup(target, draft)
    int8_decode(target, val_ids)
    prefix_caching(target)


if __name__ == "__main__":
    main()
