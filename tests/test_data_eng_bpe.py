"""Byte-level BPE: round trips, and the same merges as Hugging Face tokenizers."""

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from labs.data import load_corpus
from labs.data_eng.bpe import BPE, merge_pair


@pytest.fixture(scope="module")
def bpe():
    return BPE().train(load_corpus(), 400)


def _hf(texts, vocab_size):
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        special_tokens=[],
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer)
    merges = json.loads(tok.to_str())["model"]["merges"]
    return tok, [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in merges]


@pytest.mark.parametrize(
    "texts,vocab",
    [
        ([load_corpus()], 400),
        (["low lower lowest newer newest wider " * 3, "héllo wörld 你好你好 🙂🙂"], 300),
    ],
)
def test_same_merges_as_tokenizers(texts, vocab):
    ours = BPE().train(texts, vocab)
    hf, hf_merges = _hf(texts, vocab)
    assert ours.merges_as_strings() == hf_merges
    for t in texts:
        assert len(ours.encode(t)) == len(hf.encode(t).ids)


def test_merge_pair():
    assert merge_pair([5, 5, 5], (5, 5), 9) == [9, 5]
    assert merge_pair([1, 2, 3, 1, 2], (1, 2), 7) == [7, 3, 7]


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_round_trip_any_unicode(bpe, text):
    assert bpe.decode(bpe.encode(text)) == text


def test_tokens_can_split_a_character(bpe):
    ids = bpe.encode("你")  # three UTF-8 bytes, no merge learned: three tokens
    assert len(ids) == 3
    assert bpe.decode(ids) == "你"
    with pytest.raises(ValueError, match="UTF-8"):
        bpe.decode(ids[:1])
    assert bpe.decode(ids[:1], errors="replace") == "\ufffd"


def test_bad_input(bpe):
    with pytest.raises(ValueError, match="not valid UTF-8"):
        bpe.encode(b"\xff\xfe")
    with pytest.raises(ValueError, match="empty"):
        BPE().train([""], 300)
    with pytest.raises(ValueError, match="vocabulary"):
        bpe.decode([10**6])


def test_compresses_corpus(bpe):
    text = load_corpus()
    assert len(text.encode()) / len(bpe.encode(text)) > 2.0
