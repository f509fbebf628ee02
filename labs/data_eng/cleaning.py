"""A small "web crawl" with planted problems, and a rule-based cleaner in the style of C4/Gopher.

:func:`make_crawl` cuts the project's corpus into documents and plants, with a seed, the
problems a real crawl has: exact duplicates, near-duplicates (a few words edited, boilerplate
appended), compatibility characters that Unicode normalisation folds, pages in other
languages and low-quality pages (lorem ipsum, symbol spam, lists, navigation text, code).
Every document carries the label of what was planted, so each stage's effect can be counted.

:func:`quality_flags` applies heuristics modelled on the C4 filters (Raffel et al., 2020) and
the Gopher rules (Rae et al., 2021); :func:`clean` runs normalisation, the rules, a language
check and exact deduplication, and reports how many documents each step removed.
"""

from __future__ import annotations

import hashlib
import random
import re
import unicodedata

from labs import data

__all__ = ["sentences", "make_crawl", "normalize", "quality_flags", "english_score", "clean"]

_FOREIGN = [
    "Ein neuronales Netz ist ein Programm, dessen Verhalten in Zahlen gespeichert ist. "
    "Das Training findet diese Zahlen, und der Betrieb nutzt sie auf vielen Rechnern.",
    "Un reseau de neurones est un programme dont le comportement est stocke dans des nombres. "
    "L'entrainement trouve ces nombres et le service les utilise pour repondre.",
    "Una red neuronal es un programa cuyo comportamiento se guarda en numeros. "
    "El entrenamiento encuentra esos numeros y el servicio los usa para responder.",
    "Una rete neurale e un programma il cui comportamento e memorizzato nei numeri. "
    "L'addestramento trova quei numeri e il servizio li usa per rispondere.",
    "Ett neuralt natverk ar ett program vars beteende lagras i tal. "
    "Traningen hittar talen och tjansten anvander dem nar den svarar pa fragor.",
    "Um rede neural e um programa cujo comportamento fica guardado em numeros. "
    "O treino encontra esses numeros e o servico usa-os para responder.",
]
_JUNK = {
    "lorem": "Lorem ipsum dolor sit amet, consectetur adipiscing elit. Sed do eiusmod tempor "
    "incididunt ut labore et dolore magna aliqua. Ut enim ad minim veniam, quis nostrud.",
    "symbols": "### $$$ >>> BEST PRICE !!! ### $$$ >>> CLICK HERE !!! ### $$$ >>> @@@ %%% *** "
    "the deal of the day is here and it will not last, so act now ### $$$ >>> ### !!!",
    "bullets": "- Home page\n- About us and our team\n- Products and services\n- Contact the "
    "sales team\n- Login to your account\n- Privacy policy and terms\n- Careers with the company",
    "short": "Page not found.",
    "code": "function scale(x) { return x * 2; } var y = scale(3); if (y > 4) { console.log(y); "
    "} else { console.log(0); } for (var i = 0; i < 10; i++) { y = scale(y); } return the value;",
    "repeated": "Buy now and save. Buy now and save. Buy now and save. Buy now and save. "
    "Buy now and save. Buy now and save. Buy now and save. Buy now and save.",
}
_COMPAT = {"fi": "\ufb01", " ": "\u00a0", "A": "\uff21", "1": "\uff11", "T": "\uff34"}
_BOILERPLATE = "Share this page. Subscribe to our newsletter for updates."


def sentences(text: str) -> list[str]:
    """Split text into sentences (at ., ! or ? followed by a space), dropping headings."""
    out = []
    for para in text.split("\n\n"):
        para = " ".join(para.split())
        if para.count(".") + para.count("?") + para.count("!") == 0:
            continue  # a heading
        out += [s for s in re.split(r"(?<=[.!?])\s+", para) if s]
    return out


