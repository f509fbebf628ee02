"""Back-of-the-envelope limits of a device: weight bytes, decode-speed ceilings, energy per token.

Decoding one token of a dense LLM reads every weight once and the whole KV cache once (Chapter
10), and the arithmetic per byte is so small that memory bandwidth, not compute, sets the pace::

    tokens / s  <=  bandwidth (bytes / s)  /  bytes read per token

and the energy of reading those bytes dominates the energy of a token. This module holds the
arithmetic, and the published memory specifications it is applied to (:data:`DEVICES`; each entry
names its source, which Chapter 19 cites).

* :func:`weight_bytes` -- bytes of packed ``bits``-bit codes plus one scale per group.
* :func:`decode_ceiling` -- the tokens/s bound from bandwidth and bytes per token.
* :func:`energy_per_token` -- joules per token from energy per byte moved and per operation.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = [
    "Device",
    "DEVICES",
    "weight_bytes",
    "decode_ceiling",
    "energy_per_token",
    "HOROWITZ_45NM_PJ",
]


@dataclass(frozen=True)
class Device:
    """A device's memory system as its maker publishes it.

    Attributes:
        name: the product. kind: "phone", "laptop" or "edge board".
        transfers_per_s: memory transfers per second (MT/s times 1e6).
        bus_bits: width of the memory bus in bits.
        memory_gb: memory capacity in GB (1e9 bytes).
        source: bibliography key of the specification.
        bandwidth: published peak bandwidth in bytes/s, when the maker states it directly.
    """

    name: str
    kind: str
    transfers_per_s: float
    bus_bits: int
    memory_gb: float
    source: str
    bandwidth_stated: float | None = None

    @property
    def bandwidth(self) -> float:
        """Peak memory bandwidth in bytes/s: transfers/s x bus bytes (or the maker's figure)."""
        if self.bandwidth_stated is not None:
            return self.bandwidth_stated
        return self.transfers_per_s * self.bus_bits / 8


DEVICES = [
    # LPDDR4X-4267 on a 32-bit bus (Raspberry Pi 5 product brief)
    Device("Raspberry Pi 5 (8 GB)", "edge board", 4267e6, 32, 8, "rpi5brief"),
    # 128-bit LPDDR5, 68 GB/s (Jetson Orin Nano 8GB data sheet)
    Device("Jetson Orin Nano 8GB", "edge board", 4266e6, 128, 8, "jetsonorin", 68e9),
    # LPDDR5X up to 4800 MHz (9600 MT/s), four 16-bit channels (Snapdragon 8 Gen 3 brief)
    Device("Snapdragon 8 Gen 3 phone", "phone", 9600e6, 64, 12, "snapdragon8gen3"),
    # 100 GB/s unified memory (Apple M2 announcement)
    Device("MacBook Air, Apple M2", "laptop", 6400e6, 128, 16, "applem2", 100e9),
    # up to 400 GB/s (Apple M3 Max announcement)
    Device("MacBook Pro, Apple M3 Max", "laptop", 6400e6, 512, 64, "applem3", 400e9),
]
"""Five devices, slowest memory first. Capacities are common configurations of each product."""

HOROWITZ_45NM_PJ = {
    "dram_read_32bit": 640.0,
    "fp32_mult": 3.7,
    "fp32_add": 0.9,
    "int8_mult": 0.2,
    "int8_add": 0.03,
}
"""Energy in picojoules in a 45 nm process (Horowitz 2014, as tabulated by Han et al. 2016)."""


def weight_bytes(
    n_params: int, bits: int, group_size: int | None = None, scale_bytes: int = 2
) -> int:
    """Bytes to store ``n_params`` weights at ``bits`` bits each, plus one scale per group.

    Codes are packed (``ceil(n_params * bits / 8)`` bytes); with ``group_size`` every group of that
    many consecutive weights, the last one possibly partial, stores a ``scale_bytes`` scale.
    """
    if n_params < 0 or bits < 1:
        raise ValueError(f"weight_bytes: need n_params >= 0 and bits >= 1, got {n_params}, {bits}")
    if group_size is not None and group_size < 1:
        raise ValueError(f"weight_bytes: group_size must be >= 1 or None, got {group_size}")
    codes = math.ceil(n_params * bits / 8)
    scales = math.ceil(n_params / group_size) * scale_bytes if group_size else 0
    return codes + scales


def decode_ceiling(bandwidth: float, bytes_per_token: float) -> float:
    """Upper bound on decode speed in tokens/s: ``bandwidth`` (B/s) / ``bytes_per_token`` (B).

    ``bytes_per_token`` is everything a decode step must read: the weights plus the KV cache of
    the context so far. Real kernels reach a fraction of peak bandwidth, so this is a ceiling.
    """
    if bandwidth <= 0 or bytes_per_token <= 0:
        raise ValueError(
            f"decode_ceiling: bandwidth and bytes_per_token must be > 0, "
            f"got {bandwidth} and {bytes_per_token}"
        )
    return bandwidth / bytes_per_token


def energy_per_token(
    bytes_read: float, macs: float, pj_per_byte: float, pj_per_mac: float
) -> dict[str, float]:
    """Joules per token: ``{"memory": ..., "compute": ..., "total": ...}``.

    Args:
        bytes_read: bytes fetched from DRAM per token (weights + KV cache).
        macs: multiply-accumulates per token (about one per weight).
        pj_per_byte, pj_per_mac: energy of one DRAM byte and one multiply-add, in picojoules.
    """
    memory = bytes_read * pj_per_byte * 1e-12
    compute = macs * pj_per_mac * 1e-12
    return {"memory": memory, "compute": compute, "total": memory + compute}
