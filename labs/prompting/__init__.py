"""Prompt engineering you can measure (Chapter 7).

No large model is available offline, so the chapter builds the phenomenon at small scale:

* :mod:`labs.prompting.tasks` -- a family of string tasks where the task of each prompt is
  drawn at random, so in-context examples (or an instruction) are the only way to know it.
* :mod:`labs.prompting.train` -- trains the book's tiny GPT on that family
  (``python -m labs.prompting.train`` regenerates the shipped checkpoint).
* :mod:`labs.prompting.evaluate` -- a few-shot evaluation harness with seeded test sets.
* :mod:`labs.prompting.constrained` -- constrained decoding: logits masked so the output
  matches a regular expression or a small JSON schema.
"""
