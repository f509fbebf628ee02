"""Adversarial wrong answers for lab 22 (quantization)."""

from labs.course.wrong_answers import Wrong

WRONG = [
    Wrong(
        1,
        "scale from the signed maximum",
        old="scale = max(float(x.abs().max()) / qmax, 1e-12)",
        new="scale = max(float(x.max()) / qmax, 1e-12)",
    ),
    Wrong(
        1,
        "truncates toward zero",
        old="torch.round(x / scale)",
        new="torch.trunc(x / scale)",
    ),
    Wrong(
        2,
        "zero point rounded down",
        old="zero_point = int(min(max(round(-lo / scale), 0), qmax))",
        new="zero_point = int(min(max(int(-lo / scale), 0), qmax))",
    ),
    Wrong(
        2,
        "rounds (x - lo) / s in one step instead of round(x / s) + z",
        old="q = torch.clamp(torch.round(x / scale) + zero_point, 0, qmax).to(torch.uint8)",
        new="q = torch.clamp(torch.round((x - lo) / scale), 0, qmax).to(torch.uint8)",
    ),
    Wrong(
        2,
        "zero point returned as a float",
        old="return q, scale, zero_point",
        new="return q, scale, float(zero_point)",
    ),
    Wrong(
        3,
        "one scale per row, not per group",
        old="scale = (g.abs().amax(dim=-1, keepdim=True) / qmax).clamp_min(1e-12)",
        new="scale = (g.abs().amax(dim=(-2, -1), keepdim=True) / qmax).clamp_min(1e-12)",
    ),
    Wrong(
        3,
        "a width that group_size does not divide: the last partial group is dropped silently",
        block="""
        out_f, in_f = w.shape
        qmax = 2 ** (bits - 1) - 1
        n = in_f // group_size * group_size
        g = w[:, :n].reshape(out_f, -1, group_size)
        scale = (g.abs().amax(dim=-1, keepdim=True) / qmax).clamp_min(1e-12)
        q = torch.clamp(torch.round(g / scale), -qmax, qmax)
        return torch.cat([(q * scale).reshape(out_f, n), w[:, n:]], dim=1)
        """,
    ),
    Wrong(
        4,
        "outlier detection per row (token) instead of per column",
        block="""
        is_outlier = (x.abs() > threshold).any(dim=1)
        cols = torch.nonzero((x.abs() > threshold).any(dim=0)).flatten()
        keep = ~is_outlier
        qx, sx = rowwise_int8(x[keep])
        qw, sw = rowwise_int8(w)
        y = torch.empty(x.shape[0], w.shape[0])
        y[keep] = (qx @ qw.T) * sx * sw.T
        y[is_outlier] = x[is_outlier] @ w.T
        return y, cols
        """,
    ),
    Wrong(
        4,
        "the outlier columns are also left in the int8 part (counted twice)",
        old="qx, sx = rowwise_int8(x[:, keep])\n    qw, sw = rowwise_int8(w[:, keep])",
        new="qx, sx = rowwise_int8(x)\n    qw, sw = rowwise_int8(w)",
    ),
    Wrong(
        4,
        "one scale for all of x instead of one per row",
        old="qx, sx = rowwise_int8(x[:, keep])",
        new=(
            "sx = (x[:, keep].abs().max() / 127).clamp_min(1e-12)\n"
            "    qx = torch.clamp(torch.round(x[:, keep] / sx), -127, 127)"
        ),
    ),
    Wrong(
        6,
        "dampens the caller's Hessian in place",
        old="H = h.clone()",
        new="H = h",
    ),
    Wrong(
        6,
        "lower Cholesky factor of H^-1",
        old="torch.linalg.cholesky(torch.cholesky_inverse(torch.linalg.cholesky(H)), upper=True)",
        new="torch.linalg.cholesky(torch.cholesky_inverse(torch.linalg.cholesky(H)))",
    ),
    Wrong(
        6,
        "no dampening",
        old="H += damp * H.diagonal().mean() * torch.eye(H.shape[0], dtype=H.dtype, device=H.device)",
        new="pass",
    ),
    Wrong(
        6,
        "rescales each column on the updated weights (scale recomputed from W, not the original)",
        old="Q[:, i] = torch.clamp(torch.round(W[:, i] / scale), -qmax, qmax) * scale",
        new=(
            "s_i = (W[:, i:].abs().amax(dim=1) / qmax).clamp_min(1e-12)\n"
            "        Q[:, i] = torch.clamp(torch.round(W[:, i] / s_i), -qmax, qmax) * s_i"
        ),
    ),
]
