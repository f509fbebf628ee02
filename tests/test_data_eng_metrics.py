"""labs.data_eng.metrics against sacrebleu and rouge-score on the same texts."""

import math

import pytest
import sacrebleu
from rouge_score import rouge_scorer

from labs.data_eng import metrics

HYPS = [
    "The cache holds the keys and values of every earlier token.",
    "A pipeline splits the model into stages, one per GPU.",
    "Throughput rose to 1,250 tokens/s (3.5x faster)!",
    "short",
    "Data parallel training copies the whole model to each rank.",
]
REFS = [
    "The KV cache holds keys and values of all earlier tokens.",
    "Pipeline parallelism splits a model into stages, one stage per GPU.",
    "Throughput rose to 1,250 tokens/s, 3.5x faster than before.",
    "a much longer reference sentence than the hypothesis",
    "Data-parallel training keeps a full copy of the model on every rank.",
]


@pytest.mark.parametrize("n", [1, 2, 3, 5])
def test_corpus_bleu_matches_sacrebleu(n):
    hyps, refs = HYPS[:n], REFS[:n]
    ours = metrics.corpus_bleu(hyps, refs)
    theirs = sacrebleu.corpus_bleu(hyps, [refs]).score
    assert ours == pytest.approx(theirs, abs=1e-6)


def test_corpus_bleu_multiple_references_and_no_smoothing():
    refs2 = [r.lower() for r in REFS]
    ours = metrics.corpus_bleu(HYPS, [[a, b] for a, b in zip(REFS, refs2)])
    theirs = sacrebleu.corpus_bleu(HYPS, [REFS, refs2]).score
    assert ours == pytest.approx(theirs, abs=1e-6)
    ours = metrics.corpus_bleu(HYPS[:2], REFS[:2], smooth="none")
    theirs = sacrebleu.corpus_bleu(HYPS[:2], [REFS[:2]], smooth_method="none").score
    assert ours == pytest.approx(theirs, abs=1e-6)


def test_tokenize_13a_matches_sacrebleu():
    tok = sacrebleu.tokenizers.tokenizer_13a.Tokenizer13a()
    for s in HYPS + REFS + ["x-1 costs $3.50, or 2,000 &amp; more.", "a-b 3-4 (c)"]:
        assert metrics.tokenize_13a(s) == tok(s.rstrip()).split()


def test_brevity_penalty_applies():
    full = metrics.corpus_bleu(["the cat sat on the mat"], ["the cat sat on the mat"])
    short = metrics.corpus_bleu(["the cat sat on"], ["the cat sat on the mat"])
    assert full == pytest.approx(100.0)
    assert short == pytest.approx(100 * math.exp(1 - 6 / 4), rel=1e-9)


@pytest.mark.parametrize("i", range(len(HYPS)))
def test_rouge_matches_rouge_score(i):
    scorer = rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL"])
    theirs = scorer.score(REFS[i], HYPS[i])
    for key, ours in (
        ("rouge1", metrics.rouge_n(REFS[i], HYPS[i], 1)),
        ("rouge2", metrics.rouge_n(REFS[i], HYPS[i], 2)),
        ("rougeL", metrics.rouge_l(REFS[i], HYPS[i])),
    ):
        for field in ("precision", "recall", "fmeasure"):
            assert ours[field] == pytest.approx(getattr(theirs[key], field), abs=1e-9), key


def test_lcs():
    assert metrics.lcs_length("ABCBDAB", "BDCABA") == 4
    assert metrics.lcs_length([], [1]) == 0


def test_perplexity_and_bpc():
    assert metrics.perplexity([math.log(4)] * 3) == pytest.approx(4.0)
    assert metrics.bits_per_char(10 * math.log(2), 10) == pytest.approx(1.0)


def test_em_f1():
    assert metrics.exact_match("The  Eiffel tower!", "eiffel tower") == 1.0
    assert metrics.token_f1("the big red dog", "red dog") == pytest.approx(0.8)  # "the" dropped
    assert metrics.token_f1("", "") == 1.0


@pytest.mark.parametrize(
    "call",
    [
        lambda: metrics.corpus_bleu([], []),
        lambda: metrics.corpus_bleu(["a"], ["a", "b"]),
        lambda: metrics.corpus_bleu(["a"], [[]]),
        lambda: metrics.corpus_bleu("a b", "a b"),
        lambda: metrics.perplexity([]),
        lambda: metrics.bits_per_char(1.0, 0),
    ],
)
def test_bad_input(call):
    with pytest.raises(ValueError):
        call()
