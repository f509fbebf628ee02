"""Retrieval-augmented generation, small enough to read: chunk, embed, index, retrieve, prompt.

* :func:`chunk` cuts a text into overlapping windows of characters, broken at spaces.
* :class:`TfidfEmbedder` is a sparse bag-of-words baseline (TF-IDF, L2-normalised), optionally
  projected to ``dim`` dense dimensions with a truncated SVD (latent semantic analysis) so that
  a FAISS index can hold it. It is fitted on the chunks themselves: no model download.
* :func:`exact_search` is brute force; :func:`build_ivf` is FAISS's inverted-file index, which
  searches only ``nprobe`` of ``nlist`` clusters: faster, and approximate (:func:`recall_at_k`).
"""

from __future__ import annotations

import math
import re
from collections import Counter

import faiss
import numpy as np

__all__ = [
    "chunk",
    "TfidfEmbedder",
    "exact_search",
    "build_ivf",
    "recall_at_k",
    "rag_prompt",
]

_WORD = re.compile(r"[a-z0-9]+")


def chunk(text: str, size: int = 300, overlap: int = 50) -> list[str]:
    """Windows of about ``size`` characters, consecutive ones sharing about ``overlap``."""
    if not 0 <= overlap < size:
        raise ValueError(f"chunk: need 0 <= overlap < size, got overlap={overlap}, size={size}")
    words, chunks, start = text.split(), [], 0
    while start < len(words):
        n, end = 0, start
        while end < len(words) and n + len(words[end]) + 1 <= size:
            n += len(words[end]) + 1
            end += 1
        end = max(end, start + 1)
        chunks.append(" ".join(words[start:end]))
        if end == len(words):
            break
        back, keep = 0, end  # step back until ~overlap characters are shared
        while keep - 1 > start and back + len(words[keep - 1]) + 1 <= overlap:
            keep -= 1
            back += len(words[keep]) + 1
        start = keep
    return chunks


class TfidfEmbedder:
    """TF-IDF vectors (``sublinear`` term frequency, smooth IDF), optionally reduced by SVD."""

    def __init__(self, dim: int | None = None):
        self.dim = dim

    @staticmethod
    def _terms(text: str) -> list[str]:
        return _WORD.findall(text.lower())

    def fit(self, docs: list[str]) -> TfidfEmbedder:
        df = Counter(t for d in docs for t in set(self._terms(d)))
        self.vocab = {t: i for i, t in enumerate(sorted(df))}
        n = len(docs)
        self.idf = np.array([math.log((1 + n) / (1 + df[t])) + 1 for t in sorted(df)], "float32")
        self.proj = None
        if self.dim is not None:
            x = self._sparse(docs)
            _, _, vt = np.linalg.svd(x, full_matrices=False)
            self.proj = vt[: self.dim].T.astype("float32")  # (vocab, dim)
        return self

    def _sparse(self, docs: list[str]) -> np.ndarray:
        x = np.zeros((len(docs), len(self.vocab)), dtype="float32")
        for i, d in enumerate(docs):
            for t, c in Counter(self._terms(d)).items():
                if t in self.vocab:
                    x[i, self.vocab[t]] = 1 + math.log(c)
        x *= self.idf
        return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)

    def encode(self, docs: list[str]) -> np.ndarray:
        """Unit-norm vectors, shape (len(docs), dim or vocabulary size), float32."""
        x = self._sparse(docs)
        if self.proj is not None:
            x = x @ self.proj
            x /= np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)
        return np.ascontiguousarray(x, dtype="float32")


def exact_search(db: np.ndarray, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Top-``k`` inner products by brute force with FAISS's flat index: (scores, ids), (Q, k)."""
    index = faiss.IndexFlatIP(db.shape[1])
    index.add(db)
    return index.search(queries, k)


def build_ivf(db: np.ndarray, nlist: int, nprobe: int, seed: int = 0) -> faiss.IndexIVFFlat:
    """An inverted-file index: k-means into ``nlist`` cells, search ``nprobe`` nearest cells."""
    quantizer = faiss.IndexFlatIP(db.shape[1])
    index = faiss.IndexIVFFlat(quantizer, db.shape[1], nlist, faiss.METRIC_INNER_PRODUCT)
    index.cp.seed = seed
    index.train(db)
    index.add(db)
    index.nprobe = nprobe
    return index


def recall_at_k(approx_ids: np.ndarray, exact_ids: np.ndarray) -> float:
    """Fraction of the exact top-k neighbours that the approximate search also returned."""
    hits = sum(len(set(a) & set(e)) for a, e in zip(approx_ids, exact_ids, strict=True))
    return hits / exact_ids.size


def rag_prompt(question: str, passages: list[str], max_chars: int) -> str:
    """A prompt of at most ``max_chars`` characters (what the model's window leaves for it):
    retrieved context first, then ``"\nQ: <question>\nA:"``.

    The question is always whole; the context gets the room left, keeping its end (the text
    nearest the question). Raises ``ValueError`` when the question alone does not fit: a prompt
    without its question, or without any context, would not be a RAG prompt.
    """
    context = "\n".join(passages)
    tail = f"\nQ: {question}\nA:"
    room = max_chars - len(tail)
    if room <= 0:
        raise ValueError(
            f"rag_prompt: the question takes {len(tail)} of the {max_chars} characters, leaving "
            "no room for retrieved text; ask a shorter question or give the model a longer window"
        )
    return context[-room:] + tail
