"""Plausible wrong answers to lab 22; each must be rejected by its exercise's checks."""

from labs.course.wrong_answers import Wrong

WRONG = [
    Wrong(
        1,
        "uses 2^(b-1) levels (the asymmetric int8 maximum 128)",
        old="qmax = 2 ** (bits - 1) - 1",
        new="qmax = 2 ** (bits - 1)",
    ),
    Wrong(
        1,
        "truncates toward zero instead of rounding",
        old="torch.clamp(torch.round(x / scale), -qmax, qmax)",
        new="torch.clamp(torch.trunc(x / scale), -qmax, qmax)",
    ),
    Wrong(
        1,
        "scale from the maximum, not the absolute maximum",
        old="float(x.abs().max())",
        new="float(x.max())",
    ),
    Wrong(
        2,
        "zero point not rounded to an integer",
        old="zero_point = int(min(max(round(-lo / scale), 0), qmax))",
        new="zero_point = min(max(-lo / scale, 0), qmax)",
    ),
    Wrong(
        2,
        "divides the range by 2^b instead of 2^b - 1",
        old="scale = max((hi - lo) / qmax, 1e-12)",
        new="scale = max((hi - lo) / 2**bits, 1e-12)",
    ),
    Wrong(2, "zero point with the wrong sign", old="round(-lo / scale)", new="round(lo / scale)"),
    Wrong(
        2,
        "zero point left as a 0-d tensor (right value, not a Python int)",
        old="zero_point = int(min(max(round(-lo / scale), 0), qmax))",
        new="zero_point = torch.tensor(round(-lo / scale)).clamp(0, qmax)",
    ),
    Wrong(
        2,
        "range not extended to contain zero",
        old="lo, hi = min(float(x.min()), 0.0), max(float(x.max()), 0.0)",
        new="lo, hi = float(x.min()), float(x.max())",
    ),
    Wrong(
        3,
        "one scale per tensor where per-group was asked",
        old="g.abs().amax(dim=-1, keepdim=True)",
        new="g.abs().amax()",
    ),
    Wrong(
        3,
        "groups run down the columns instead of along a row",
        block="""
out_f, in_f = w.shape
if in_f % group_size:
    raise ValueError(f"group_size={group_size} must divide the width in={in_f}")
qmax = 2 ** (bits - 1) - 1
g = w.T.reshape(-1, group_size)
scale = (g.abs().amax(dim=-1, keepdim=True) / qmax).clamp_min(1e-12)
q = torch.clamp(torch.round(g / scale), -qmax, qmax)
return (q * scale).reshape(in_f, out_f).T
""",
    ),
    Wrong(
        3,
        "no check that the group size divides the width",
        old='raise ValueError(f"group_size={group_size} must divide the width in={in_f}")',
        new="pass",
    ),
    Wrong(
        4,
        "outlier threshold applied to the weights instead of the activations",
        old="is_outlier = (x.abs() > threshold).any(dim=0)",
        new="is_outlier = (w.abs() > threshold).any(dim=0)",
    ),
    Wrong(
        4,
        "an outlier column needs a large mean, not any large value",
        old="is_outlier = (x.abs() > threshold).any(dim=0)",
        new="is_outlier = x.abs().mean(dim=0) > threshold",
    ),
    Wrong(
        4,
        "forgets the floating-point part of the product",
        old="return y + x[:, cols] @ w[:, cols].T, cols",
        new="return y, cols",
    ),
    Wrong(
        4,
        "scales the int8 product by the activation scale only",
        old="y = (qx @ qw.T) * sx * sw.T",
        new="y = (qx @ qw.T) * sx * sw.mean()",
    ),
    Wrong(
        5,
        "no straight-through estimator: rounding kills the gradient",
        old="return x + (fq - x).detach()",
        new="return fq",
    ),
    Wrong(
        5, "detaches the whole output", old="return x + (fq - x).detach()", new="return fq.detach()"
    ),
    Wrong(
        5,
        "passes the float value forward",
        old="return x + (fq - x).detach()",
        new="return fq + (x - fq).detach()",
    ),
    Wrong(
        1,
        "no lower bound on the scale: an all-zero tensor gives NaN",
        old="scale = max(float(x.abs().max()) / qmax, 1e-12)",
        new="scale = float(x.abs().max()) / qmax",
    ),
    Wrong(
        2,
        "no lower bound on the scale: an all-zero tensor divides by zero",
        old="scale = max((hi - lo) / qmax, 1e-12)",
        new="scale = (hi - lo) / qmax",
    ),
    Wrong(
        3,
        "no lower bound on the group scales: an all-zero group gives NaN",
        old="scale = (g.abs().amax(dim=-1, keepdim=True) / qmax).clamp_min(1e-12)",
        new="scale = g.abs().amax(dim=-1, keepdim=True) / qmax",
    ),
    Wrong(
        5,
        "no lower bound on the scale: an all-zero tensor gives NaN",
        old="scale = (x.detach().abs().max() / qmax).clamp_min(1e-12)",
        new="scale = x.detach().abs().max() / qmax",
    ),
    Wrong(
        6,
        "no error feedback: plain round-to-nearest",
        old="        W[:, i + 1 :] -= err[:, None] * U[i, i + 1 :][None, :]\n",
        new="",
    ),
    Wrong(
        6,
        "feeds the error back through rows of the inverse Hessian, not its Cholesky factor",
        old="U = torch.linalg.cholesky(torch.cholesky_inverse(torch.linalg.cholesky(H)), upper=True)",
        new="U = torch.cholesky_inverse(torch.linalg.cholesky(H))",
    ),
    Wrong(
        6,
        "feeds the error back through the Hessian instead of its inverse",
        old="U = torch.linalg.cholesky(torch.cholesky_inverse(torch.linalg.cholesky(H)), upper=True)",
        new="U = torch.linalg.cholesky(H, upper=True)",
    ),
    Wrong(
        6,
        "uses column i of the factor instead of row i",
        old="W[:, i + 1 :] -= err[:, None] * U[i, i + 1 :][None, :]",
        new="W[:, i + 1 :] -= err[:, None] * U.T[i, i + 1 :][None, :]",
    ),
    Wrong(
        6,
        "off by one: the update skips the next column",
        old="W[:, i + 1 :] -= err[:, None] * U[i, i + 1 :][None, :]",
        new="W[:, i + 2 :] -= err[:, None] * U[i, i + 2 :][None, :]",
    ),
    Wrong(
        6,
        "off by one: the last column is never quantized",
        old="for i in range(W.shape[1]):",
        new="for i in range(W.shape[1] - 1):",
    ),
    Wrong(
        6,
        "no dampening",
        old="    H += damp * H.diagonal().mean() * torch.eye(H.shape[0], dtype=H.dtype, device=H.device)\n",
        new="",
    ),
    Wrong(
        6,
        "forgets to divide the error by U[i, i]",
        old="err = (W[:, i] - Q[:, i]) / U[i, i]",
        new="err = W[:, i] - Q[:, i]",
    ),
    Wrong(
        6,
        "rounds the original weights instead of the updated ones",
        old="Q[:, i] = torch.clamp(torch.round(W[:, i] / scale), -qmax, qmax) * scale",
        new="Q[:, i] = torch.clamp(torch.round(w[:, i] / scale), -qmax, qmax) * scale",
    ),
    Wrong(
        6,
        "updates w in place instead of a copy",
        old="W = w.clone()",
        new="W = w",
    ),
    # adversary; slipped at 347915e: x = [-1, 62.5/127] at 8 bits: code 63, torch.round gives 62
    Wrong(
        1,
        "rounds half up (floor(v + 0.5)) instead of half to even",
        old="torch.round(x / scale)",
        new="torch.floor(x / scale + 0.5)",
    ),
    # adversary; slipped at 347915e: x = [-127.5, 0, 127.5] at 8 bits: codes [0, 128, 0] (256 wrapped), reference [0, 128, 255]
    Wrong(
        2,
        "forgets the clamp of the codes (a value can round to 2^b and wrap around in uint8)",
        old="q = torch.clamp(torch.round(x / scale) + zero_point, 0, qmax).to(torch.uint8)",
        new="q = (torch.round(x / scale) + zero_point).to(torch.uint8)",
    ),
    # adversary; slipped at 347915e: a value exactly 6.0: column taken as outlier, the reference's columns are []
    Wrong(
        4,
        "an outlier is |x| >= threshold (a value equal to the threshold is not one that exceeds it)",
        old="is_outlier = (x.abs() > threshold).any(dim=0)",
        new="is_outlier = (x.abs() >= threshold).any(dim=0)",
    ),
]
