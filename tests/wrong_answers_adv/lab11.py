"""Adversarial wrong answers for lab 11 (FlashAttention)."""

from labs.course.wrong_answers import Wrong

WRONG = [
    Wrong(
        1,
        "does not rescale the old sums when the maximum grows",
        block="""
        m_new = max(m, scores.max().item())
        weights = torch.exp(scores - m_new)
        l_new = l + weights.sum().item()
        z_new = z + weights @ values
        return m_new, l_new, z_new
        """,
    ),
    Wrong(
        1,
        "rescales z but not l",
        old="l_new = l * scale + weights.sum().item()",
        new="l_new = l + weights.sum().item()",
    ),
    Wrong(
        2,
        "one global max over the whole vector with torch (not one pass over blocks)",
        block="""
        m = x.max().item()
        l = 0.0
        for start in range(0, x.numel(), block_size):
            l += torch.exp(x[start : start + block_size] - m).sum().item()
        return torch.exp(x - m) / l
        """,
    ),
    Wrong(
        2,
        "no rescaling of the sum when the maximum grows",
        old="l = l * math.exp(m - m_new) + torch.exp(block - m_new).sum().item()",
        new="l = l + torch.exp(block - m_new).sum().item()",
    ),
    Wrong(
        2,
        "no max subtraction at all (overflows near 1000)",
        block="""
        l = 0.0
        for start in range(0, x.numel(), block_size):
            l += torch.exp(x[start : start + block_size]).sum().item()
        return torch.exp(x) / l
        """,
    ),
    Wrong(
        3,
        "forgets the 1/sqrt(d) scale",
        old="scale = 1.0 / math.sqrt(d)\n    o = torch.empty(n_q, v.shape[1], dtype=q.dtype, device=q.device)",
        new="scale = 1.0\n    o = torch.empty(n_q, v.shape[1], dtype=q.dtype, device=q.device)",
    ),
    Wrong(
        3,
        "lse = log(l), forgetting the maximum",
        old="lse[qs : qs + block_q] = m + torch.log(l)",
        new="lse[qs : qs + block_q] = torch.log(l)",
    ),
    Wrong(
        3,
        "alpha computed after m is updated (alpha = 1)",
        old="""            alpha = torch.exp(m - m_new)
            l = alpha * l + p.sum(dim=1)""",
        new="""            m = m_new
            alpha = torch.exp(m - m_new)
            l = alpha * l + p.sum(dim=1)""",
    ),
    Wrong(
        3,
        "materialises the whole score matrix (naive attention)",
        block="""
        s = (q @ k.T) / math.sqrt(q.shape[1])
        lse = torch.logsumexp(s, dim=1)
        return torch.softmax(s, dim=1) @ v, lse
        """,
    ),
    Wrong(
        3,
        "accumulates in float32 and returns float32 for float64 inputs",
        old="o = torch.empty(n_q, v.shape[1], dtype=q.dtype, device=q.device)",
        new="o = torch.empty(n_q, v.shape[1], device=q.device)",
    ),
    Wrong(
        4,
        "masks with >= (hides the diagonal too)",
        old="s = s.masked_fill(cols > rows, -math.inf)",
        new="s = s.masked_fill(cols >= rows, -math.inf)",
    ),
    Wrong(
        4,
        "output allocated as float32 whatever the input dtype",
        old="o = torch.empty_like(q)",
        new="o = torch.empty(q.shape)",
    ),
    Wrong(
        5,
        "D from dO and V instead of dO and O",
        old="d_rows = (do * o).sum(dim=1)",
        new="d_rows = (do @ v.T).sum(dim=1) / v.shape[0]",
    ),
    Wrong(
        5,
        "dK without the 1/sqrt(d) factor",
        old="dk[ks : ks + block_k] += ds.T @ q_blk * scale",
        new="dk[ks : ks + block_k] += ds.T @ q_blk",
    ),
    Wrong(
        5,
        "accumulators in float32 whatever the inputs",
        old="dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)",
        new="dq, dk, dv = torch.zeros(q.shape), torch.zeros(k.shape), torch.zeros(v.shape)",
    ),
    Wrong(
        6,
        "no -inf mask on the padded key columns",
        old='            s = tl.where(cols[None, :] < N_K, s, float("-inf"))\n',
        new="",
    ),
    Wrong(
        6,
        "shifts each tile by its own maximum, not the running one",
        old="p = tl.exp(s - m_new[:, None])",
        new="p = tl.exp(s - tl.max(s, 1)[:, None])",
    ),
]
