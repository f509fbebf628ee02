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
        old="scale = (hi - lo) / qmax",
        new="scale = (hi - lo) / 2**bits",
    ),
    Wrong(2, "zero point with the wrong sign", old="round(-lo / scale)", new="round(lo / scale)"),
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
]
