"""Adversarial wrong answers for lab 9 (roofline)."""

from labs.course.wrong_answers import Wrong

WRONG = [
    Wrong(
        1,
        "forgets to write the output",
        old="return 2 * m * k * n / (bytes_per_element * (m * k + k * n + m * n))",
        new="return 2 * m * k * n / (bytes_per_element * (m * k + k * n))",
    ),
    Wrong(
        1,
        "counts multiply-adds, not FLOPs",
        old="return 2 * m * k * n / (bytes_per_element * (m * k + k * n + m * n))",
        new="return m * k * n / (bytes_per_element * (m * k + k * n + m * n))",
    ),
    Wrong(
        1,
        "elementwise intensity ignores the writes",
        old="return flops_per_element / (bytes_per_element * (reads + writes))",
        new="return flops_per_element / (bytes_per_element * reads)",
    ),
    Wrong(
        2,
        "at the ridge point is memory-bound (<= instead of <)",
        old='return "memory-bound" if intensity < peak_flops / bandwidth else "compute-bound"',
        new='return "memory-bound" if intensity <= peak_flops / bandwidth else "compute-bound"',
    ),
    Wrong(
        2,
        "attainable as the larger of the two roofs",
        old="return min(peak_flops, bandwidth * intensity)",
        new="return max(peak_flops, bandwidth * intensity)",
    ),
    Wrong(
        2,
        "attainable divides by the bandwidth",
        old="return min(peak_flops, bandwidth * intensity)",
        new="return min(peak_flops, intensity / bandwidth)",
    ),
    Wrong(
        3,
        "GFLOP/s in units of 2**30",
        old="return flop_per_s / 1e9, flop_per_s / A100_FP32, flop_per_s / A100_BF16",
        new="return flop_per_s / 2**30, flop_per_s / A100_FP32, flop_per_s / A100_BF16",
    ),
    Wrong(
        3,
        "the fractions swapped (BF16 peak first)",
        old="return flop_per_s / 1e9, flop_per_s / A100_FP32, flop_per_s / A100_BF16",
        new="return flop_per_s / 1e9, flop_per_s / A100_BF16, flop_per_s / A100_FP32",
    ),
    Wrong(
        4,
        "fused traffic counts the first op's reads instead of the chain's external reads",
        old="return bytes_per_element * (external_reads + 1)",
        new="return bytes_per_element * (chain[0][0] + 1)",
    ),
    Wrong(
        4,
        "unfused traffic counts only the reads",
        old="return bytes_per_element * sum(r + w for r, w in chain)",
        new="return bytes_per_element * sum(r for r, w in chain)",
    ),
    Wrong(
        4,
        "fused traffic writes every op's outputs",
        old="return bytes_per_element * (external_reads + 1)",
        new="return bytes_per_element * (external_reads + sum(w for _, w in chain))",
    ),
    Wrong(
        4,
        "speedup inverted (fused over unfused)",
        old="return traffic(chain, external_reads) / traffic(chain, external_reads, fused=True)",
        new="return traffic(chain, external_reads, fused=True) / traffic(chain, external_reads)",
    ),
    Wrong(
        5,
        "returns the last memory-bound T (one too few)",
        old="return lo",
        new="return max(lo - 1, 1)",
    ),
    Wrong(
        5,
        "doubling search without the binary search: returns a power of two",
        block="""
        ridge = peak_flops / bandwidth
        t = 1
        while matmul_intensity(t, d, d, bytes_per_element) < ridge:
            t *= 2
        return t
        """,
    ),
    Wrong(
        6,
        "Python's sum over the elements (one call per element)",
        old="return (v * v).sum()",
        new="return sum(v * v)",
    ),
    Wrong(
        6,
        "computes in float64 whatever the input dtype",
        old="return (v * v).sum()",
        new="return (v.double() * v.double()).sum()",
    ),
    Wrong(
        6,
        "returns a Python float",
        old="return (v * v).sum()",
        new="return (v * v).sum().item()",
    ),
    Wrong(
        6,
        "goes through numpy and returns a numpy scalar",
        old="return (v * v).sum()",
        new="return (v.numpy() ** 2).sum()",
    ),
]
