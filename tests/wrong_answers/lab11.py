"""Plausible wrong answers to lab 11; each must be rejected by its exercise's checks."""

from labs.course.wrong_answers import Wrong

WRONG = [
    Wrong(
        1,
        "rescales l but not z (right only when the max is in the first tile)",
        old="z_new = z * scale + weights @ values",
        new="z_new = z + weights @ values",
    ),
    Wrong(
        1,
        "no rescale at all",
        old="scale = math.exp(m - m_new)  # 0.0 when m = -inf",
        new="scale = 1.0",
    ),
    Wrong(
        1,
        "the tile's maximum instead of the running maximum",
        old="m_new = max(m, scores.max().item())",
        new="m_new = scores.max().item()",
    ),
    Wrong(
        1,
        "running max started at 0 (right only for positive scores)",
        old="m_new = max(m, scores.max().item())",
        new="m_new = max(m, scores.max().item(), 0.0)",
    ),
    Wrong(2, "no rescale of the running sum", old="l = l * math.exp(m - m_new) +", new="l = l +"),
    Wrong(
        2,
        "running max starts at 0 (right only when some score is >= 0)",
        old="m, l = -math.inf, 0.0",
        new="m, l = 0.0, 0.0",
    ),
    Wrong(2, "calls torch.softmax", block="return torch.softmax(x, 0)"),
    Wrong(
        2,
        "calls torch.softmax in another thread, where the check's call recorder cannot see it",
        block="""
        import threading

        box = {}
        worker = threading.Thread(target=lambda: box.setdefault("r", torch.softmax(x, 0)))
        worker.start()
        worker.join()
        return box["r"]
        """,
    ),
    Wrong(
        3,
        "the whole score matrix at once, in another thread, where the profiler cannot see it",
        block="""
        import threading

        def full():
            s = q.double() @ k.double().T / math.sqrt(q.shape[1])
            o = (torch.softmax(s, -1) @ v.double()).to(q.dtype)
            return o, torch.logsumexp(s, -1).to(q.dtype)

        box = {}
        worker = threading.Thread(target=lambda: box.setdefault("r", full()))
        worker.start()
        worker.join()
        return box["r"]
        """,
    ),
    Wrong(
        2,
        "two passes: a global max first",
        block="""
        m = x.max().item()
        l = torch.exp(x - m).sum().item()
        return torch.exp(x - m) / l
    """,
    ),
    Wrong(
        2,
        "max of the first block only",
        old="m_new = max(m, block.max().item())",
        new="m_new = block.max().item() if m == -math.inf else m",
    ),
    Wrong(
        3,
        "accumulator not rescaled (right only when the max is in the first key block)",
        old="acc = alpha[:, None] * acc + p @ v[ks : ks + block_k]",
        new="acc = acc + p @ v[ks : ks + block_k]",
    ),
    Wrong(
        3,
        "running max starts at 0 (right only for positive scores)",
        old="m = torch.full((rows,), -math.inf, dtype=q.dtype, device=q.device)",
        new="m = torch.zeros(rows, dtype=q.dtype, device=q.device)",
    ),
    Wrong(
        3,
        "skips the last partial query block (no padding handled)",
        old="for qs in range(0, n_q, block_q):",
        new="for qs in range(0, n_q - block_q + 1, block_q):",
    ),
    Wrong(
        3,
        "lse without the log",
        old="lse[qs : qs + block_q] = m + torch.log(l)",
        new="lse[qs : qs + block_q] = m + l",
    ),
    Wrong(
        3,
        "one score row over all keys per query block",
        old="for ks in range(0, n_k, block_k):",
        new="for ks in range(0, n_k, n_k):",
    ),
    Wrong(3, "forgets the 1/sqrt(d) scale", old="scale = 1.0 / math.sqrt(d)", new="scale = 1.0"),
    Wrong(
        4,
        "no skipping: every tile computed and masked",
        old="for ks in range(0, qe, block_k):",
        new="for ks in range(0, n, block_k):",
    ),
    Wrong(
        4,
        "masks only the tile with ks == qs (square blocks only)",
        old="if ke - 1 > qs:",
        new="if ks == qs:",
    ),
    Wrong(
        4,
        "accumulator not rescaled",
        old="acc = alpha[:, None] * acc + p @ v[ks:ke]",
        new="acc = acc + p @ v[ks:ke]",
    ),
    Wrong(
        4,
        "running max starts at 0",
        old="m = torch.full((qe - qs,), -math.inf, dtype=q.dtype, device=q.device)",
        new="m = torch.zeros(qe - qs, dtype=q.dtype, device=q.device)",
    ),
    Wrong(
        5,
        "forgets D = rowsum(dO * O)",
        old="ds = p * (dp - d_rows[qs : qs + block_q, None])",
        new="ds = p * dp",
    ),
    Wrong(
        5,
        "dV overwritten instead of accumulated",
        old="dv[ks : ks + block_k] += p.T @ do_blk",
        new="dv[ks : ks + block_k] = p.T @ do_blk",
    ),
    Wrong(
        5,
        "no 1/sqrt(d) in dQ and dK",
        old="dq[qs : qs + block_q] += ds @ k_blk * scale\n            dk[ks : ks + block_k] += ds.T @ q_blk * scale",
        new="dq[qs : qs + block_q] += ds @ k_blk\n            dk[ks : ks + block_k] += ds.T @ q_blk",
    ),
    Wrong(
        5,
        "P recomputed from unscaled scores",
        old="p = torch.exp(q_blk @ k_blk.T * scale - lse",
        new="p = torch.exp(q_blk @ k_blk.T - lse",
    ),
    Wrong(
        6,
        "no mask on the padded key columns",
        old='s = tl.where(cols[None, :] < N_K, s, float("-inf"))',
        new="s = s",
    ),
    Wrong(
        6,
        "accumulator not rescaled",
        old="acc = acc * alpha[:, None] + tl.dot(p, v)",
        new="acc = acc + tl.dot(p, v)",
    ),
    Wrong(
        6,
        "the tile's max instead of the running max",
        old="m_new = tl.maximum(m_i, tl.max(s, 1))",
        new="m_new = tl.max(s, 1)",
    ),
    Wrong(
        5,
        "forms the whole N x N probability matrix at once",
        block="""
        scale = 1.0 / math.sqrt(q.shape[1])
        p = torch.exp(q @ k.T * scale - lse[:, None])
        dv = p.T @ do
        ds = p * (do @ v.T - (do * o).sum(dim=1)[:, None])
        return ds @ k * scale, ds.T @ q * scale, dv
        """,
    ),
    Wrong(
        2,
        "normalises by a second, full sum instead of l",
        old="return torch.exp(x - m) / l",
        new="return torch.exp(x - m) / torch.exp(x - m).sum()",
    ),
    Wrong(
        2,
        "each block's sum through torch.logsumexp",
        old="torch.exp(block - m_new).sum().item()",
        new="math.exp(torch.logsumexp(block, 0).item() - m_new)",
    ),
    Wrong(
        3,
        "o and lse allocated in the default float32 whatever the inputs' dtype",
        old="o = torch.empty(n_q, v.shape[1], dtype=q.dtype, device=q.device)\n    lse = torch.empty(n_q, dtype=q.dtype, device=q.device)",
        new="o = torch.empty(n_q, v.shape[1], device=q.device)\n    lse = torch.empty(n_q, device=q.device)",
    ),
    Wrong(
        3,
        "skips the last partial key block",
        old="for ks in range(0, n_k, block_k):",
        new="for ks in range(0, n_k - block_k + 1, block_k):",
    ),
    Wrong(4, "masks the diagonal too (>= instead of >)", old="cols > rows", new="cols >= rows"),
    Wrong(
        4,
        "o allocated in the default float32 whatever the inputs' dtype",
        old="o = torch.empty_like(q)",
        new="o = torch.empty(n, d)",
    ),
    Wrong(
        4,
        "stops at the key block holding the query block's first row (right when block_k >= block_q)",
        old="for ks in range(0, qe, block_k):",
        new="for ks in range(0, qs + 1, block_k):",
    ),
    Wrong(
        5,
        "dQ overwritten instead of accumulated",
        old="dq[qs : qs + block_q] += ds @ k_blk * scale",
        new="dq[qs : qs + block_q] = ds @ k_blk * scale",
    ),
    Wrong(
        5,
        "gradients allocated in the default float32 whatever the inputs' dtype",
        old="torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)",
        new="torch.zeros(q.shape), torch.zeros(k.shape), torch.zeros(v.shape)",
    ),
    Wrong(
        6,
        "keeps the first padded key column (<= N_K instead of < N_K)",
        old='s = tl.where(cols[None, :] < N_K, s, float("-inf"))',
        new='s = tl.where(cols[None, :] <= N_K, s, float("-inf"))',
    ),
    Wrong(
        6,
        "forgets the 1/sqrt(d) scale",
        old="s = tl.dot(q, tl.trans(k)) * scale",
        new="s = tl.dot(q, tl.trans(k))",
    ),
    Wrong(
        6,
        "l_i not rescaled",
        old="l_i = l_i * alpha + tl.sum(p, 1)",
        new="l_i = l_i + tl.sum(p, 1)",
    ),
    # adversary; slipped at 347915e: Python's max over the tensor is invisible to the TorchFunctionMode that counts max/sum calls
    Wrong(
        2,
        "two passes: the global maximum first (Python's max, no torch.max call), then the sums",
        block="""
        m = max(float(v) for v in x)
        l = 0.0
        for start in range(0, x.numel(), block_size):
            l += torch.exp(x[start : start + block_size] - m).sum().item()
        return torch.exp(x - m) / l
        """,
    ),
]
