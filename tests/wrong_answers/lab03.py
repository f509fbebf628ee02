"""Plausible wrong answers to lab 03; each must be rejected by its exercise's checks."""

from labs.course.wrong_answers import Wrong

WRONG = [
    Wrong(
        1, "no brevity penalty", old="bp = 1.0 if c >= r else math.exp(1 - r / c)", new="bp = 1.0"
    ),
    Wrong(
        1,
        "brevity penalty with c and r swapped",
        old="math.exp(1 - r / c)",
        new="math.exp(1 - c / r)",
    ),
    Wrong(
        1,
        "n-gram matches not clipped",
        old="sum(min(k, g[ng]) for ng, k in h.items())",
        new="sum(k for ng, k in h.items() if ng in g)",
    ),
    Wrong(
        1,
        "arithmetic instead of geometric mean of precisions",
        old="math.exp(sum(math.log(m / t) for m, t in zip(matches, totals)) / max_n)",
        new="sum(m / t for m, t in zip(matches, totals)) / max_n",
    ),
    Wrong(
        1,
        "orders with zero matches skipped instead of a score of 0",
        block=(
            "matches, totals = [0] * max_n, [0] * max_n\n"
            "c = r = 0\n"
            "for hyp, ref in zip(hyps, refs):\n"
            "    c += len(hyp)\n"
            "    r += len(ref)\n"
            "    for n in range(1, max_n + 1):\n"
            "        h, g = ngram_counts(hyp, n), ngram_counts(ref, n)\n"
            "        matches[n - 1] += sum(min(k, g[ng]) for ng, k in h.items())\n"
            "        totals[n - 1] += max(len(hyp) - n + 1, 0)\n"
            "logs = [math.log(m / t) for m, t in zip(matches, totals) if m]\n"
            "if not logs:\n"
            "    return 0.0\n"
            "bp = 1.0 if c >= r else math.exp(1 - r / c)\n"
            "return 100 * bp * math.exp(sum(logs) / len(logs))"
        ),
    ),
    Wrong(
        1,
        "clipped against the reference counts of the whole corpus",
        block=(
            "matches, totals = [0] * max_n, [0] * max_n\n"
            "c = sum(len(h) for h in hyps)\n"
            "r = sum(len(g) for g in refs)\n"
            "for n in range(1, max_n + 1):\n"
            "    pooled = Counter()\n"
            "    for ref in refs:\n"
            "        pooled += ngram_counts(ref, n)\n"
            "    for hyp in hyps:\n"
            "        h = ngram_counts(hyp, n)\n"
            "        matches[n - 1] += sum(min(k, pooled[ng]) for ng, k in h.items())\n"
            "        totals[n - 1] += max(len(hyp) - n + 1, 0)\n"
            "if min(matches) == 0:\n"
            "    return 0.0\n"
            "bp = 1.0 if c >= r else math.exp(1 - r / c)\n"
            "return 100 * bp * math.exp(sum(math.log(m / t) for m, t in zip(matches, totals)) / max_n)"
        ),
    ),
    Wrong(
        2,
        "LCS off by one (matches compare a[i] with b[j])",
        old="if a[i - 1] == b[j - 1]:",
        new="if a[i % len(a)] == b[j % len(b)]:",
    ),
    Wrong(
        2,
        "longest common substring instead of subsequence",
        old="L[i][j] = max(L[i - 1][j], L[i][j - 1])",
        new="L[i][j] = 0",
    ),
    Wrong(
        2,
        "precision and recall swapped",
        old="p = lcs / len(pred) if pred else 0.0\n    r = lcs / len(ref) if ref else 0.0",
        new="p = lcs / len(ref) if ref else 0.0\n    r = lcs / len(pred) if pred else 0.0",
    ),
    Wrong(
        3,
        "pairs not weighted by word frequency",
        old="counts[pair] += freq",
        new="counts[pair] += 1",
    ),
    Wrong(
        3,
        "ties broken by the larger pair",
        old="min(counts, key=lambda p: (-counts[p], rank[p[0]], rank[p[1]]))",
        new="max(counts, key=lambda p: (counts[p], rank[p[0]], rank[p[1]]))",
    ),
    Wrong(
        3,
        "overlapping merges (advance by one after a merge)",
        part=1,
        block=(
            "out, i = [], 0\n"
            "while i < len(ids):\n"
            "    if i + 1 < len(ids) and (ids[i], ids[i + 1]) == pair:\n"
            "        out.append(new_id)\n"
            "    elif not (i > 0 and (ids[i - 1], ids[i]) == pair):\n"
            "        out.append(ids[i])\n"
            "    i += 1\n"
            "return tuple(out)"
        ),
    ),
    Wrong(4, "maximum instead of minimum", old="permuted.min(axis=1)", new="permuted.max(axis=1)"),
    Wrong(
        4,
        "hashes promoted to int64 (no wrap-around modulo 2^32)",
        old="a[:, None] * hashes[None, :] + b[:, None]",
        new="(a[:, None].astype(np.int64) * hashes[None, :] + b[:, None]) % (2**32 - 1)",
    ),
    Wrong(
        4,
        "bands overlap by one row",
        old="row[band * rows : (band + 1) * rows]",
        new="row[band * rows : (band + 1) * rows + 1]",
    ),
    Wrong(
        4,
        "only the first band is hashed",
        old="for band in range(bands):",
        new="for band in range(1):",
    ),
    Wrong(5, "biased plug-in estimate", block="return 1.0 - (1.0 - c / n) ** k"),
    Wrong(
        5,
        "product over the wrong range (off by one)",
        old="np.arange(n - c + 1, n + 1)",
        new="np.arange(n - c, n)",
    ),
    Wrong(5, "k times the per-sample rate", block="return min(1.0, k * c / n)"),
    Wrong(
        5,
        "binomials converted to floats (overflow for large n)",
        block="return 1.0 - float(math.comb(n - c, k)) / float(math.comb(n, k))",
    ),
    Wrong(
        5,
        "ratio of products computed in floating point (inf / inf for large n)",
        block=(
            "num = np.prod(np.arange(n - c - k + 1, n - c + 1, dtype=np.float64))\n"
            "den = np.prod(np.arange(n - k + 1, n + 1, dtype=np.float64))\n"
            "return float(1.0 - num / den)"
        ),
    ),
    # issue 35: edge lengths
    Wrong(
        1,
        "totals without max(.., 0): a hypothesis shorter than n adds a negative count",
        old="totals[n - 1] += max(len(hyp) - n + 1, 0)",
        new="totals[n - 1] += len(hyp) - n + 1",
    ),
    Wrong(
        5,
        "returns 1.0 when n - c <= k (off by one at n - c == k)",
        old="if n - c < k:",
        new="if n - c <= k:",
    ),
    # adversary; slipped at 347915e: rouge_l("a b", "c d") raises ZeroDivisionError; rouge-score gives 0
    Wrong(
        2,
        "no zero guards: F1 divides by p + r = 0 when the texts share no token (or one is empty)",
        block="""
        lcs = lcs_length(ref, pred)
        p = lcs / len(pred)
        r = lcs / len(ref)
        f = 2 * p * r / (p + r)
        return {"precision": p, "recall": r, "fmeasure": f}
        """,
        part=1,
    ),
    # adversary; slipped at 347915e: signatures [1, 4, 9, 9] and [2, 3, 8, 8], 2 bands x 2 rows: reports (0, 1), datasketch none
    Wrong(
        4,
        "buckets a band by the sum of its values: different bands with equal sums collide",
        old="buckets.setdefault(row[band * rows : (band + 1) * rows].tobytes(), []).append(i)",
        new="buckets.setdefault(int(row[band * rows : (band + 1) * rows].astype(np.uint64).sum()), []).append(i)",
    ),
]
