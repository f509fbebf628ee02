"""Plausible wrong answers to lab 10; each must be rejected by its exercise's checks."""

from labs.course.wrong_answers import Wrong

WRONG = [
    Wrong(
        1,
        "writes the new keys into the value cache",
        old="cache_v[:, :, length:end] = v_new",
        new="cache_v[:, :, length:end] = k_new",
    ),
    Wrong(
        1,
        "returns only the tokens cached before this call",
        old="return cache_k[:, :, :end], cache_v[:, :, :end], end",
        new="return cache_k[:, :, :length], cache_v[:, :, :length], end",
    ),
    Wrong(
        1,
        "silently truncates a request that does not fit",
        block="t = k_new.shape[2]\n"
        "end = min(length + t, cache_k.shape[2])\n"
        "cache_k[:, :, length:end] = k_new[:, :, : end - length]\n"
        "cache_v[:, :, length:end] = v_new[:, :, : end - length]\n"
        "return cache_k[:, :, :end], cache_v[:, :, :end], end",
    ),
    Wrong(
        1,
        "returns copies instead of views of the cache",
        old="return cache_k[:, :, :end], cache_v[:, :, :end], end",
        new="return cache_k[:, :, :end].clone(), cache_v[:, :, :end].clone(), end",
    ),
    Wrong(
        2,
        "tiles the heads (0, 1, 0, 1) instead of repeating each",
        block="return k.repeat(1, n_rep, 1, 1)",
    ),
    Wrong(
        2,
        "expands on the wrong axis (same tiled order)",
        old="k[:, :, None].expand(b, h_kv, n_rep, t, d)",
        new="k[:, None].expand(b, n_rep, h_kv, t, d)",
    ),
    Wrong(2, "repeats along time", block="return k.repeat_interleave(n_rep, dim=2)"),
    Wrong(
        3,
        "counts query heads, as the seed's formula does",
        old="n_kv_heads * head_dim",
        new="n_heads * head_dim",
    ),
    Wrong(3, "forgets the values (no factor 2)", old="return 2 * n_layers", new="return n_layers"),
    Wrong(
        3,
        "counts bits, not bytes",
        old="bytes_per_value * tokens",
        new="8 * bytes_per_value * tokens",
    ),
    Wrong(3, "ignores the batch", old="* tokens * batch", new="* tokens"),
    Wrong(
        4,
        "inclusive mass: drops the token that reaches top_p",
        old="mass_above < top_p",
        new="mass_above + sorted_p < top_p",
    ),
    Wrong(
        4,
        "keeps one token too many on an exact boundary",
        old="mass_above < top_p",
        new="mass_above <= top_p",
    ),
    Wrong(
        4,
        "does not renormalise",
        old="return kept / kept.sum(dim=-1, keepdim=True)",
        new="return kept",
    ),
    Wrong(
        5,
        "ignores the block table (assumes blocks 0, 1, 2, ...)",
        block="return pool.reshape(-1, *pool.shape[2:])[:length]",
    ),
    Wrong(5, "returns whole blocks (the partial last block padded)", old="[:length]", new=""),
    Wrong(
        5,
        "sorts the block table",
        old="torch.as_tensor(block_table, dtype=torch.long)",
        new="torch.as_tensor(sorted(block_table), dtype=torch.long)",
    ),
    Wrong(
        6,
        "admits before retiring finished requests",
        block="queue = list(waiting)\n"
        "still = list(running)\n"
        "while queue and len(still) < max_batch:\n"
        '    need = math.ceil(queue[0]["prompt_len"] / block_size)\n'
        "    if need > free_blocks:\n"
        "        break\n"
        "    free_blocks -= need\n"
        "    still.append(queue.pop(0))\n"
        "finished = []\n"
        "for req in list(still):\n"
        '    if req["generated"] >= req["output_len"]:\n'
        '        finished.append(req["id"])\n'
        '        free_blocks += math.ceil((req["prompt_len"] + req["generated"]) / block_size)\n'
        "        still.remove(req)\n"
        "return still, queue, free_blocks, finished",
    ),
    Wrong(
        6,
        "floor instead of ceil for the prompt's blocks",
        old='need = math.ceil(queue[0]["prompt_len"] / block_size)',
        new='need = queue[0]["prompt_len"] // block_size',
    ),
    Wrong(
        6,
        "lets a later, smaller request overtake the head of the queue",
        block="still, finished = [], []\n"
        "for req in running:\n"
        '    if req["generated"] >= req["output_len"]:\n'
        '        finished.append(req["id"])\n'
        '        free_blocks += math.ceil((req["prompt_len"] + req["generated"]) / block_size)\n'
        "    else:\n"
        "        still.append(req)\n"
        "queue = []\n"
        "for req in waiting:\n"
        '    need = math.ceil(req["prompt_len"] / block_size)\n'
        "    if len(still) < max_batch and need <= free_blocks:\n"
        "        free_blocks -= need\n"
        "        still.append(req)\n"
        "    else:\n"
        "        queue.append(req)\n"
        "return still, queue, free_blocks, finished",
    ),
    Wrong(
        6,
        "frees only the prompt's blocks",
        old='math.ceil((req["prompt_len"] + req["generated"]) / block_size)',
        new='math.ceil(req["prompt_len"] / block_size)',
    ),
    Wrong(
        6,
        "off by one: finished only past output_len",
        old='>= req["output_len"]',
        new='> req["output_len"]',
    ),
    Wrong(
        7,
        "resamples from the target p instead of the residual",
        old="residual = torch.clamp(p[i] - q[i], min=0.0)",
        new="residual = p[i].clone()",
    ),
    Wrong(
        7,
        "samples the replacement from the draft q",
        old="residual = torch.clamp(p[i] - q[i], min=0.0)",
        new="residual = q[i].clone()",
    ),
    Wrong(
        7,
        "bonus token from the last draft's row of p",
        old="torch.multinomial(p[gamma], 1",
        new="torch.multinomial(p[gamma - 1], 1",
    ),
    Wrong(
        7,
        "accepts with probability min(1, q/p)",
        old="if r * q[i, x] < p[i, x]:",
        new="if r * p[i, x] < q[i, x]:",
    ),
    Wrong(
        7,
        "accepts every draft the target finds possible",
        old="if r * q[i, x] < p[i, x]:",
        new="if p[i, x] > 0:",
    ),
    Wrong(
        1,
        "refuses a request that exactly fills the cache (>= instead of >)",
        old="if end > cache_k.shape[2]:",
        new="if end >= cache_k.shape[2]:",
    ),
    Wrong(
        4,
        "keeps every token at least as likely as the last one kept (a threshold: ties all stay)",
        block="sorted_p, _ = torch.sort(probs, dim=-1, descending=True)\n"
        "mass_above = torch.cumsum(sorted_p, dim=-1) - sorted_p\n"
        'smallest = sorted_p.masked_fill(mass_above >= top_p, float("inf")).amin(-1, keepdim=True)\n'
        "kept = probs * (probs >= smallest)\n"
        "return kept / kept.sum(dim=-1, keepdim=True)",
    ),
    Wrong(
        6,
        "refuses a request that exactly fits the free blocks (>= instead of >)",
        old="if need > free_blocks:",
        new="if need >= free_blocks:",
    ),
    Wrong(
        6,
        "reserves one block too many when the prompt is a multiple of the block size",
        old='need = math.ceil(queue[0]["prompt_len"] / block_size)',
        new='need = queue[0]["prompt_len"] // block_size + 1',
    ),
    Wrong(
        6,
        "admits one request past max_batch (<= instead of <)",
        old="while queue and len(still) < max_batch:",
        new="while queue and len(still) <= max_batch:",
    ),
    Wrong(
        8,
        "hashes each block without its prefix",
        old="parent = hash((parent, *tokens[i * block_size : (i + 1) * block_size]))",
        new="parent = hash((-1, *tokens[i * block_size : (i + 1) * block_size]))",
    ),
    Wrong(
        8,
        "gives the partly filled last block a key too",
        old="range(len(tokens) // block_size)",
        new="range(-(-len(tokens) // block_size))",
    ),
    Wrong(
        8,
        "off by one: drops the last full block",
        old="range(len(tokens) // block_size)",
        new="range(len(tokens) // block_size - 1)",
    ),
    Wrong(
        9,
        "takes the block holding the prompt's last token from the cache",
        old="keys[: (n_tokens - 1) // block_size]",
        new="keys[: n_tokens // block_size]",
    ),
    Wrong(
        9,
        "rounds the usable blocks up (counts the partial block before the last token)",
        old="keys[: (n_tokens - 1) // block_size]",
        new="keys[: -(-(n_tokens - 1) // block_size)]",
    ),
    Wrong(
        9, "skips a miss and keeps looking", old="            break\n", new="            continue\n"
    ),
    Wrong(
        9,
        "leaves a revived block on the free list",
        old="        if ref_count[block] == 0:\n            free_list.remove(block)\n",
        new="",
    ),
    Wrong(
        9,
        "sets the reference count to 1 instead of adding one",
        old="ref_count[block] += 1",
        new="ref_count[block] = 1",
    ),
    Wrong(
        9,
        "counts every prompt token but the last as cached when all lookups hit",
        old="return blocks, len(blocks) * block_size",
        new="return blocks, (n_tokens - 1 if blocks else 0)",
    ),
    Wrong(
        10,
        "one scale per token shared by all heads",
        old="amax = x.float().abs().amax(dim=-1, keepdim=True)",
        new="amax = x.float().abs().amax(dim=(-2, -1), keepdim=True).expand(*x.shape[:-1], 1)",
    ),
    Wrong(
        10,
        "divides by 128 and clamps to [-128, 128] (128 wraps around in int8)",
        old="scale = torch.where(amax > 0, amax / 127, torch.ones_like(amax))\n"
        "    q = torch.round(x.float() / scale).clamp(-127, 127)",
        new="scale = torch.where(amax > 0, amax / 128, torch.ones_like(amax))\n"
        "    q = torch.round(x.float() / scale).clamp(-128, 128)",
    ),
    Wrong(
        10,
        "divides by 128 (the largest value clamps to 127: an error of a whole step)",
        old="amax / 127,",
        new="amax / 128,",
    ),
    Wrong(
        10,
        "truncates instead of rounding",
        old="torch.round(x.float() / scale)",
        new="(x.float() / scale)",
    ),
    Wrong(
        10,
        "a zero head gets scale 0 (0 / 0 = NaN)",
        old="scale = torch.where(amax > 0, amax / 127, torch.ones_like(amax))",
        new="scale = amax / 127",
    ),
    Wrong(
        10,
        "returns the scales in the input dtype",
        old="return q, scale",
        new="return q, scale.to(x.dtype)",
    ),
    # adversary; slipped at 347915e: length 3 in a cache of 4, 2 new tokens: ValueError, but slot 3 was overwritten
    Wrong(
        1,
        "writes before checking the size (a bad request corrupts the cache)",
        block="""
        t = k_new.shape[2]
        end = length + t
        cache_k[:, :, length:end] = k_new[:, :, : max(0, cache_k.shape[2] - length)]
        cache_v[:, :, length:end] = v_new[:, :, : max(0, cache_v.shape[2] - length)]
        if end > cache_k.shape[2]:
            raise ValueError(f"kv_update: {length} cached + {t} new tokens exceed {cache_k.shape[2]}")
        return cache_k[:, :, :end], cache_v[:, :, :end], end
        """,
    ),
    # adversary; slipped at 347915e: when nobody is admitted the returned waiting list `is` the caller's list
    Wrong(
        6,
        "aliases the input: the waiting list is returned as is when nobody is admitted",
        block="""
        still, finished = [], []
        for req in running:
            if req["generated"] >= req["output_len"]:
                finished.append(req["id"])
                free_blocks += math.ceil((req["prompt_len"] + req["generated"]) / block_size)
            else:
                still.append(req)
        queue = waiting
        while queue and len(still) < max_batch:
            need = math.ceil(queue[0]["prompt_len"] / block_size)
            if need > free_blocks:
                break
            free_blocks -= need
            still.append(queue[0])
            queue = queue[1:]
        return still, queue, free_blocks, finished
        """,
    ),
    # adversary; slipped at 347915e: two runs with the same seeded generator give different tokens
    Wrong(
        7,
        "ignores the generator (global RNG): a seeded run is not reproducible",
        block="""
        gamma = len(draft_tokens)
        for i in range(gamma):
            x = int(draft_tokens[i])
            r = float(torch.rand(()))
            if r * q[i, x] < p[i, x]:
                continue
            residual = torch.clamp(p[i] - q[i], min=0.0)
            return i, int(torch.multinomial(residual / residual.sum(), 1))
        return gamma, int(torch.multinomial(p[gamma], 1))
        """,
    ),
]
