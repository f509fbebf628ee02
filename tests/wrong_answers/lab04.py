"""Plausible wrong answers to lab 04; each must be rejected by its exercise's checks."""

from labs.course.wrong_answers import Wrong

WRONG = [
    Wrong(
        1,
        "counts the tied weight twice (state_dict)",
        old="params = list(model.parameters())",
        new="params = list(model.state_dict().values())",
    ),
    Wrong(1, "forgets AdamW's step counters", old="8 * n + 4 * len(params)", new="8 * n"),
    Wrong(
        1,
        "counts the step counter as int64",
        old="8 * n + 4 * len(params)",
        new="8 * n + 8 * len(params)",
    ),
    Wrong(
        1,
        "keeps an fp32 master copy as in mixed precision",
        old="8 * n + 4 * len(params)",
        new="12 * n + 4 * len(params)",
    ),
    Wrong(
        1,
        "one step counter for the whole optimizer, not one per parameter",
        old="8 * n + 4 * len(params)",
        new="8 * n + 4",
    ),
    Wrong(
        2,
        "forgets the position ids",
        old="embeddings = 8 * b * s + 8 * s",
        new="embeddings = 8 * b * s",
    ),
    Wrong(
        2,
        "counts int64 targets as 4 bytes",
        old="loss = 4 * b * s * V + 8 * b * s + 4",
        new="loss = 4 * b * s * V + 4 * b * s + 4",
    ),
    Wrong(
        2,
        "forgets the final norm's statistics",
        old="final_norm = 4 * (s * b * h + 2 * b * s) + 4 * s * b * h",
        new="final_norm = 4 * s * b * h + 4 * s * b * h",
    ),
    Wrong(
        3,
        "no checkpointing at all",
        old="x = checkpoint(block, x, use_reentrant=False)",
        new="x = block(x)",
    ),
    Wrong(
        3,
        "forgets the final layer norm",
        old="model.lm_head(model.ln_f(x))",
        new="model.lm_head(x)",
    ),
    Wrong(
        3,
        "positions hard-coded for sequence length 64",
        old="pos = torch.arange(idx.shape[1], device=idx.device)",
        new="pos = torch.arange(64, device=idx.device)",
    ),
    Wrong(
        2,
        "hard-codes the vocabulary size 96",
        old="loss = 4 * b * s * V + 8 * b * s + 4",
        new="loss = 4 * b * s * 96 + 8 * b * s + 4",
    ),
    Wrong(
        2,
        "forgets the loss's fp32 scalar",
        old="loss = 4 * b * s * V + 8 * b * s + 4",
        new="loss = 4 * b * s * V + 8 * b * s",
    ),
    Wrong(
        3,
        "checkpoints every block but the last",
        old="x = checkpoint(block, x, use_reentrant=False)",
        new="x = checkpoint(block, x, use_reentrant=False) if block is not model.blocks[-1] else block(x)",
    ),
    Wrong(
        3,
        "checkpoints every other block only",
        block="""
        pos = torch.arange(idx.shape[1], device=idx.device)
        x = model.tok_emb(idx) + model.pos_emb(pos)
        for k, block in enumerate(model.blocks):
            x = checkpoint(block, x, use_reentrant=False) if k % 2 == 0 else block(x)
        logits = model.lm_head(model.ln_f(x))
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
    """,
    ),
    Wrong(4, "multiplies instead of divides", old="g.div_(scale)", new="g.mul_(scale)"),
    Wrong(
        4,
        "checks for inf only, not NaN",
        old="torch.isfinite(g).all()",
        new="~torch.isinf(g).any()",
    ),
    Wrong(4, "divides into a new tensor, not in place", old="g.div_(scale)", new="g = g / scale"),
    Wrong(
        4,
        "stops at the first non-finite gradient, leaving the rest undivided",
        block="""
        for g in grads:
            if not bool(torch.isfinite(g).all()):
                return False
            g.div_(scale)
        return True
    """,
        part=0,
    ),
    Wrong(
        4,
        "tests the sum of each gradient, which overflows in fp16",
        old="torch.isfinite(g).all()",
        new="torch.isfinite(g.sum())",
    ),
    Wrong(
        4,
        "grows one step late (>)",
        block="""
        if found_inf:
            return scale * backoff_factor, 0
        good_steps += 1
        if good_steps > growth_interval:
            return scale * growth_factor, 0
        return scale, good_steps
    """,
        part=1,
    ),
    Wrong(
        4,
        "does not reset the clean-step count on overflow",
        block="""
        if found_inf:
            return scale * backoff_factor, good_steps
        good_steps += 1
        if good_steps == growth_interval:
            return scale * growth_factor, 0
        return scale, good_steps
    """,
        part=1,
    ),
    Wrong(
        4,
        "hard-codes the factors 2 and 0.5",
        block="""
        if found_inf:
            return scale * 0.5, 0
        good_steps += 1
        if good_steps == growth_interval:
            return scale * 2.0, 0
        return scale, good_steps
    """,
        part=1,
    ),
    Wrong(
        5,
        "ZeRO shards over all GPUs, not the data-parallel ones",
        old="gpus // tp, zero_stage",
        new="gpus, zero_stage",
    ),
    Wrong(
        5, "fp32 activations not doubled", old='act * (2 if precision == "fp32" else 1)', new="act"
    ),
    Wrong(5, "fp32 gradients under mixed precision", old="(2, 2, 12)", new="(2, 4, 12)"),
    Wrong(5, "hard-codes 64 GPUs", old="gpus // tp, zero_stage", new="64 // tp, zero_stage"),
    Wrong(
        5,
        "tensor parallelism not applied to the model states",
        old="psi / tp, gpus",
        new="psi, gpus",
    ),
]
