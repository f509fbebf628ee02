"""A request's own random generator, seeded with all 64 bits of OpenAI's ``seed``.

OpenAI's ``seed`` is an int64, and a different seed should give a different sample.
``torch.Generator.manual_seed`` accepts any 64-bit value, but on the CPU it initialises its
Mersenne Twister (mt19937) from the low 32 bits only: seeds 0 and 2**32, or -1 and 2**63 - 1,
give the same stream. CUDA's generator (Philox) keeps all 64 bits. So on the CPU a seed that
does not fit 32 bits fills the twister's 624-word state with the twister's own initialisation
from a key of two 32-bit words (``init_by_array``, the reference algorithm, as NumPy's legacy
``RandomState`` runs it for such seeds); a seed that fits keeps ``manual_seed``'s stream::

    gen = request_generator(2**32, torch.device("cpu"))   # differs from seed 0
    torch.multinomial(probs, 1, generator=gen)
"""

from __future__ import annotations

import struct

import numpy as np
import torch

__all__ = ["request_generator"]

_MT_N = 624
_STATE_BYTES = 5056  # torch's CPU generator state: seed, left, seeded, next, 624 words, normals
_WORDS_AT = 24  # the words start after seed (int64), left and seeded (int32), next (uint64)


def request_generator(seed: int | None, device: torch.device | str = "cpu") -> torch.Generator:
    """A ``torch.Generator`` on ``device`` seeded with ``seed`` (any int64, or any value
    ``manual_seed`` takes), or with a fresh random seed when ``seed`` is None. Distinct 64-bit
    seeds give distinct streams on the CPU as on CUDA."""
    gen = torch.Generator(device=device)
    if seed is None:
        gen.seed()
        return gen
    key = seed % 2**64  # manual_seed's reading of a negative seed
    gen.manual_seed(key)
    if gen.device.type != "cpu" or key < 2**32:
        return gen  # Philox keeps 64 bits; mt19937 keeps 32, here all of them
    state = bytearray(gen.get_state().numpy().tobytes())  # manual_seed reset the normal caches
    if len(state) != _STATE_BYTES:
        raise RuntimeError(f"request_generator: torch's CPU generator state has {len(state)} "
                           f"bytes, expected {_STATE_BYTES}; this torch lays it out differently")  # fmt: skip
    words = np.random.RandomState([key & 0xFFFFFFFF, key >> 32]).get_state()[1]
    state[_WORDS_AT : _WORDS_AT + 8 * _MT_N] = words.astype("<u8").tobytes()
    struct.pack_into("<Q", state, 0, key)  # initial_seed() reports the seed given
    gen.set_state(torch.frombuffer(state, dtype=torch.uint8))
    return gen
