"""Adversarial wrong answers for lab 3 (BLEU, ROUGE-L, BPE, MinHash, pass@k)."""

from labs.course.wrong_answers import Wrong

WRONG = [
    Wrong(
        1,
        "averages sentence-level BLEU instead of summing the statistics over the corpus",
        block="""
        scores = []
        for hyp, ref in zip(hyps, refs):
            matches, totals = [0] * max_n, [0] * max_n
            for n in range(1, max_n + 1):
                h, g = ngram_counts(hyp, n), ngram_counts(ref, n)
                matches[n - 1] += sum(min(k, g[ng]) for ng, k in h.items())
                totals[n - 1] += max(len(hyp) - n + 1, 0)
            if min(matches) == 0:
                scores.append(0.0)
                continue
            c, r = len(hyp), len(ref)
            bp = 1.0 if c >= r else math.exp(1 - r / c)
            scores.append(
                100 * bp * math.exp(sum(math.log(m / t) for m, t in zip(matches, totals)) / max_n)
            )
        return sum(scores) / len(scores)
        """,
    ),
    Wrong(
        1,
        "arithmetic mean of the precisions instead of the geometric mean",
        old="return 100 * bp * math.exp(sum(math.log(m / t) for m, t in zip(matches, totals)) / max_n)",
        new="return 100 * bp * sum(m / t for m, t in zip(matches, totals)) / max_n",
    ),
    Wrong(
        2,
        "precision and recall swapped",
        old="p = lcs / len(pred) if pred else 0.0",
        new="p = lcs / len(ref) if ref else 0.0",
    ),
    Wrong(
        2,
        "longest common substring (contiguous) instead of subsequence: resets to 0 on a mismatch",
        block="""
        L = [[0] * (len(b) + 1) for _ in range(len(a) + 1)]
        best = 0
        for i in range(1, len(a) + 1):
            for j in range(1, len(b) + 1):
                if a[i - 1] == b[j - 1]:
                    L[i][j] = L[i - 1][j - 1] + 1
                    best = max(best, L[i][j])
        return best
        """,
    ),
    Wrong(
        3,
        "forgets to skip the second element of a merged pair (advances by one)",
        old="""            out.append(new_id)
            i += 2""",
        new="""            out.append(new_id)
            i += 1""",
    ),
    Wrong(
        3,
        "ties broken by the token ids instead of their ranks",
        old="key=lambda p: (-counts[p], rank[p[0]], rank[p[1]])",
        new="key=lambda p: (-counts[p], p[0], p[1])",
    ),
    Wrong(
        3,
        "breaks ties by the rank of the first token only",
        old="key=lambda p: (-counts[p], rank[p[0]], rank[p[1]])",
        new="key=lambda p: (-counts[p], rank[p[0]])",
    ),
    Wrong(
        3,
        "counts each distinct pair once per word (a set), not every occurrence",
        old="for pair in zip(ids, ids[1:]):",
        new="for pair in set(zip(ids, ids[1:])):",
    ),
    Wrong(
        3,
        "ties go to the pair seen first (Counter.most_common) instead of the smaller ranks",
        old="return min(counts, key=lambda p: (-counts[p], rank[p[0]], rank[p[1]]))",
        new="return counts.most_common(1)[0][0]",
    ),
    Wrong(
        4,
        "permutes in float64 (the products exceed 2^53 and lose their low bits) before the mod",
        old="permuted = a[:, None] * hashes[None, :] + b[:, None]",
        new=(
            "permuted = ((a[:, None].astype(np.float64) * hashes[None, :] + b[:, None]) % 2**32)"
            ".astype(np.uint32)"
        ),
    ),
    Wrong(
        4,
        "bands overlap: band b starts at b instead of b * rows",
        old="row[band * rows : (band + 1) * rows]",
        new="row[band : band + rows]",
    ),
    Wrong(
        4,
        "a pair is a candidate only when two bands agree (>= 2 instead of >= 1)",
        block="""
        from collections import Counter as _Counter
        hits = _Counter()
        for band in range(bands):
            buckets = {}
            for i, row in enumerate(sig):
                buckets.setdefault(row[band * rows : (band + 1) * rows].tobytes(), []).append(i)
            for members in buckets.values():
                for k, x in enumerate(members):
                    for y in members[k + 1 :]:
                        hits[(x, y)] += 1
        return {pair for pair, n in hits.items() if n >= 2}
        """,
        part=1,
    ),
    Wrong(
        5,
        "the plug-in estimate 1 - (1 - c/n)^k",
        old="return float(1.0 - np.prod(1.0 - k / np.arange(n - c + 1, n + 1)))",
        new="return float(1.0 - (1.0 - c / n) ** k)",
    ),
    Wrong(
        5,
        "product range off by one (starts at n - c)",
        old="np.arange(n - c + 1, n + 1)",
        new="np.arange(n - c, n + 1)",
    ),
    Wrong(
        5,
        "float binomials from scipy (overflow to inf/nan for large n)",
        old="return float(1.0 - np.prod(1.0 - k / np.arange(n - c + 1, n + 1)))",
        new="from scipy.special import comb as _comb\n    return float(1.0 - _comb(n - c, k) / _comb(n, k))",
    ),
]
