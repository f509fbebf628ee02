"""Adversarial wrong answers for lab 2 (matmul FLOPs and timing); see tools/adv_wrong.py."""

from labs.course.wrong_answers import Wrong

WRONG = [
    Wrong(1, "counts a multiply-add as one FLOP", old="2 * m * k * n", new="m * k * n"),
    Wrong(
        1,
        "counts the exact operations (mkn mults + mn(k-1) adds) instead of 2 per multiply-add",
        old="2 * m * k * n",
        new="2 * m * k * n - m * n",
    ),
    Wrong(
        2,
        "starts each sum at 0.0, so an entry costs k additions instead of k - 1",
        block="""
        m, k = A.shape
        n = B.shape[1]
        C = np.zeros((m, n))
        mults = adds = 0
        for i in range(m):
            for j in range(n):
                acc = 0.0
                for l in range(k):
                    acc += A[i, l] * B[l, j]
                    mults += 1
                    adds += 1
                C[i, j] = acc
        return C, mults, adds
        """,
    ),
    # SLIPS the checks (at 347915e): no loop, no counting: only code review sees it (the values equal the loop's)
    Wrong(
        2,
        "forbidden shortcut: numpy's A @ B plus the closed-form counts, no loops, nothing counted",
        block="""
        m, k = A.shape
        n = B.shape[1]
        return A @ B, m * k * n, m * n * (k - 1)
        """,
    ),
    Wrong(
        2,
        "accumulates into an integer array (np.zeros with dtype=int truncates the entries)",
        old="C = np.zeros((m, n))",
        new="C = np.zeros((m, n), dtype=int)",
    ),
    Wrong(3, "on a tie returns 'right' (< instead of <=)", old="left <= right", new="left < right"),
    # SLIPS the checks (at 347915e): shapes [(10, 1), (1, 100), (100, 11)]: picks left (24000 FLOPs), right costs 2420
    Wrong(
        3,
        "decides by the cost of the first product only, ignoring the second",
        block="""
        left = matmul_flops(a, b, c) + matmul_flops(a, c, d)
        right = matmul_flops(b, c, d) + matmul_flops(a, b, d)
        return ("left", left) if matmul_flops(a, b, c) <= matmul_flops(b, c, d) else ("right", right)
        """,
    ),
    Wrong(
        4, "returns the mean instead of the median", old="np.median(times)", new="np.mean(times)"
    ),
    Wrong(
        4,
        "takes the upper middle element as the median of an even count",
        old="float(np.median(times))",
        new="float(sorted(times)[len(times) // 2])",
    ),
    Wrong(
        4,
        "times the warm-up calls too and takes the median of all calls",
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
        "times all repeats at once and divides by the count (a mean, not a median)",
        block="""
        for _ in range(warmup):
            fn()
        start = time.perf_counter()
        for _ in range(repeats):
            fn()
        return float((time.perf_counter() - start) / repeats)
        """,
    ),
    # SLIPS the checks (at 347915e): any machine: the float64 product is timed against a float32 prediction (ratio bound 0.1..50)
    Wrong(
        5,
        "measures a float64 product while the prediction is for float32",
        old="a, b = torch.randn(n, n).to(dev), torch.randn(n, n).to(dev)",
        new="a, b = torch.randn(n, n, dtype=torch.float64).to(dev), torch.randn(n, n, dtype=torch.float64).to(dev)",
    ),
    # SLIPS the checks (at 347915e): two randn(1536, 1536) calls are timed with the product
    Wrong(
        5,
        "times the wrong thing: the random inputs are generated inside the timed call",
        old="return a @ b, device_lib.synchronize(dev)",
        new="return torch.randn(n, n) @ torch.randn(n, n), device_lib.synchronize(dev)",
    ),
    Wrong(
        5,
        "predicts from n**3 (multiply-adds) instead of the FLOP count",
        old="predicted_s = matmul_flops(n, n, n) / (peak32 * 1e9)",
        new="predicted_s = n**3 / (peak32 * 1e9)",
    ),
]
