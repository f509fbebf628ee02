"""Adversarial wrong answers for lab 10 (inference: KV cache, GQA, sampling, paging, batching)."""

from labs.course.wrong_answers import Wrong

WRONG = [
    Wrong(
        1,
        "grows with torch.cat instead of writing into the pre-allocated cache",
        block="""
        t = k_new.shape[2]
        end = length + t
        if end > cache_k.shape[2]:
            raise ValueError(f"kv_update: {length} cached + {t} new tokens exceed {cache_k.shape[2]}")
        keys = torch.cat([cache_k[:, :, :length], k_new], dim=2)
        values = torch.cat([cache_v[:, :, :length], v_new], dim=2)
        cache_k[:, :, length:end] = k_new
        cache_v[:, :, length:end] = v_new
        return keys, values, end
        """,
    ),
    Wrong(
        2,
        "tensor.repeat: heads interleaved (0, 1, 0, 1) instead of consecutive",
        old="return k[:, :, None].expand(b, h_kv, n_rep, t, d).reshape(b, h_kv * n_rep, t, d)",
        new="return k.repeat(1, n_rep, 1, 1)",
    ),
    Wrong(
        2,
        "expands along the wrong axis (repeats the whole head block)",
        old="return k[:, :, None].expand(b, h_kv, n_rep, t, d).reshape(b, h_kv * n_rep, t, d)",
        new="return k[:, None].expand(b, n_rep, h_kv, t, d).reshape(b, h_kv * n_rep, t, d)",
    ),
    Wrong(
        3,
        "counts the query heads instead of the KV heads",
        old="2 * n_layers * n_kv_heads * head_dim",
        new="2 * n_layers * n_heads * head_dim",
    ),
    Wrong(
        3,
        "counts only the keys (forgets the values)",
        old="2 * n_layers * n_kv_heads * head_dim",
        new="n_layers * n_kv_heads * head_dim",
    ),
    Wrong(
        4,
        "keeps tokens while the cumulative mass including themselves is <= top_p",
        old="keep = torch.zeros_like(probs, dtype=torch.bool).scatter(-1, order, mass_above < top_p)",
        new=(
            "keep = torch.zeros_like(probs, dtype=torch.bool).scatter(\n"
            "        -1, order, (mass_above + sorted_p <= top_p) | (mass_above == 0)\n    )"
        ),
    ),
    Wrong(
        4,
        "threshold on the probability value: ties at the cut are all kept",
        block="""
        sorted_p, order = torch.sort(probs, dim=-1, descending=True)
        mass_above = torch.cumsum(sorted_p, dim=-1) - sorted_p
        n_keep = (mass_above < top_p).sum(dim=-1, keepdim=True)
        cutoff = sorted_p.gather(-1, n_keep - 1)
        kept = probs * (probs >= cutoff)
        return kept / kept.sum(dim=-1, keepdim=True)
        """,
    ),
    Wrong(
        4,
        "filters the input in place (and returns it)",
        old="kept = probs * keep\n    return kept / kept.sum(dim=-1, keepdim=True)",
        new="probs.mul_(keep)\n    return probs.div_(probs.sum(dim=-1, keepdim=True))",
    ),
    Wrong(
        5,
        "assumes the blocks are contiguous in the pool, starting at the table's first block",
        old="blocks = pool[torch.as_tensor(block_table, dtype=torch.long)]",
        new="blocks = pool[block_table[0] : block_table[0] + len(block_table)]",
    ),
    Wrong(
        6,
        "pops admitted requests from the caller's waiting list",
        old="queue = list(waiting)",
        new="queue = waiting",
    ),
    Wrong(
        6,
        "a retired request returns only its prompt's blocks",
        old='free_blocks += math.ceil((req["prompt_len"] + req["generated"]) / block_size)',
        new='free_blocks += math.ceil(req["prompt_len"] / block_size)',
    ),
    Wrong(
        7,
        "on a rejection samples from the target p instead of the residual",
        old="return i, int(torch.multinomial(residual / residual.sum(), 1, generator=generator))",
        new="return i, int(torch.multinomial(p[i], 1, generator=generator))",
    ),
    Wrong(
        7,
        "draws one uniform for all drafts",
        block="""
        gamma = len(draft_tokens)
        r = float(torch.rand((), generator=generator))
        for i in range(gamma):
            x = int(draft_tokens[i])
            if r * q[i, x] < p[i, x]:
                continue
            residual = torch.clamp(p[i] - q[i], min=0.0)
            return i, int(torch.multinomial(residual / residual.sum(), 1, generator=generator))
        return gamma, int(torch.multinomial(p[gamma], 1, generator=generator))
        """,
    ),
    Wrong(
        7,
        "the bonus token comes from the last draft's row p[gamma - 1]",
        old="return gamma, int(torch.multinomial(p[gamma], 1, generator=generator))",
        new="return gamma, int(torch.multinomial(p[gamma - 1], 1, generator=generator))",
    ),
    Wrong(
        8,
        "hashes the partial last block too",
        old="for i in range(len(tokens) // block_size):",
        new="for i in range(-(-len(tokens) // block_size)):",
    ),
    Wrong(
        8,
        "keys not chained: each block hashed on its own",
        old="parent = hash((parent, *tokens[i * block_size : (i + 1) * block_size]))\n        keys.append(parent)",
        new="keys.append(hash((-1, *tokens[i * block_size : (i + 1) * block_size])))",
    ),
    Wrong(
        8,
        "starts the chain from 0 instead of -1",
        old="keys, parent = [], -1",
        new="keys, parent = [], 0",
    ),
    Wrong(
        9,
        "does not stop at the first miss (skips it and keeps looking)",
        old="""        if block is None:
            break""",
        new="""        if block is None:
            continue""",
    ),
    Wrong(
        9,
        "works on a copy of the free list (the caller's list is not updated)",
        old="blocks = []",
        new="blocks = []\n    free_list = list(free_list)",
    ),
    Wrong(
        10,
        "computes the scale in the input dtype (bf16/fp16 rounding of max|x| / 127)",
        old="amax = x.float().abs().amax(dim=-1, keepdim=True)\n    scale = torch.where(amax > 0, amax / 127, torch.ones_like(amax))",
        new=(
            "amax = x.abs().amax(dim=-1, keepdim=True)\n"
            "    scale = torch.where(amax > 0, amax / 127, torch.ones_like(amax)).float()"
        ),
    ),
    Wrong(
        10,
        "truncates instead of rounding",
        old="q = torch.round(x.float() / scale).clamp(-127, 127).to(torch.int8)",
        new="q = (x.float() / scale).clamp(-127, 127).to(torch.int8)",
    ),
    Wrong(
        10,
        "an all-zero head gets a tiny scale instead of 1",
        old="scale = torch.where(amax > 0, amax / 127, torch.ones_like(amax))",
        new="scale = (amax / 127).clamp_min(1e-8)",
    ),
]
