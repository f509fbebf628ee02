"""Text-generation metrics written out in full: BLEU, ROUGE-N and ROUGE-L, perplexity and bits
per character, exact match and token F1.

The definitions follow the reference implementations practitioners report numbers with, so
the tests can compare against them digit for digit:

* :func:`corpus_bleu` -- sacreBLEU's ``corpus_bleu`` (13a tokenisation, ``exp`` smoothing).
* :func:`rouge_n`, :func:`rouge_l` -- Google's ``rouge-score`` (lower-case alphanumeric tokens).
* :func:`exact_match`, :func:`token_f1` -- the SQuAD evaluation script's normalisation.
"""

from __future__ import annotations

import math
import re
import string
from collections import Counter
from collections.abc import Sequence

__all__ = [
    "tokenize_13a",
    "ngrams",
    "bleu_stats",
    "corpus_bleu",
    "rouge_tokenize",
    "rouge_n",
    "lcs_length",
    "rouge_l",
    "perplexity",
    "bits_per_char",
    "normalize_answer",
    "exact_match",
    "token_f1",
]

_13A_RULES = [
    (re.compile(r"([\{-\~\[-\` -\&\(-\+\:-\@\/])"), r" \1 "),  # punctuation and symbols
    (re.compile(r"([^0-9])([\.,])"), r"\1 \2 "),  # period/comma not after a digit
    (re.compile(r"([\.,])([^0-9])"), r" \1 \2"),  # period/comma not before a digit
    (re.compile(r"([0-9])(-)"), r"\1 \2 "),  # dash after a digit
]


def tokenize_13a(line: str) -> list[str]:
    """Split a sentence the way mteval-v13a (and sacreBLEU's default) does.

    Symbols and punctuation become their own tokens, except a period or comma inside a number
    (``3.14`` and ``1,000`` stay whole).
    """
    line = line.rstrip().replace("<skipped>", "").replace("-\n", "").replace("\n", " ")
    if "&" in line:
        for ent, ch in (("&quot;", '"'), ("&amp;", "&"), ("&lt;", "<"), ("&gt;", ">")):
            line = line.replace(ent, ch)
    line = f" {line} "
    for pattern, repl in _13A_RULES:
        line = pattern.sub(repl, line)
    return line.split()


def ngrams(tokens: Sequence[str], n: int) -> Counter:
    """Counts of the ``n``-grams (tuples of ``n`` tokens) of ``tokens``."""
    return Counter(tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1))


def _check_pairs(hypotheses, references, fn: str) -> None:
    if isinstance(hypotheses, str) or isinstance(references, str):
        raise ValueError(f"{fn}: pass lists of sentences, got a single string")
    if len(hypotheses) == 0:
        raise ValueError(f"{fn}: hypotheses is empty; pass at least one sentence")
    if len(hypotheses) != len(references):
        raise ValueError(
            f"{fn}: {len(hypotheses)} hypotheses but {len(references)} references; "
            "pass one reference (or list of references) per hypothesis"
        )


def bleu_stats(
    hypothesis: list[str], references: list[list[str]], max_n: int = 4
) -> tuple[list[int], list[int], int, int]:
    """Sufficient statistics of one tokenised sentence pair.

    Returns:
        ``(matches, totals, hyp_len, ref_len)``: clipped n-gram matches and hypothesis n-gram
        counts for n = 1..max_n, the hypothesis length and the length of the reference closest
        to it (the shorter one on a tie).
    """
    if not references:
        raise ValueError("bleu_stats: references is empty; pass at least one reference")
    hyp_len = len(hypothesis)
    ref_len = min((abs(len(r) - hyp_len), len(r)) for r in references)[1]
    matches, totals = [], []
    for n in range(1, max_n + 1):
        hyp = ngrams(hypothesis, n)
        best: Counter = Counter()
        for ref in references:  # a hypothesis n-gram counts at most as often as in any reference
            best |= ngrams(ref, n)
        matches.append(sum(min(c, best[g]) for g, c in hyp.items()))
        totals.append(max(hyp_len - n + 1, 0))
    return matches, totals, hyp_len, ref_len


