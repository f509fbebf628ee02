"""Adversarial wrong answers for lab 4 (training memory)."""

from labs.course.wrong_answers import Wrong

WRONG = [
    Wrong(
        1,
        "counts the tied embedding/head weight twice",
        old="params = list(model.parameters())",
        new="params = [p for _, p in model.named_parameters(remove_duplicate=False)]",
    ),
    Wrong(
        2,
        "position ids per sequence (b * s) instead of one arange(s)",
        old="embeddings = 8 * b * s + 8 * s",
        new="embeddings = 8 * b * s + 8 * b * s",
    ),
    Wrong(
        2,
        "forgets the head's input (the normalised output)",
        old="final_norm = 4 * (s * b * h + 2 * b * s) + 4 * s * b * h",
        new="final_norm = 4 * (s * b * h + 2 * b * s)",
    ),
    Wrong(
        2,
        "counts the logits as well as the log-softmax output",
        old="loss = 4 * b * s * V + 8 * b * s + 4",
        new="loss = 8 * b * s * V + 8 * b * s + 4",
    ),
    Wrong(
        3,
        "checkpoints every block but the last",
        block="""
        pos = torch.arange(idx.shape[1])
        x = model.tok_emb(idx) + model.pos_emb(pos)
        for block in model.blocks[:-1]:
            x = checkpoint(block, x, use_reentrant=False)
        x = model.blocks[-1](x)
        logits = model.lm_head(model.ln_f(x))
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
        """,
    ),
    Wrong(
        3,
        "forgets the position embedding",
        old="x = model.tok_emb(idx) + model.pos_emb(pos)",
        new="x = model.tok_emb(idx)",
    ),
    Wrong(
        3,
        "skips the final layer norm",
        old="logits = model.lm_head(model.ln_f(x))",
        new="logits = model.lm_head(x)",
    ),
    Wrong(
        4,
        "grows one clean step late (> instead of ==)",
        old="if good_steps == growth_interval:",
        new="if good_steps > growth_interval:",
    ),
    Wrong(
        4,
        "does not reset the clean-step count after growing",
        old="return scale * growth_factor, 0",
        new="return scale * growth_factor, good_steps",
    ),
    Wrong(
        4,
        "an inf halves the scale but keeps the clean-step count",
        old="return scale * backoff_factor, 0",
        new="return scale * backoff_factor, good_steps",
    ),
    Wrong(
        4,
        "checks finiteness on the sum (an fp16 sum of large finite values overflows)",
        old="finite = all(bool(torch.isfinite(g).all()) for g in grads)",
        new="finite = all(bool(torch.isfinite(g.sum())) for g in grads)",
    ),
    Wrong(
        5,
        "ZeRO shards over all GPUs instead of the gpus // tp data-parallel ranks",
        old="zero.zero_bytes_per_rank(psi / tp, gpus // tp, zero_stage, *per_param)",
        new="zero.zero_bytes_per_rank(psi / tp, gpus, zero_stage, *per_param)",
    ),
    Wrong(
        5,
        "forgets to double the activations in fp32",
        old='out["activations"] = act * (2 if precision == "fp32" else 1)',
        new='out["activations"] = act',
    ),
    Wrong(
        5,
        "activations not split by tensor parallelism (t=1)",
        old="seq, micro_batch, hidden, heads, t=tp, recompute=recompute",
        new="seq, micro_batch, hidden, heads, t=1, recompute=recompute",
    ),
    Wrong(
        5,
        "the total leaves out the activations",
        old='out["total"] = out["weights"] + out["gradients"] + out["optimizer"] + out["activations"]',
        new='out["total"] = out["weights"] + out["gradients"] + out["optimizer"]',
    ),
]
