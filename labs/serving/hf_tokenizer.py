"""The tiny GPT's vocabulary as a Hugging Face tokenizer directory, for the tools that need one.

Benchmarks count tokens and cut prompts to a length with the served model's tokenizer (guidellm's
``--processor``, vLLM's ``bench serve --tokenizer``), loaded with
``transformers.AutoTokenizer.from_pretrained(DIR)``. This writes that directory, offline::

    labs-export-tokenizer /tmp/tiny-gpt-tokenizer      # or: python -m labs.serving.hf_tokenizer DIR

It holds ``tokenizer.json`` (built with the ``tokenizers`` library: a word-level model over the
96 characters, every character its own word, the pieces fused back without spaces),
``tokenizer_config.json`` (no special tokens added, no clean-up of spaces, the context length,
and the chat template of :func:`labs.serving.chat.chat_prompt` in Jinja) and
``special_tokens_map.json``. It encodes and decodes exactly as :class:`labs.data.CharTokenizer`
does, and refuses a character outside the vocabulary as the service does (the tests check both).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers

from labs import data

__all__ = ["build_tokenizer", "export_tokenizer", "CHAT_TEMPLATE", "main"]

# labs.serving.chat.chat_prompt in Jinja (apply_chat_template(..., add_generation_prompt=True))
CHAT_TEMPLATE = (
    "{%- for m in messages -%}"
    "{%- if m.content is string -%}{%- set text = m.content -%}"
    "{%- else -%}{%- set text = m.content | selectattr('type', 'equalto', 'text')"
    " | map(attribute='text') | join('\\n') -%}{%- endif -%}"
    "{%- if m.role in ['system', 'developer'] -%}{{ text }}"
    "{%- else -%}{{ m.role | capitalize }}{%- if m.name %} ({{ m.name }}){%- endif -%}: {{ text }}"
    "{%- endif -%}{{ '\\n' }}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{ 'Assistant: ' }}{%- endif -%}"
)


def build_tokenizer(tokenizer: data.CharTokenizer | None = None) -> Tokenizer:
    """A ``tokenizers.Tokenizer`` with the ids of ``tokenizer`` (default: the tiny GPT's)."""
    chars = (tokenizer or data.CharTokenizer()).chars
    vocab = {ch: i for i, ch in enumerate(chars)}
    # No unknown token in the vocabulary: encoding a character outside it raises, as the
    # service refuses it, instead of mapping it to an id the model never saw.
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
    tok.decoder = decoders.Fuse()
    return tok


def export_tokenizer(out: str | Path, context_length: int = 128) -> Path:
    """Write the tokenizer directory ``out`` (created if needed); returns its path.

    Args:
        out: the directory.
        context_length: ``model_max_length`` in tokens (the service's ``--context-length``).
    """
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    build_tokenizer().save(str(out / "tokenizer.json"))
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "model_max_length": context_length,
        "clean_up_tokenization_spaces": False,  # decode must return the text as it was
        "add_bos_token": False,
        "add_eos_token": False,
        "chat_template": CHAT_TEMPLATE,
    }
    (out / "tokenizer_config.json").write_text(json.dumps(config, indent=2) + "\n")
    (out / "special_tokens_map.json").write_text("{}\n")
    return out


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(
        prog="labs-export-tokenizer",
        description="Write the tiny GPT's tokenizer as a Hugging Face tokenizer directory.",
    )
    p.add_argument("out", help="directory to write (created if needed)")
    p.add_argument("--context-length", type=int, default=128,
                   help="model_max_length: the service's --context-length (default 128)")  # fmt: skip
    args = p.parse_args(argv)
    if args.context_length < 1:
        p.exit(2, f"{p.prog}: error: --context-length must be >= 1, got {args.context_length}\n")
    try:
        out = export_tokenizer(args.out, args.context_length)
    except OSError as err:
        p.exit(1, f"{p.prog}: error: cannot write {args.out}: {err}\n")
    print(f"wrote {out}: load it with transformers.AutoTokenizer.from_pretrained({str(out)!r})",
          file=sys.stderr)  # fmt: skip


if __name__ == "__main__":
    main()