def corpus_bleu(
    hypotheses: Sequence[str],
    references: Sequence[str | Sequence[str]],
    max_n: int = 4,
    smooth: str = "exp",
) -> float:
    """Corpus BLEU on a 0--100 scale, as sacreBLEU computes it.

    Statistics are summed over all sentences first, then
    ``BLEU = BP * exp(mean_n log p_n)`` with ``BP = exp(1 - r/c)`` when the hypotheses are
    shorter (``c`` tokens) than the references (``r`` tokens), else 1.

    Args:
        hypotheses: one system output per segment.
        references: per segment, a reference string or a list of reference strings.
        max_n: highest n-gram order (4 in the standard BLEU-4).
        smooth: ``"exp"`` (halve the pseudo-count of each successive zero precision, sacreBLEU's
            default) or ``"none"`` (a zero precision makes the score 0).
    """
    _check_pairs(hypotheses, references, "corpus_bleu")
    if smooth not in ("exp", "none"):
        raise ValueError(f"corpus_bleu: smooth must be 'exp' or 'none', got {smooth!r}")
    matches, totals, c, r = [0] * max_n, [0] * max_n, 0, 0
    for hyp, refs in zip(hypotheses, references):
        refs = [refs] if isinstance(refs, str) else list(refs)
        if not refs:
            raise ValueError("corpus_bleu: a segment has an empty list of references")
        m, t, hl, rl = bleu_stats(tokenize_13a(hyp), [tokenize_13a(x) for x in refs], max_n)
        matches = [a + b for a, b in zip(matches, m)]
        totals = [a + b for a, b in zip(totals, t)]
        c, r = c + hl, r + rl
    if not any(matches):
        return 0.0
    bp = 1.0 if c >= r else math.exp(1 - r / c)
    log_p, pseudo = 0.0, 1.0
    for m, t in zip(matches, totals):
        if t == 0:
            return 0.0  # no n-grams of this order at all: BLEU-n is undefined, report 0
        if m == 0:
            if smooth == "none":
                return 0.0
            pseudo *= 2
            log_p += math.log(1.0 / (pseudo * t))
        else:
            log_p += math.log(m / t)
    return 100.0 * bp * math.exp(log_p / max_n)


def rouge_tokenize(text: str) -> list[str]:
    """rouge-score's default tokenizer: lower-case, non-alphanumerics become spaces, split."""
    return re.sub(r"[^a-z0-9]+", " ", text.lower()).split()


def _prf(overlap: float, n_pred: int, n_ref: int) -> dict[str, float]:
    p = overlap / n_pred if n_pred else 0.0
    r = overlap / n_ref if n_ref else 0.0
    f = 2 * p * r / (p + r) if p + r else 0.0
    return {"precision": p, "recall": r, "fmeasure": f}


def rouge_n(reference: str, prediction: str, n: int = 1) -> dict[str, float]:
    """ROUGE-N precision, recall and F1 of overlapping n-grams (counts clipped).

    Argument order follows ``rouge_score``'s ``score(target, prediction)``.
    """
    if not isinstance(reference, str) or not isinstance(prediction, str):
        raise ValueError("rouge_n: reference and prediction must be strings")
    ref, pred = ngrams(rouge_tokenize(reference), n), ngrams(rouge_tokenize(prediction), n)
    overlap = sum((ref & pred).values())
    return _prf(overlap, sum(pred.values()), sum(ref.values()))


def lcs_length(a: Sequence, b: Sequence) -> int:
    """Length of the longest common subsequence of ``a`` and ``b`` (O(len(a) * len(b)) DP)."""
    prev = [0] * (len(b) + 1)
    for x in a:
        cur = [0]
        for j, y in enumerate(b):
            cur.append(prev[j] + 1 if x == y else max(prev[j + 1], cur[j]))
        prev = cur
    return prev[-1]


def rouge_l(reference: str, prediction: str) -> dict[str, float]:
    """ROUGE-L: precision = LCS / len(prediction), recall = LCS / len(reference), F1."""
    if not isinstance(reference, str) or not isinstance(prediction, str):
        raise ValueError("rouge_l: reference and prediction must be strings")
    ref, pred = rouge_tokenize(reference), rouge_tokenize(prediction)
    return _prf(lcs_length(ref, pred), len(pred), len(ref))


def perplexity(nll_nats: Sequence[float]) -> float:
    """``exp`` of the mean negative log-likelihood per token (``nll_nats``: one value a token)."""
    vals = list(map(float, nll_nats))
    if not vals:
        raise ValueError("perplexity: nll_nats is empty; pass one loss per token")
    return math.exp(sum(vals) / len(vals))


def bits_per_char(total_nll_nats: float, n_chars: int) -> float:
    """Bits per character: the total loss in nats over a text, divided by ``n_chars * ln 2``.

    With a character tokenizer this is ``mean_loss / ln 2``; with subword tokens the total loss
    is spread over the characters, which makes models with different tokenizers comparable.
    """
    if n_chars <= 0:
        raise ValueError(f"bits_per_char: n_chars must be positive, got {n_chars}")
    return float(total_nll_nats) / (n_chars * math.log(2))


def normalize_answer(text: str) -> str:
    """SQuAD normalisation: lower-case, drop punctuation and articles, collapse whitespace."""
    text = "".join(ch for ch in text.lower() if ch not in set(string.punctuation))
    text = re.sub(r"\b(a|an|the)\b", " ", text)
    return " ".join(text.split())


def exact_match(prediction: str, truth: str) -> float:
    """1.0 when the normalised strings are equal, else 0.0."""
    return float(normalize_answer(prediction) == normalize_answer(truth))


def token_f1(prediction: str, truth: str) -> float:
    """F1 of the bag of normalised tokens shared by prediction and truth."""
    pred, gold = normalize_answer(prediction).split(), normalize_answer(truth).split()
    if not pred or not gold:
        return float(pred == gold)
    common = sum((Counter(pred) & Counter(gold)).values())
    if common == 0:
        return 0.0
    p, r = common / len(pred), common / len(gold)
    return 2 * p * r / (p + r)
