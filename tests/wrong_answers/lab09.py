"""Plausible wrong answers to lab 09; each must be rejected by its exercise's checks."""

from labs.course.wrong_answers import Wrong

WRONG = [
    Wrong(1, "counts only the bytes read", old="(m * k + k * n + m * n)", new="(m * k + k * n)"),
    Wrong(
        1,
        "counts a multiply-add as one FLOP",
        old="return 2 * m * k * n /",
        new="return m * k * n /",
    ),
    Wrong(1, "ignores the elementwise writes", old="(reads + writes)", new="reads"),
    Wrong(
        1,
        "hard-codes 4-byte elements",
        old="bytes_per_element * (m * k + k * n + m * n)",
        new="4 * (m * k + k * n + m * n)",
    ),
    Wrong(
        2,
        "attainable uses the A100's roofs, not its arguments",
        old="min(peak_flops, bandwidth * intensity)",
        new="min(A100_BF16, A100_80_HBM * intensity)",
    ),
    Wrong(
        2,
        "attainable forgets the compute roof",
        old="min(peak_flops, bandwidth * intensity)",
        new="bandwidth * intensity",
    ),
    Wrong(
        2,
        "memory-bound at the ridge point itself",
        old="intensity < peak_flops / bandwidth",
        new="intensity <= peak_flops / bandwidth",
    ),
    Wrong(
        2,
        "max instead of min",
        old="min(peak_flops, bandwidth * intensity)",
        new="max(peak_flops, bandwidth * intensity)",
    ),
    Wrong(
        2,
        "ridge point upside down",
        old="intensity < peak_flops / bandwidth",
        new="intensity < bandwidth / peak_flops",
    ),
    Wrong(
        3,
        "counts only the 4 bytes read",
        old="flop_per_s = bandwidth / 8",
        new="flop_per_s = bandwidth / 4",
    ),
    Wrong(
        3,
        "compares with the FP32 peak twice",
        old="flop_per_s / A100_BF16",
        new="flop_per_s / A100_FP32",
    ),
    Wrong(
        3, "returns FLOP/s, not GFLOP/s", old="return flop_per_s / 1e9,", new="return flop_per_s,"
    ),
    Wrong(
        4,
        "fused chain writes every intermediate",
        old="return bytes_per_element * (external_reads + 1)",
        new="return bytes_per_element * (external_reads + len(chain))",
    ),
    Wrong(
        4,
        "unfused traffic assumes one write per op",
        old="sum(r + w for r, w in chain)",
        new="sum(r + 1 for r, w in chain)",
    ),
    Wrong(
        4,
        "unfused traffic counts only reads",
        old="sum(r + w for r, w in chain)",
        new="sum(r for r, w in chain)",
    ),
    Wrong(
        4,
        "unfused traffic hard-codes fp32",
        old="return bytes_per_element * sum(r + w for r, w in chain)",
        new="return 4 * sum(r + w for r, w in chain)",
    ),
    Wrong(
        5,
        "linear search that needs an intensity strictly above the ridge",
        block="""
        ridge = peak_flops / bandwidth
        t = 1
        while matmul_intensity(t, d, d, bytes_per_element) <= ridge:
            t += 1
        return t
        """,
    ),
    Wrong(
        5,
        "doubling search without the binary search (returns a power of two)",
        block="""
        t = 1
        while matmul_intensity(t, d, d, bytes_per_element) < peak_flops / bandwidth:
            t *= 2
        return t
        """,
    ),
    Wrong(5, "skips the search (returns 1)", old="while lo < hi:", new="while False:"),
    Wrong(
        5,
        "binary search forgets bytes_per_element (uses the default 4)",
        old="matmul_intensity(mid, d, d, bytes_per_element)",
        new="matmul_intensity(mid, d, d)",
    ),
    Wrong(
        5,
        "small-T approximation: intensity = 2T / bytes",
        block="return max(1, math.ceil(peak_flops / bandwidth * bytes_per_element / 2))",
    ),
    Wrong(6, "returns a Python float", block="return (v * v).sum().item()"),
    Wrong(
        6,
        "accumulates and returns float64 whatever the input's dtype",
        block="return (v.double() * v.double()).sum()",
    ),
    Wrong(6, "squares the sum", block="return v.sum() ** 2"),
    Wrong(6, "a Python loop over the elements", block="return sum(x * x for x in v)"),
    Wrong(6, "mean instead of sum", block="return (v * v).mean()"),
    Wrong(6, "computes in float32", block="return (v.float() * v.float()).sum()"),
    # adversary; slipped at 347915e: min_tokens_compute_bound(64, 48.0, 35.0, 4): 3 (intensity(3) == 48/35), this gives 4
    Wrong(
        5,
        "at the ridge counts as memory-bound (> instead of >=)",
        old="if matmul_intensity(mid, d, d, bytes_per_element) >= ridge:",
        new="if matmul_intensity(mid, d, d, bytes_per_element) > ridge:",
    ),
]
