"""Plausible wrong answers to lab 02; each must be rejected by its exercise's checks."""

from labs.course.wrong_answers import Wrong

WRONG = [
    Wrong(1, "counts a multiply-add as one FLOP", old="2 * m * k * n", new="m * k * n"),
    Wrong(1, "counts k - 1 additions per entry as FLOPs", block="return m * n * (2 * k - 1)"),
    Wrong(1, "uses m for both outer dimensions", old="2 * m * k * n", new="2 * m * k * m"),
    Wrong(
        2,
        "counts k additions per entry (sum started from zero)",
        old="mults += 1\n            for",
        new="mults += 1\n            adds += 1\n            for",
    ),
    Wrong(
        2, "counts multiplications only once per entry", old="                mults += 1\n", new=""
    ),
    Wrong(
        2,
        "swaps the loop bounds (only right for square matrices)",
        old="for j in range(n):",
        new="for j in range(m):",
    ),
    Wrong(
        3,
        "costs the right order as b*c*d + a*c*d",
        old="matmul_flops(a, b, d)",
        new="matmul_flops(a, c, d)",
    ),
    Wrong(3, "breaks ties towards the right", old="left <= right", new="left < right"),
    Wrong(
        3,
        "always returns the left order",
        block="return ('left', matmul_flops(a, b, c) + matmul_flops(a, c, d))",
    ),
    Wrong(4, "mean instead of median", old="float(np.median(times))", new="float(np.mean(times))"),
    Wrong(4, "minimum instead of median", old="float(np.median(times))", new="float(min(times))"),
    Wrong(
        4,
        "times the warm-up calls too",
        block="""
        times = []
        for _ in range(warmup + repeats):
            start = time.perf_counter()
            fn()
            times.append(time.perf_counter() - start)
        return float(np.median(times))
    """,
    ),
    Wrong(
        4,
        "upper middle value for an even count",
        old="float(np.median(times))",
        new="float(sorted(times)[len(times) // 2])",
    ),
    Wrong(4, "skips the warm-up", old="for _ in range(warmup):\n        fn()\n    ", new=""),
    Wrong(
        4,
        "returns the median as a 0-d tensor (right value, not a float)",
        old="float(np.median(times))",
        new="torch.tensor(times, dtype=torch.float64).quantile(0.5)",
    ),
    Wrong(
        5,
        "prediction counts a multiply-add as one FLOP",
        old="predicted_s = matmul_flops(n, n, n) /",
        new="predicted_s = n**3 /",
    ),
    Wrong(5, "forgets that peak32 is in GFLOP/s", old="(peak32 * 1e9)", new="peak32"),
    Wrong(
        5,
        "measured time in milliseconds",
        old="measured_s = time_fn(product, warmup=1, repeats=3)",
        new="measured_s = 1e3 * time_fn(product, warmup=1, repeats=3)",
    ),
    # issue 35: the wrong measurement
    Wrong(
        5,
        "measures a float64 product while the prediction is for float32",
        old="a, b = torch.randn(n, n).to(dev), torch.randn(n, n).to(dev)",
        new="a, b = torch.randn(n, n, dtype=torch.float64).to(dev), torch.randn(n, n, dtype=torch.float64).to(dev)",
    ),
    # adversary; slipped at 347915e: no loop, no counting: only code review sees it (the values equal the loop's)
    Wrong(
        2,
        "forbidden shortcut: numpy's A @ B plus the closed-form counts, no loops, nothing counted",
        block="""
        m, k = A.shape
        n = B.shape[1]
        return A @ B, m * k * n, m * n * (k - 1)
        """,
    ),
    # adversary; slipped at 347915e: shapes [(10, 1), (1, 100), (100, 11)]: picks left (24000 FLOPs), right costs 2420
    Wrong(
        3,
        "decides by the cost of the first product only, ignoring the second",
        block="""
        left = matmul_flops(a, b, c) + matmul_flops(a, c, d)
        right = matmul_flops(b, c, d) + matmul_flops(a, b, d)
        return ("left", left) if matmul_flops(a, b, c) <= matmul_flops(b, c, d) else ("right", right)
        """,
    ),
    # adversary; slipped at 347915e: two randn(1536, 1536) calls are timed with the product
    Wrong(
        5,
        "times the wrong thing: the random inputs are generated inside the timed call",
        old="return a @ b, device_lib.synchronize(dev)",
        new="return torch.randn(n, n) @ torch.randn(n, n), device_lib.synchronize(dev)",
    ),
]
