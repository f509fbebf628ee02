"""Adversarial wrong answers for lab 17b (sequence and expert parallelism)."""

from labs.course.wrong_answers import Wrong

WRONG = [
    Wrong(
        1,
        "under TP the layer-norm statistics are split too (only the sbh terms replicated)",
        old="replicated = 4 * sbh + 4 * bs\n    split = 12 * sbh + a * bs",
        new="replicated = 4 * sbh\n    split = 12 * sbh + a * bs + 4 * bs",
    ),
    Wrong(
        1,
        "the attention's log-sum-exp counted as replicated",
        old="replicated = 4 * sbh + 4 * bs\n    split = 12 * sbh + a * bs",
        new="replicated = 4 * sbh + 4 * bs + a * bs\n    split = 12 * sbh",
    ),
    Wrong(
        1,
        "returns numbers of values instead of bytes",
        old="return 4 * numbers",
        new="return numbers",
    ),
    Wrong(
        2,
        "no guard for rows whose scores are all hidden (NaN from -inf - -inf)",
        block="""
        s = (q @ k.T) / q.shape[-1] ** 0.5
        if causal:
            s = s.masked_fill(k_pos[None, :] > q_pos[:, None], float("-inf"))
        m_new = torch.maximum(m, s.amax(dim=-1))
        alpha = torch.exp(m - m_new)
        p = torch.exp(s - m_new[:, None])
        return m_new, alpha * l + p.sum(-1), alpha[:, None] * acc + p @ v
        """,
    ),
    Wrong(
        2,
        "guards hidden rows by clamping the maximum to 0 (wrong when all scores are far below 0)",
        old="safe = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)",
        new="safe = m_new.clamp_min(0.0)",
    ),
    Wrong(
        3,
        "torch.chunk for the 2 * world chunks (ceil-sized chunks)",
        block="""
        parts = 2 * world
        chunk = list(torch.arange(seq_len).chunk(parts))
        chunk += [torch.zeros(0, dtype=torch.int64)] * (parts - len(chunk))
        return [torch.cat([chunk[r], chunk[parts - 1 - r]]) for r in range(world)]
        """,
    ),
    Wrong(
        3,
        "rank r pairs chunk r with chunk world + r (not mirrored)",
        old="torch.cat([chunk[r], chunk[parts - 1 - r]])",
        new="torch.cat([chunk[r], chunk[world + r]])",
    ),
    Wrong(
        4,
        "load counts offered assignments, not kept ones",
        block="""
        t, k = experts.shape
        keep = torch.zeros(t, k, dtype=torch.bool)
        load = torch.bincount(experts.reshape(-1), minlength=n_experts)
        seen = torch.zeros(n_experts, dtype=torch.int64)
        for c in range(k):
            for i in range(t):
                e = int(experts[i, c])
                if seen[e] < capacity:
                    seen[e] += 1
                    keep[i, c] = True
        return keep, load, int((~keep).sum())
        """,
    ),
    Wrong(
        4,
        "dropped returned as a 0-d tensor",
        old="return keep, load, int((~keep).sum())",
        new="return keep, load, (~keep).sum()",
    ),
]
