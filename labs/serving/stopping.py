"""When a generation ends, and which of its text a client may see yet.

A request ends at ``max_new_tokens`` (``finish_reason="length"``) or earlier, with
``finish_reason="stop"``, at the first *stop string* (the client's ``stop``) or at the model's
*end of sequence*. The tiny GPT's vocabulary (newline and printable ASCII) has no end-of-sequence
token, so its end of sequence is a string too: the chat template's end of turn, where the model
starts writing the user's next line (``"\\nUser:"``, or ``"\\nUser ("`` for a named user). Two of vLLM's sampling parameters, which
benchmarks send, change this, with vLLM's meaning:

* ``ignore_eos``: the end of sequence does not end the request; it runs to ``max_new_tokens``
  unless a stop string ends it (a benchmark asks for exactly ``max_tokens`` tokens this way).
* ``min_tokens``: neither a stop string nor the end of sequence ends the request before
  ``min_tokens`` tokens exist. As in vLLM's detokenizer, only text after the first
  ``min_tokens`` tokens is searched, so a stop string counts when it *ends* after them (it may
  begin before); one that lies wholly inside them stays in the text.

The text returned stops before the stop string (as OpenAI's API does). While the text ends with
what could become a stop string, that tail is held back from streaming, so no client ever sees
a piece of text that a later token turns into a stop::

    >>> visible_text("Hello\\nUs", ("\\nUser:",))
    ('Hello', False)
    >>> visible_text("Hello\\nUser: hi", ("\\nUser:",))
    ('Hello', True)
    >>> visible_text("a.b.c", (".",), after=2)   # min_tokens=2: the first "." does not count
    ('a.b', True)
"""

from __future__ import annotations

__all__ = ["CHAT_END_OF_TURN", "stop_strings", "visible_text"]

CHAT_END_OF_TURN = ("\nUser:", "\nUser (")  # the starts of a user line: the chat's end of turn


def stop_strings(stop: tuple[str, ...], eos: tuple[str, ...], ignore_eos: bool) -> tuple[str, ...]:
    """The strings that end a request: its ``stop`` strings, and its ``eos`` unless ignored."""
    return tuple(stop) + (() if ignore_eos else tuple(eos))


def visible_text(text: str, stops: tuple[str, ...], after: int = 0) -> tuple[str, bool]:
    """``(text that may be shown, whether a stop string ended it)``.

    Args:
        text: the request's output so far, decoded.
        stops: strings that end it (see :func:`stop_strings`).
        after: characters of the first ``min_tokens`` tokens: a stop string counts only where
            it ends after them. ``len(text)`` or more: nothing counts yet (fewer than
            ``min_tokens`` tokens exist).
    """
    hits = [i for s in stops if (i := text.find(s, max(0, after - len(s) + 1))) >= 0]
    if hits:
        return text[: min(hits)], True
    held = max((k for s in stops for k in range(1, len(s)) if text.endswith(s[:k])), default=0)
    return text[: len(text) - held], False
