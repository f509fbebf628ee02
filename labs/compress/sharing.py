"""Parameter sharing: one set of weights used in several places.

* Tied embeddings: the output head reuses the token-embedding matrix (GPT-2, and
  :class:`labs.gpt.GPT` by default), saving ``vocab_size * n_embd`` parameters.
* Cross-layer sharing (ALBERT, Lan et al. 2020): every transformer block is the *same* module,
  so the model stores one block's weights but still computes ``n_layer`` blocks -- fewer bytes,
  the same FLOPs and latency.

:func:`share_blocks` builds the second kind from a :class:`labs.gpt.GPT`; :func:`unique_bytes`
counts the bytes of distinct parameters, which is what a checkpoint costs.
"""

from __future__ import annotations

import copy

import torch.nn as nn

__all__ = ["share_blocks", "unique_bytes"]


def share_blocks(model: nn.Module) -> nn.Module:
    """A copy of a GPT whose blocks are all one module (the copy's first block).

    Parameters are shared, not copied: training the result trains one block used
    ``len(model.blocks)`` times.
    """
    model = copy.deepcopy(model)
    if len(model.blocks) < 2:
        raise ValueError("share_blocks: the model needs at least two blocks to share")
    first = model.blocks[0]
    for i in range(1, len(model.blocks)):
        model.blocks[i] = first
    return model


def unique_bytes(model: nn.Module, buffers: bool = True) -> int:
    """Bytes of the distinct parameters (and, with ``buffers``, buffers) of ``model``, shared
    ones counted once, each at its own element size."""
    seen, total = set(), 0
    for t in list(model.parameters()) + (list(model.buffers()) if buffers else []):
        if id(t) not in seen:
            seen.add(id(t))
            total += t.numel() * t.element_size()
    return total
