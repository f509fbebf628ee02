"""Near-duplicate detection with MinHash signatures and locality-sensitive hashing, in numpy.

A document becomes a *set of shingles* (overlapping character k-grams). Two documents are
near-duplicates when the Jaccard similarity ``|A & B| / |A | B|`` of their shingle sets is high.
MinHash (Broder, 1997) maps a set to ``num_perm`` numbers: for each of ``num_perm`` random
permutations of the hash space, the smallest permuted hash of the set. Two sets agree on one
such minimum with probability exactly their Jaccard similarity, so the fraction of agreeing
positions estimates it with standard error ``sqrt(J (1 - J) / num_perm)``.

LSH banding cuts a signature into ``b`` bands of ``r`` rows; two documents become a
*candidate pair* when all rows of at least one band agree, which happens with probability
``1 - (1 - s^r)^b`` for Jaccard ``s`` -- an S-curve that rises around ``(1/b)^(1/r)``.

The hashing follows ``datasketch`` (scheme "affine32"): SHA-1 of the shingle (first 4 bytes,
little-endian), the MurmurHash3 finalizer, then ``a * h + b mod 2^32`` with odd ``a``. With the
same seed the signatures are bit-identical to ``datasketch.MinHash``; this module's speed comes
from hashing each distinct shingle once and permuting all documents in one array operation.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Sequence

import numpy as np

__all__ = [
    "shingles",
    "jaccard",
    "permutations",
    "signatures",
    "estimate_jaccard",
    "s_curve",
    "lsh_threshold",
    "optimal_bands",
    "lsh_candidates",
    "near_duplicates",
]

_M1, _M2 = np.uint32(0x85EBCA6B), np.uint32(0xC2B2AE35)


def shingles(text: str, k: int = 5) -> set[str]:
    """The set of character ``k``-grams of ``text`` (the whole text if it is shorter)."""
    if k < 1:
        raise ValueError(f"shingles: k must be >= 1, got {k}")
    return {text[i : i + k] for i in range(max(len(text) - k + 1, 1))}


def jaccard(a: set, b: set) -> float:
    """Exact Jaccard similarity ``|a & b| / |a | b|`` (1.0 for two empty sets)."""
    return len(a & b) / len(a | b) if a or b else 1.0


def permutations(num_perm: int, seed: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """The ``(a, b)`` parameters (uint32, shape (num_perm,)) of the affine permutations.

    Drawn exactly as ``datasketch.MinHash(num_perm, seed, scheme="affine32")`` draws them.
    """
    if num_perm < 1:
        raise ValueError(f"permutations: num_perm must be >= 1, got {num_perm}")
    gen = np.random.RandomState(seed)
    a = gen.randint(0, 1 << 31, num_perm, dtype=np.uint32) * np.uint32(2) + np.uint32(1)
    b = gen.randint(0, 1 << 32, num_perm, dtype=np.uint32)
    return a, b


def _hash32(shingle: str) -> int:
    return struct.unpack("<I", hashlib.sha1(shingle.encode("utf-8")).digest()[:4])[0]


def _fmix32(h: np.ndarray) -> np.ndarray:
    h = h ^ (h >> np.uint32(16))
    h = h * _M1
    h = h ^ (h >> np.uint32(13))
    h = h * _M2
    return h ^ (h >> np.uint32(16))


def signatures(
    docs: Sequence[str], num_perm: int = 128, k: int = 5, seed: int = 1, chunk: int = 1 << 17
) -> np.ndarray:
    """MinHash signatures of ``docs``: uint32 array of shape (len(docs), num_perm).

    Args:
        docs: the documents (strings).
        num_perm: permutations per signature (signature length).
        k: shingle length in characters.
        seed: seed of the permutations (the same as datasketch's ``seed``).
        chunk: shingles permuted per array operation (bounds memory to ~4 * num_perm * chunk B).
    """
    if isinstance(docs, str) or len(docs) == 0:
        raise ValueError("signatures: docs must be a non-empty list of strings")
    a, b = permutations(num_perm, seed)
    cache: dict[str, int] = {}
    ids, lengths = [], []
    for doc in docs:
        sh = shingles(doc, k)
        lengths.append(len(sh))
        ids.extend(cache.setdefault(s, len(cache)) for s in sh)
    table = _fmix32(np.fromiter((_hash32(s) for s in cache), np.uint32, len(cache)))
    hashed = table[np.asarray(ids, dtype=np.int64)]
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    sig = np.empty((len(docs), num_perm), dtype=np.uint32)
    lo = 0
    while lo < len(docs):  # whole documents per chunk of shingles
        hi = lo + 1
        while hi < len(docs) and starts[hi] + lengths[hi] - starts[lo] <= chunk:
            hi += 1
        seg = hashed[starts[lo] : starts[hi - 1] + lengths[hi - 1]]
        permuted = a[:, None] * seg[None, :] + b[:, None]  # uint32: wraps modulo 2^32
        sig[lo:hi] = np.minimum.reduceat(permuted, starts[lo:hi] - starts[lo], axis=1).T
        lo = hi
    return sig


def estimate_jaccard(sig_a: np.ndarray, sig_b: np.ndarray) -> float | np.ndarray:
    """Fraction of equal positions; works row-wise for (n, num_perm) arrays."""
    if sig_a.shape[-1] != sig_b.shape[-1]:
        raise ValueError(
            f"estimate_jaccard: signature lengths differ ({sig_a.shape[-1]} vs {sig_b.shape[-1]})"
        )
    return np.mean(sig_a == sig_b, axis=-1)


def s_curve(s: float | np.ndarray, bands: int, rows: int) -> float | np.ndarray:
    """Probability that two documents of Jaccard ``s`` share at least one of ``bands`` bands."""
    return 1.0 - (1.0 - np.asarray(s, dtype=np.float64) ** rows) ** bands


def lsh_threshold(bands: int, rows: int) -> float:
    """The similarity ``(1/b)^(1/r)`` near the steepest point of the S-curve."""
    return (1.0 / bands) ** (1.0 / rows)


def optimal_bands(
    threshold: float, num_perm: int, fp_weight: float = 0.5, fn_weight: float = 0.5
) -> tuple[int, int]:
    """``(bands, rows)`` with ``bands * rows <= num_perm`` minimising the weighted areas of false
    positives (S-curve below ``threshold``) and false negatives (1 - S-curve above it)."""
    if not 0 < threshold < 1:
        raise ValueError(f"optimal_bands: threshold must be in (0, 1), got {threshold}")
    best, best_err = (1, 1), np.inf
    for b in range(1, num_perm + 1):
        for r in range(1, num_perm // b + 1):
            lo, hi = np.linspace(0, threshold, 1001), np.linspace(threshold, 1, 1001)
            fp = np.trapezoid(s_curve(lo, b, r), lo)
            fn = np.trapezoid(1 - s_curve(hi, b, r), hi)
            err = fp_weight * fp + fn_weight * fn
            if err < best_err:
                best, best_err = (b, r), err
    return best


def lsh_candidates(sig: np.ndarray, bands: int, rows: int) -> set[tuple[int, int]]:
    """Pairs ``(i, j)``, ``i < j``, whose signatures agree on every row of some band."""
    n, num_perm = sig.shape
    if bands * rows > num_perm:
        raise ValueError(f"lsh_candidates: bands*rows={bands * rows} exceeds num_perm={num_perm}")
    pairs: set[tuple[int, int]] = set()
    for band in range(bands):
        block = np.ascontiguousarray(sig[:, band * rows : (band + 1) * rows])
        keys = block.view(np.dtype((np.void, block.dtype.itemsize * rows))).ravel()
        _, inverse, counts = np.unique(keys, return_inverse=True, return_counts=True)
        for bucket in np.flatnonzero(counts > 1):
            members = np.flatnonzero(inverse == bucket)
            pairs.update((int(x), int(y)) for i, x in enumerate(members) for y in members[i + 1 :])
    return pairs


def near_duplicates(
    docs: Sequence[str], threshold: float = 0.5, num_perm: int = 128, k: int = 5, seed: int = 1
) -> tuple[set[tuple[int, int]], list[int]]:
    """Near-duplicate pairs of ``docs`` and the indices to keep.

    Candidates come from LSH with :func:`optimal_bands`; a pair is kept when its estimated
    Jaccard is at least ``threshold``. Each connected group of duplicates keeps its first
    document.

    Returns:
        ``(pairs, keep)``: the verified pairs ``(i, j)`` and the sorted indices of survivors.
    """
    sig = signatures(docs, num_perm, k, seed)
    b, r = optimal_bands(threshold, num_perm)
    pairs = {
        (i, j)
        for i, j in lsh_candidates(sig, b, r)
        if estimate_jaccard(sig[i], sig[j]) >= threshold
    }
    parent = list(range(len(docs)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i, j in sorted(pairs):
        ri, rj = root(i), root(j)
        parent[max(ri, rj)] = min(ri, rj)
    return pairs, [i for i in range(len(docs)) if root(i) == i]