def make_crawl(
    seed: int = 0, doc_sentences: int = 3, n_exact: int = 8, n_near: int = 16, n_unicode: int = 10
) -> list[dict]:
    """Documents ``{"id", "text", "kind", "source"}`` with planted problems.

    ``kind`` is "clean", "exact_dup", "near_dup", "unicode", "foreign" or "junk:<rule>";
    ``source`` is the id of the document a duplicate was copied from (else ``None``).
    """
    sents = sentences(data.load_corpus())
    base = [" ".join(sents[i : i + doc_sentences]) for i in range(0, len(sents) - 2, doc_sentences)]
    rng = random.Random(seed)
    docs = [{"text": t, "kind": "clean", "source": None} for t in base]
    originals = list(range(len(docs)))
    for i in rng.sample(originals, n_exact):  # exact copies, modulo whitespace
        docs.append({"text": "  " + docs[i]["text"] + "\n", "kind": "exact_dup", "source": i})
    for i in rng.sample(originals, n_near):  # near copies: edited words plus boilerplate
        words = docs[i]["text"].split()
        for j in rng.sample(range(len(words)), max(1, len(words) // 25)):
            words[j] = rng.choice(["the", "a", "this", "that", "fast", "large", "new"])
        docs.append({"text": " ".join(words) + " " + _BOILERPLATE, "kind": "near_dup", "source": i})
    for i in rng.sample(originals, n_unicode):  # compatibility characters NFKC folds away
        text = docs[i]["text"]
        for plain, compat in _COMPAT.items():
            text = text.replace(plain, compat, 2)
        docs[i] = {"text": text, "kind": "unicode", "source": None}
    docs += [{"text": t, "kind": "foreign", "source": None} for t in _FOREIGN]
    docs += [{"text": t, "kind": f"junk:{k}", "source": None} for k, t in _JUNK.items()]
    order = list(range(len(docs)))
    rng.shuffle(order)
    new_id = {old: new for new, old in enumerate(order)}
    out = []
    for old in order:
        d = dict(docs[old])
        d["source"] = None if d["source"] is None else new_id[d["source"]]
        out.append({"id": new_id[old], **d})
    return out


def normalize(text: str) -> str:
    """NFKC normalisation (ligatures, full-width forms, no-break spaces) and collapsed spaces."""
    return " ".join(unicodedata.normalize("NFKC", text).split())


_STOP = {"the", "be", "to", "of", "and", "that", "have", "with", "is", "in", "it", "are"}


def english_score(text: str) -> float:
    """Fraction of words that are common English function words (a crude language check)."""
    words = re.findall(r"[a-z']+", text.lower())
    return sum(w in _STOP for w in words) / len(words) if words else 0.0


def quality_flags(text: str) -> list[str]:
    """Names of the heuristic rules ``text`` breaks (an empty list keeps the document).

    * ``too_short``: fewer than 20 words (Gopher keeps 50 to 100,000; our documents are short).
    * ``lorem_ipsum``: contains "lorem ipsum" (C4).
    * ``curly_brace``: contains "{" -- C4 drops such pages as code.
    * ``bullet_lines``: more than 90 % of lines start with a bullet (Gopher).
    * ``duplicate_sentences``: more than 30 % of sentences are repeats (Gopher's repetition rule).
    * ``symbol_ratio``: more than 10 % of words are "#", "..." or symbol-only words (Gopher).
    * ``no_alpha``: fewer than 80 % of words contain a letter (Gopher).
    * ``no_terminal_punct``: no sentence ends in ., ! or ? (C4 keeps only such lines).
    """
    flags = []
    words = text.split()
    lines = [ln for ln in text.splitlines() if ln.strip()]
    sents = [s.strip().lower() for s in re.split(r"(?<=[.!?])\s+", text) if s.strip()]
    if len(words) < 20:
        flags.append("too_short")
    if "lorem ipsum" in text.lower():
        flags.append("lorem_ipsum")
    if "{" in text:
        flags.append("curly_brace")
    if lines and sum(ln.lstrip()[:1] in "-*\u2022" for ln in lines) / len(lines) > 0.9:
        flags.append("bullet_lines")
    if sents and 1 - len(set(sents)) / len(sents) > 0.3:
        flags.append("duplicate_sentences")
    if words and sum(not re.search(r"\w", w) for w in words) / len(words) > 0.1:
        flags.append("symbol_ratio")
    if words and sum(bool(re.search(r"[^\W\d_]", w)) for w in words) / len(words) < 0.8:
        flags.append("no_alpha")
    if not re.search(r"[.!?][\"')\]]?\s*$|[.!?]\s", text):
        flags.append("no_terminal_punct")
    return flags


def clean(docs: list[dict], min_english: float = 0.08) -> tuple[list[dict], dict[str, int]]:
    """Normalise, filter and exactly deduplicate ``docs`` (dicts with "id" and "text").

    Returns:
        ``(kept, removed)``: the surviving documents (text normalised) in input order, and the
        number removed by each step -- one count per quality rule (the first rule a document
        breaks), ``language`` and ``exact_dup``. ``removed["normalized"]`` counts documents
        whose text normalisation changed (they are kept).
    """
    if not docs:
        raise ValueError("clean: docs is empty; pass at least one document")
    removed: dict[str, int] = {"normalized": 0}
    seen: set[str] = set()
    kept = []
    for doc in docs:
        text = normalize(doc["text"])
        removed["normalized"] += unicodedata.normalize("NFKC", doc["text"]) != doc["text"]
        flags = quality_flags(doc["text"].replace("\u00a0", " "))
        if flags:
            removed[flags[0]] = removed.get(flags[0], 0) + 1
            continue
        if english_score(text) < min_english:
            removed["language"] = removed.get("language", 0) + 1
            continue
        digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
        if digest in seen:
            removed["exact_dup"] = removed.get("exact_dup", 0) + 1
            continue
        seen.add(digest)
        kept.append({**doc, "text": text})
    return kept, removed
