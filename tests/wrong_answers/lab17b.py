"""Plausible wrong answers to lab 17b; each must be rejected by its exercise's checks."""

from labs.course.wrong_answers import Wrong

WRONG = [
    # exercise 1: activation bytes under TP and TP + SP
    Wrong(
        1,
        "forgets the layer norms' statistics",
        old="replicated = 4 * sbh + 4 * bs",
        new="replicated = 4 * sbh",
    ),
    Wrong(
        1,
        "splits the layer norms under plain TP too",
        old="numbers = (replicated + split) / t if sp else replicated + split / t",
        new="numbers = (replicated + split) / t",
    ),
    Wrong(1, "2-byte (16-bit) elements", old="return 4 * numbers", new="return 2 * numbers"),
    Wrong(
        1,
        "forgets the log-sum-exp of attention",
        old="split = 12 * sbh + a * bs",
        new="split = 12 * sbh",
    ),
    Wrong(
        1,
        "SP splits the layer norms' inputs and outputs but keeps their statistics whole",
        old="numbers = (replicated + split) / t if sp else replicated + split / t",
        new="numbers = (replicated - 4 * bs + split) / t + 4 * bs if sp else replicated + split / t",
    ),
    Wrong(
        1,
        "GeLU input and output counted h wide (the MLP is 4h wide)",
        old="split = 12 * sbh + a * bs",
        new="split = 6 * sbh + a * bs",
    ),
    # exercise 2: one ring-attention step
    Wrong(
        2,
        "does not rescale the accumulated output",
        old="alpha[:, None] * acc + p @ v",
        new="acc + p @ v",
    ),
    Wrong(2, "does not rescale the running sum", old="alpha * l + p.sum(-1)", new="l + p.sum(-1)"),
    Wrong(
        2,
        "NaN on rows whose keys are all hidden (no guard for m = -inf)",
        old="safe = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)",
        new="safe = m_new",
    ),
    Wrong(
        2,
        "causal mask hides the diagonal too",
        old="k_pos[None, :] > q_pos[:, None]",
        new="k_pos[None, :] >= q_pos[:, None]",
    ),
    Wrong(
        2,
        "max taken over the new block only",
        old="m_new = torch.maximum(m, s.amax(dim=-1))",
        new="m_new = s.amax(dim=-1)",
    ),
    Wrong(
        2,
        "hides scores with -1e9 instead of -inf (a hidden row gets l > 0)",
        old='s.masked_fill(k_pos[None, :] > q_pos[:, None], float("-inf"))',
        new="s.masked_fill(k_pos[None, :] > q_pos[:, None], -1e9)",
    ),
    Wrong(
        2,
        "returns the guarded maximum: m = 0 instead of -inf for a row with nothing visible",
        old="return m_new, alpha * l",
        new="return safe, alpha * l",
    ),
    # exercise 3: zig-zag placement
    Wrong(
        3,
        "pairs chunk r with chunk 2P - r (off by one)",
        old="chunk[parts - 1 - r]",
        new="chunk[(parts - r) % parts]",
    ),
    Wrong(
        3,
        "striped placement (r, r + P, ...) instead of zig-zag",
        block="return [torch.arange(r, seq_len, world) for r in range(world)]",
    ),
    Wrong(
        3,
        "equal chunks that lose the remainder tokens",
        old="bounds.append(bounds[-1] + base + (i < extra))",
        new="bounds.append(bounds[-1] + base)",
    ),
    Wrong(
        3,
        "the last chunks get the extra tokens",
        old="bounds.append(bounds[-1] + base + (i < extra))",
        new="bounds.append(bounds[-1] + base + (i >= parts - extra))",
    ),
    Wrong(
        3,
        "the remainder tokens all go into the last chunk",
        old="bounds.append(bounds[-1] + base + (i < extra))",
        new="bounds.append(bounds[-1] + base + (extra if i == parts - 1 else 0))",
    ),
    Wrong(
        3,
        "int32 positions",
        old="torch.arange(bounds[i], bounds[i + 1])",
        new="torch.arange(bounds[i], bounds[i + 1], dtype=torch.int32)",
    ),
    Wrong(
        3,
        "chunks of torch.chunk (ceil-sized: the extra tokens are not spread over the first chunks)",
        old="chunk = [torch.arange(bounds[i], bounds[i + 1]) for i in range(parts)]",
        new="chunk = list(torch.arange(seq_len).chunk(parts))\n    chunk += [chunk[-1][:0]] * (parts - len(chunk))",
    ),
    # exercise 4: MoE dispatch
    Wrong(
        4,
        "token-major priority (a token's second choice before the next token's first)",
        old="""    for c in range(k):
        for i in range(t):""",
        new="""    for i in range(t):
        for c in range(k):""",
    ),
    Wrong(
        4,
        "capacity off by one (accepts capacity + 1)",
        old="if load[e] < capacity:",
        new="if load[e] <= capacity:",
    ),
    Wrong(
        4,
        "load counts offered assignments, not kept ones",
        old="""            if load[e] < capacity:
                load[e] += 1
                keep[i, c] = True""",
        new="""            if (keep[:, :][experts == e]).sum() < capacity:
                keep[i, c] = True
            load[e] += 1""",
    ),
    Wrong(
        4,
        "top-1 only: ignores the second choices",
        old="for c in range(k):",
        new="for c in range(1):",
    ),
    Wrong(
        4,
        "load counted in a float tensor",
        old="load = torch.zeros(n_experts, dtype=torch.int64)",
        new="load = torch.zeros(n_experts)",
    ),
    Wrong(
        4,
        "dropped returned as a 0-d tensor, not an int",
        old="int((~keep).sum())",
        new="(~keep).sum()",
    ),
    Wrong(
        4,
        "keep as a 0/1 integer mask",
        old="keep = torch.zeros(t, k, dtype=torch.bool)",
        new="keep = torch.zeros(t, k, dtype=torch.uint8)",
    ),
    # adversary; slipped at 347915e: float64 scores 800 then 0 in two blocks: exp(800) overflows, output NaN
    Wrong(
        2,
        "the block's own maximum instead of the running one",
        old="m_new = torch.maximum(m, s.amax(dim=-1))",
        new="m_new = torch.where(torch.isinf(s.amax(dim=-1)), m, s.amax(dim=-1))",
    ),
]
