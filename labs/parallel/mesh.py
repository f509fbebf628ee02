"""An N-dimensional grid of ranks (a device mesh) and its process groups.

Generalises :class:`labs.parallel.parallel3d.Layout` to any named dimensions, e.g.
``Mesh({"tp": 2, "cp": 2, "pp": 2, "dp": 2})`` for 16 ranks: the first dimension varies fastest
(tensor-parallel ranks adjacent, on the fastest links).  A group of dimension ``d`` holds the
ranks that differ only in their ``d`` coordinate; ``group_of(["dp", "cp"])`` joins several
dimensions (context-parallel ranks hold the same weights, so gradients are averaged over
``dp x cp``; expert parallelism is usually carved out of that same group).
``torch.distributed.device_mesh.DeviceMesh`` is PyTorch's version of this object.
"""

from __future__ import annotations

import math

from labs import dist

__all__ = ["Mesh"]


class Mesh:
    """Named dimensions, fastest-varying first: ``{"tp": 2, "dp": 4}``."""

    def __init__(self, dims: dict[str, int]):
        if not dims or any(not isinstance(n, int) or n < 1 for n in dims.values()):
            raise ValueError(f"Mesh: dims must map names to positive ints, got {dims!r}")
        self.dims = dict(dims)
        self.world_size = math.prod(self.dims.values())

    def coords(self, rank: int) -> dict[str, int]:
        """The coordinate of ``rank`` along every dimension."""
        if not 0 <= rank < self.world_size:
            raise ValueError(f"Mesh.coords: rank {rank} outside 0..{self.world_size - 1}")
        out = {}
        for name, n in self.dims.items():
            out[name], rank = rank % n, rank // n
        return out

    def groups(self, names: str | list[str]) -> list[list[int]]:
        """All groups spanning the dimension(s) ``names``: ranks equal in every other one."""
        names = [names] if isinstance(names, str) else list(names)
        unknown = [n for n in names if n not in self.dims]
        if unknown:
            raise ValueError(f"Mesh.groups: unknown dimension(s) {unknown}; have {list(self.dims)}")
        found: dict[tuple, list[int]] = {}
        for r in range(self.world_size):
            c = self.coords(r)
            key = tuple(v for k, v in c.items() if k not in names)
            found.setdefault(key, []).append(r)
        return list(found.values())

    def new_groups(self, kinds: list[str | list[str]]) -> dict[str, object]:
        """Inside a rank: create the groups of every kind (all ranks create all, in order) and
        return this rank's group per kind, keyed ``"dp"`` or ``"dp+cp"``."""
        me, mine = dist.get_rank(), {}
        for kind in kinds:
            key = kind if isinstance(kind, str) else "+".join(kind)
            for ranks in self.groups(kind):
                g = dist.new_group(ranks)
                if me in ranks:
                    mine[key] = g
        return mine
