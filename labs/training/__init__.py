"""Training machinery shared by the chapters: the optimisation loop and checkpoint commits.

:mod:`labs.training.loop` trains and evaluates any model (the tiny GPT of :mod:`labs.gpt` by
default); :mod:`labs.training.commit` writes checkpoint directories atomically and verifies them
(the formats are in :mod:`labs.training.checkpoint`); :mod:`labs.training.mixed` runs the
loop's steps under autocast (fp16 with a ``GradScaler``, bf16) and measures their memory.
"""
