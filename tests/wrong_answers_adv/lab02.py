"""Adversarial wrong answers for lab 2 (matmul FLOPs and timing); see tools/adv_wrong.py."""

from labs.course.wrong_answers import Wrong

WRONG = [
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
    Wrong(
        2,
        "accumulates into an integer array (np.zeros with dtype=int truncates the entries)",
        old="C = np.zeros((m, n))",
        new="C = np.zeros((m, n), dtype=int)",
    ),
    Wrong(
        4, "returns the mean instead of the median", old="np.median(times)", new="np.mean(times)"
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
    Wrong(
        5,
        "predicts from n**3 (multiply-adds) instead of the FLOP count",
        old="predicted_s = matmul_flops(n, n, n) / (peak32 * 1e9)",
        new="predicted_s = n**3 / (peak32 * 1e9)",
    ),
]
