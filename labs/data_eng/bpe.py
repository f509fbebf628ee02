"""Byte-level byte-pair encoding (BPE), the tokenizer family of GPT-2 and most LLMs since.

Text is UTF-8 encoded, so the base vocabulary is the 256 byte values and *any* string can be
encoded -- there is no unknown token. Training (Sennrich et al., 2016) repeats one step: count
adjacent token pairs over the corpus, and merge the most frequent pair into a new token. Pairs
never cross a *pre-token* boundary: the text is first split with GPT-2's regular expression into
words with their leading space, numbers, punctuation runs and whitespace.

Ties between equally frequent pairs are broken the way Hugging Face ``tokenizers`` breaks them
(the pair with the smaller token ids wins, ids numbered as its ``ByteLevel`` alphabet), so on
the same corpus both produce the same merges; ``tests/test_data_eng_bpe.py`` checks it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence

import regex

__all__ = ["GPT2_PATTERN", "pretokenize", "bytes_to_unicode", "BPE", "merge_pair"]

GPT2_PATTERN = regex.compile(
    r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
)


def pretokenize(text: str) -> list[str]:
    """Split ``text`` into GPT-2 pre-tokens; merges never cross their boundaries."""
    return GPT2_PATTERN.findall(text)


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's map from the 256 byte values to printable characters (for showing tokens)."""
    keep = [*range(33, 127), *range(161, 173), *range(174, 256)]
    extra = [b for b in range(256) if b not in keep]
    return {**{b: chr(b) for b in keep}, **{b: chr(256 + i) for i, b in enumerate(extra)}}


def merge_pair(ids: Sequence[int], pair: tuple[int, int], new_id: int) -> list[int]:
    """Replace each non-overlapping occurrence of ``pair`` in ``ids`` (left to right) by
    ``new_id``: ``merge_pair([5, 5, 5], (5, 5), 9) == [9, 5]``."""
    out, i = [], 0
    while i < len(ids):
        if i + 1 < len(ids) and ids[i] == pair[0] and ids[i + 1] == pair[1]:
            out.append(new_id)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out


class BPE:
    """A byte-level BPE tokenizer.

    Attributes:
        merges: the learned merges in order, as pairs of token ids.
        vocab: token id -> the bytes it stands for (ids 0..255 are the single bytes).
    """

    def __init__(self) -> None:
        self.merges: list[tuple[int, int]] = []
        self.vocab: dict[int, bytes] = {i: bytes([i]) for i in range(256)}
        self._ranks: dict[tuple[int, int], int] = {}
        self._cache: dict[str, list[int]] = {}

    @property
    def vocab_size(self) -> int:
        return len(self.vocab)

    def train(self, texts: str | Iterable[str], vocab_size: int) -> BPE:
        """Learn ``vocab_size - 256`` merges from ``texts`` (fewer if no pair repeats)."""
        texts = [texts] if isinstance(texts, str) else list(texts)
        if not any(texts):
            raise ValueError("BPE.train: texts is empty; pass a non-empty corpus")
        if vocab_size < 256:
            raise ValueError(f"BPE.train: vocab_size must be >= 256 (the bytes), got {vocab_size}")
        order = sorted(range(256), key=lambda b: bytes_to_unicode()[b])
        hf_id = {b: i for i, b in enumerate(order)}  # tie-break order of `tokenizers`
        counts = Counter(w for t in texts for w in pretokenize(t))
        words = [list(w.encode("utf-8")) for w in counts]
        freqs = list(counts.values())
        self.__init__()
        pairs: Counter = Counter()  # pair -> occurrences, kept up to date incrementally
        where: dict[tuple[int, int], set[int]] = {}  # pair -> words that contain it
        for w, (ids, f) in enumerate(zip(words, freqs)):
            for p in zip(ids, ids[1:]):
                pairs[p] += f
                where.setdefault(p, set()).add(w)
        while len(self.vocab) < vocab_size and pairs:
            best = min(pairs, key=lambda p: (-pairs[p], hf_id[p[0]], hf_id[p[1]]))
            new_id = len(self.vocab)
            hf_id[new_id] = new_id
            self.merges.append(best)
            self._ranks[best] = len(self.merges) - 1
            self.vocab[new_id] = self.vocab[best[0]] + self.vocab[best[1]]
            for w in where.pop(best):  # only words containing the pair change
                ids, f = words[w], freqs[w]
                for p in zip(ids, ids[1:]):
                    pairs[p] -= f
                    if pairs[p] == 0:
                        del pairs[p]
                words[w] = ids = merge_pair(ids, best, new_id)
                for p in zip(ids, ids[1:]):
                    pairs[p] += f
                    where.setdefault(p, set()).add(w)
        return self

    def _encode_word(self, word: str) -> list[int]:
        if word in self._cache:
            return self._cache[word]
        ids = list(word.encode("utf-8"))
        while len(ids) > 1:  # apply the earliest-learned merge present, as training did
            pair = min(zip(ids, ids[1:]), key=lambda p: self._ranks.get(p, len(self._ranks)))
            if pair not in self._ranks:
                break
            ids = merge_pair(ids, pair, 256 + self._ranks[pair])
        self._cache[word] = ids
        return ids

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text`` (a ``str``; bytes must be decoded to text first)."""
        if isinstance(text, bytes | bytearray):
            try:
                text = text.decode("utf-8")
            except UnicodeDecodeError as err:
                raise ValueError(
                    f"BPE.encode: text is bytes that are not valid UTF-8 ({err.reason} at "
                    f"byte {err.start}); decode it with the right codec first"
                ) from None
        if not isinstance(text, str):
            raise ValueError(f"BPE.encode: text must be a str, got {type(text).__name__}")
        return [i for w in pretokenize(text) for i in self._encode_word(w)]

    def decode_bytes(self, ids: Iterable[int]) -> bytes:
        """The bytes of a token sequence (a single token may be part of a UTF-8 character)."""
        try:
            return b"".join(self.vocab[int(i)] for i in ids)
        except KeyError as err:
            raise ValueError(
                f"BPE.decode: token id {err.args[0]} is not in the vocabulary "
                f"(0..{self.vocab_size - 1})"
            ) from None

    def decode(self, ids: Iterable[int], errors: str = "strict") -> str:
        """The text of a token sequence. A sequence that cuts a UTF-8 character in half raises
        ``ValueError`` unless ``errors="replace"``."""
        raw = self.decode_bytes(ids)
        try:
            return raw.decode("utf-8", errors=errors)
        except UnicodeDecodeError as err:
            raise ValueError(
                f"BPE.decode: the tokens end or start inside a UTF-8 character ({err.reason}); "
                "decode the whole sequence or pass errors='replace'"
            ) from None

    def merges_as_strings(self) -> list[tuple[str, str]]:
        """Merges in GPT-2's printable byte alphabet (the form ``tokenizers`` saves)."""
        show = bytes_to_unicode()

        def s(i: int) -> str:
            return "".join(show[b] for b in self.vocab[i])

        return [(s(a), s(b)) for a, b in self.merges]
