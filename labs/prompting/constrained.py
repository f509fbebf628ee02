"""Constrained decoding: mask the logits so that the output belongs to a regular language.

At every step the decoder asks, for each token of the vocabulary, whether the text generated so
far plus that token can still be completed to a string the pattern accepts; tokens that cannot
get logit ``-inf``. The test is a *partial* regular-expression match (``regex`` module,
``partial=True``), which answers exactly that question for any regular expression. The output
is therefore valid by construction, and the model still chooses among the valid tokens, so the
content comes from the model. Production libraries (Outlines, llama.cpp grammars, XGrammar)
compile the pattern to an automaton once and precompute the masks per state; the logic is the
same.

:func:`schema_to_regex` turns a small JSON schema (an object of string, enum, integer and boolean
fields) into such a pattern, which is how "JSON mode" with a schema is implemented.
"""

from __future__ import annotations

import json

import regex
import torch

from labs import data

__all__ = ["allowed_mask", "is_complete", "constrained_generate", "schema_to_regex", "validity"]

_TOK = data.CharTokenizer()


def _compile(pattern: str | regex.Pattern) -> regex.Pattern:
    return pattern if isinstance(pattern, regex.Pattern) else regex.compile(pattern)


def allowed_mask(
    pattern: str | regex.Pattern, prefix: str, vocab: str = _TOK.chars, device=None
) -> torch.Tensor:
    """Bool (len(vocab),) on ``device``: True where ``prefix + vocab[i]`` can still be completed
    to a match."""
    pat = _compile(pattern)
    ok = [pat.fullmatch(prefix + ch, partial=True) is not None for ch in vocab]
    return torch.tensor(ok, device=device)


def is_complete(pattern: str | regex.Pattern, text: str) -> bool:
    """Whether ``text`` matches the whole pattern."""
    return _compile(pattern).fullmatch(text) is not None


@torch.no_grad()
def constrained_generate(
    model,
    prompt: str,
    pattern: str | regex.Pattern,
    max_new_tokens: int = 64,
    temperature: float = 0.0,
    generator: torch.Generator | None = None,
    stop: str = "\n",
) -> str:
    """Continue ``prompt`` with text that matches ``pattern``.

    Generation ends when the text is a complete match and either the model picks ``stop`` or no
    character can extend it. ``stop`` is allowed only once the text is complete. The ids and the
    mask go to the model's device (so must ``generator``).

    Raises:
        ValueError: if the pattern cannot be completed within ``max_new_tokens`` characters.
    """
    pat = _compile(pattern)
    device = next((p.device for p in model.parameters()), torch.device("cpu"))  # of the weights
    ids = _TOK.encode(prompt)[None].to(device)
    out = ""
    stop_id = _TOK.stoi[stop]
    for _ in range(max_new_tokens):
        logits = model(ids[:, -model.config.block_size :])[0, -1].float()
        mask = allowed_mask(pat, out, device=logits.device)
        done = is_complete(pat, out)
        if done:
            mask[stop_id] = True
        if not bool(mask.any()):
            break
        logits = logits.masked_fill(~mask, float("-inf"))
        if temperature == 0.0:
            nxt = int(logits.argmax())
        else:
            probs = torch.softmax(logits / temperature, dim=-1)
            nxt = int(torch.multinomial(probs, 1, generator=generator))
        if done and nxt == stop_id:
            return out
        out += _TOK.chars[nxt]
        ids = torch.cat([ids, torch.tensor([[nxt]], device=ids.device)], dim=1)
    if not is_complete(pat, out):
        raise ValueError(
            f"constrained_generate: no complete match within max_new_tokens={max_new_tokens} "
            f"(got {out!r}); raise the limit or simplify the pattern"
        )
    return out


def schema_to_regex(schema: dict) -> str:
    """A regular expression for compact JSON objects that satisfy ``schema``.

    Supported: ``{"type": "object", "properties": {...}}`` whose properties are
    ``{"type": "string"}`` (optionally with ``"enum"`` or ``"pattern"``, a regex without anchors),
    ``{"type": "integer"}`` or ``{"type": "boolean"}``. All properties are required and appear in
    the schema's order, separated by ``", "`` as ``json.dumps`` writes them.
    """
    if schema.get("type") != "object" or not schema.get("properties"):
        raise ValueError("schema_to_regex: expected an object schema with properties")
    parts = []
    for name, prop in schema["properties"].items():
        key = regex.escape(json.dumps(name)) + ": "
        kind = prop.get("type")
        if kind == "string" and "enum" in prop:
            value = "(?:" + "|".join(regex.escape(json.dumps(v)) for v in prop["enum"]) + ")"
        elif kind == "string":
            value = '"' + prop.get("pattern", r'[^"\\]*') + '"'
        elif kind == "integer":
            value = r"-?(?:0|[1-9][0-9]{0,8})"
        elif kind == "boolean":
            value = "(?:true|false)"
        else:
            raise ValueError(f"schema_to_regex: property {name!r} has unsupported type {kind!r}")
        parts.append(key + value)
    return r"\{" + ", ".join(parts) + r"\}"


def validity(texts: list[str], pattern: str | regex.Pattern) -> float:
    """Fraction of ``texts`` that match ``pattern`` completely."""
    if not texts:
        raise ValueError("validity: texts is empty")
    pat = _compile(pattern)
    return sum(pat.fullmatch(t) is not None for t in texts) / len(texts)
