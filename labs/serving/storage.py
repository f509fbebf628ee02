"""Checkpoint formats for serving: pickle (``torch.save``) vs safetensors, eager vs lazy loads,
and sharding.

A pickle checkpoint is a program: loading it runs code from the file (hence ``weights_only``),
and reads every byte. A safetensors file is a JSON header of names, dtypes, shapes and byte
offsets followed by raw tensor bytes: safe to open, and a loader can map it into memory and read
only the tensors it needs. Memory is measured as the resident set size of this process (Linux).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import save_file

__all__ = ["rss_bytes", "make_state_dict", "save_sharded", "load_sharded", "header_of"]


def rss_bytes() -> int:
    """Resident memory of this process in bytes (from /proc; -1 where there is no /proc)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        return -1


def make_state_dict(total_mib: int, n_tensors: int = 16, seed: int = 0) -> dict:
    """``n_tensors`` float32 tensors named ``layers.{i}.weight`` of ``total_mib`` MiB in all."""
    gen = torch.Generator().manual_seed(seed)
    per = total_mib * 2**20 // 4 // n_tensors
    side = int(per**0.5)
    return {
        f"layers.{i}.weight": torch.randn(side, per // side, generator=gen)
        for i in range(n_tensors)
    }


def header_of(path: str | Path) -> dict:
    """The JSON header of a safetensors file (8-byte little-endian length, then the JSON)."""
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        return json.loads(f.read(n))


def save_sharded(state: dict, folder: str | Path, max_shard_bytes: int) -> dict:
    """Write ``state`` as safetensors shards of at most ``max_shard_bytes`` each (a single tensor
    larger than that gets a shard of its own) plus ``model.safetensors.index.json`` mapping each
    tensor to its shard, the layout Hugging Face uses. Returns the index."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    shards: list[dict] = [{}]
    size = 0
    for name, t in state.items():
        nbytes = t.numel() * t.element_size()
        if shards[-1] and size + nbytes > max_shard_bytes:
            shards.append({})
            size = 0
        shards[-1][name] = t
        size += nbytes
    weight_map = {}
    for i, shard in enumerate(shards):
        fname = f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors"
        save_file(shard, str(folder / fname))
        weight_map.update(dict.fromkeys(shard, fname))
    index = {
        "metadata": {"total_size": sum(t.numel() * t.element_size() for t in state.values())},
        "weight_map": weight_map,
    }
    (folder / "model.safetensors.index.json").write_text(json.dumps(index))
    return index


def load_sharded(folder: str | Path, names: list[str] | None = None) -> dict:
    """Load ``names`` (default: all) from a sharded checkpoint, opening only the shards needed."""
    folder = Path(folder)
    index = json.loads((folder / "model.safetensors.index.json").read_text())
    wanted = names if names is not None else list(index["weight_map"])
    missing = [n for n in wanted if n not in index["weight_map"]]
    if missing:
        raise KeyError(f"load_sharded: {missing[:3]} not in the checkpoint's index")
    out = {}
    by_file: dict[str, list[str]] = {}
    for n in wanted:
        by_file.setdefault(index["weight_map"][n], []).append(n)
    for fname, ns in by_file.items():
        with safe_open(str(folder / fname), framework="pt") as f:
            for n in ns:
                out[n] = f.get_tensor(n)
    return out
