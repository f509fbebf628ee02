"""Benchmark of Chapter 3: MinHash, BPE and BLEU from labs.data_eng vs the libraries.

Run: ``python benchmarks/bench_data.py``. Each pair is measured side by side in one run on the
same input (median of repeated runs, labs.basics.flops.time_fn) and reported as a ratio:

1. MinHash signatures per second, ``labs.data_eng.minhash.signatures`` (numpy, all documents
   in one array operation) vs ``datasketch.MinHash.update_batch`` one document at a time; both
   give bit-identical signatures (checked here). Goal: ratio >= 1.
2. BPE training (256 merges) and encoding, ``labs.data_eng.bpe.BPE`` (Python) vs Hugging Face
   ``tokenizers`` (Rust); same merges (checked). Rust wins training by a wide margin. Encoding is
   timed through each library's ordinary entry point (``Tokenizer.encode`` and ``encode_batch``,
   which also compute offsets and alignments); on the book's small, repetitive corpus the Python
   encoder's word cache does most of the work, so read that ratio as "cache hits are cheap", not
   as Python beating Rust in general.
3. Corpus BLEU of labs.data_eng.metrics vs ``sacrebleu.corpus_bleu`` on the same segments
   (same score, checked). sacreBLEU caches tokenised lines (``lru_cache``), so after the warm-up
   run its tokenisation is free; ours tokenises every time.
"""

from __future__ import annotations

import json
import random

import numpy as np
import sacrebleu
from datasketch import MinHash
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from labs import data
from labs.basics.flops import time_fn
from labs.data_eng import bpe, cleaning, metrics, minhash


def documents(n: int, seed: int = 0) -> list[str]:
    """``n`` documents of 3-6 corpus sentences each; a quarter are edited copies of others."""
    rng = random.Random(seed)
    sents = cleaning.sentences(data.load_corpus())
    docs = []
    for i in range(n):
        if i >= 4 and rng.random() < 0.25:
            words = docs[rng.randrange(i)].split()
            words[rng.randrange(len(words))] = "changed"
            docs.append(" ".join(words))
        else:
            start = rng.randrange(len(sents) - 6)
            docs.append(" ".join(sents[start : start + rng.randint(3, 6)]))
    return docs


def bench_minhash(n_docs: int = 2000, num_perm: int = 128) -> None:
    docs = documents(n_docs)
    shingled = [[s.encode() for s in minhash.shingles(d)] for d in docs]

    def ours():
        return minhash.signatures(docs, num_perm=num_perm)

    def theirs():
        out = []
        for sh in shingled:
            m = MinHash(num_perm=num_perm, seed=1, scheme="affine32")
            m.update_batch(sh)
            out.append(m.hashvalues)
        return np.stack(out)

    assert np.array_equal(ours(), theirs()), "signatures differ from datasketch"
    t_ours, t_theirs = time_fn(ours, warmup=1, repeats=3), time_fn(theirs, warmup=1, repeats=3)
    print(f"MinHash, {n_docs} documents x {num_perm} permutations (identical signatures):")
    print(f"  labs.data_eng   {n_docs / t_ours:10.0f} docs/s")
    print(f"  datasketch      {n_docs / t_theirs:10.0f} docs/s   (shingles pre-encoded, not timed)")
    print(f"  speed ratio labs/datasketch: {t_theirs / t_ours:.2f}  (goal >= 1)")


def bench_bpe(vocab_size: int = 512) -> None:
    text = data.load_corpus()
    ours = bpe.BPE().train(text, vocab_size)

    def hf_train():
        tok = Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = decoders.ByteLevel()
        tok.train_from_iterator(
            [text],
            trainers.BpeTrainer(
                vocab_size=vocab_size,
                initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                special_tokens=[],
                show_progress=False,
            ),
        )
        return tok

    hf = hf_train()
    hf_merges = [
        tuple(m.split(" ")) if isinstance(m, str) else tuple(m)
        for m in json.loads(hf.to_str())["model"]["merges"]
    ]
    assert ours.merges_as_strings() == hf_merges, "merges differ from tokenizers"
    t_train_ours = time_fn(lambda: bpe.BPE().train(text, vocab_size), warmup=0, repeats=3)
    t_train_hf = time_fn(hf_train, warmup=1, repeats=3)
    big = text * 4
    lines = [ln for ln in big.splitlines() if ln]
    t_enc_cold = time_fn(lambda: (ours._cache.clear(), ours.encode(big)), warmup=0, repeats=3)
    t_enc_warm = time_fn(lambda: ours.encode(big), warmup=1, repeats=3)
    t_enc_hf = time_fn(lambda: hf.encode(big), warmup=1, repeats=3)
    t_lines_ours = time_fn(lambda: [ours.encode(ln) for ln in lines], warmup=1, repeats=3)
    t_lines_hf = time_fn(lambda: hf.encode_batch(lines), warmup=1, repeats=3)
    n = len(big.encode())
    mb = n / 1e6
    print(
        f"BPE, {vocab_size - 256} merges on the {len(text.encode()) / 1024:.0f} KiB corpus "
        "(identical merges):"
    )
    print(
        f"  training: labs.data_eng {t_train_ours * 1e3:8.1f} ms, tokenizers {t_train_hf * 1e3:8.1f} ms"
        f"  -> speed ratio labs/tokenizers {t_train_hf / t_train_ours:.3f}"
    )
    print(
        f"  encoding {n / 1024:.0f} KiB as one string: labs.data_eng {mb / t_enc_cold:.2f} MB/s "
        f"(cold word cache), {mb / t_enc_warm:.2f} MB/s (warm); tokenizers {mb / t_enc_hf:.2f} MB/s"
        f"  -> speed ratio labs/tokenizers {t_enc_hf / t_enc_cold:.2f} (cold)"
    )
    print(
        f"  encoding {len(lines)} lines (encode_batch): labs.data_eng {mb / t_lines_ours:.2f} MB/s, "
        f"tokenizers {mb / t_lines_hf:.2f} MB/s  -> speed ratio labs/tokenizers "
        f"{t_lines_hf / t_lines_ours:.2f}"
    )


def bench_bleu(n_segments: int = 500) -> None:
    rng = random.Random(0)
    sents = cleaning.sentences(data.load_corpus())
    refs = [rng.choice(sents) for _ in range(n_segments)]
    hyps = []
    for r in refs:
        words = r.split()
        for _ in range(2):
            words[rng.randrange(len(words))] = rng.choice(["the", "a", "model"])
        hyps.append(" ".join(words[: max(3, len(words) - rng.randint(0, 2))]))
    ours_score = metrics.corpus_bleu(hyps, refs)
    their_score = sacrebleu.corpus_bleu(hyps, [refs]).score
    assert abs(ours_score - their_score) < 1e-6, (ours_score, their_score)
    t_ours = time_fn(lambda: metrics.corpus_bleu(hyps, refs), warmup=1, repeats=5)
    t_theirs = time_fn(lambda: sacrebleu.corpus_bleu(hyps, [refs]), warmup=1, repeats=5)
    print(f"Corpus BLEU, {n_segments} segments (score {ours_score:.4f} in both):")
    print(
        f"  labs.data_eng {t_ours * 1e3:7.1f} ms, sacrebleu {t_theirs * 1e3:7.1f} ms"
        f"  -> speed ratio labs/sacrebleu {t_theirs / t_ours:.2f}"
    )


if __name__ == "__main__":
    bench_minhash()
    print()
    bench_bpe()
    print()
    bench_bleu()
