"""Per-rank environment variables for scripts on emulated ranks (``python -m labs.dist.run``).

``torchrun`` starts one process per rank and tells each who it is through its environment:
``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE``, ``LOCAL_WORLD_SIZE``, ``MASTER_ADDR``, ... Scripts read
them (``local_rank = int(os.environ["LOCAL_RANK"])``).  Emulated ranks are threads of one
process, which has one ``os.environ``; so while a script runs, ``os.environ`` is replaced by a
:class:`RankEnviron` that gives each rank thread its own copy, with torchrun's variables set,
exactly as separate processes would have: what one rank sets, the others do not see.  Threads
that are not ranks see the real environment.

Limits: code that imported the mapping itself (``from os import environ``) before the run sees
the real one; a variable a rank sets reaches neither ``os.putenv`` nor the subprocesses it starts.
"""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Iterator, MutableMapping

from . import _emulator as _emu

__all__ = ["torchrun_variables", "RankEnviron", "rank_environ"]


def torchrun_variables(rank: int, world_size: int, port: int = 29500) -> dict[str, str]:
    """The variables ``torchrun --standalone --nproc_per_node world_size`` gives ``rank``
    (``MASTER_PORT``: ``port``; torchrun's ``--standalone`` picks a free one)."""
    return {
        "RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": str(world_size),
        "LOCAL_WORLD_SIZE": str(world_size), "GROUP_RANK": "0", "GROUP_WORLD_SIZE": "1",
        "ROLE_NAME": "default", "ROLE_RANK": str(rank), "ROLE_WORLD_SIZE": str(world_size),
        "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
        "TORCHELASTIC_RESTART_COUNT": "0", "TORCHELASTIC_MAX_RESTARTS": "0",
    }  # fmt: skip


class RankEnviron(MutableMapping):
    """``os.environ`` for emulated ranks: each rank thread reads and writes its own copy."""

    def __init__(self, real: MutableMapping, per_rank: list[dict[str, str]]):
        self.real = real
        self.per_rank = per_rank

    def _mine(self) -> MutableMapping:
        ctx = _emu.current()
        return self.real if ctx is None else self.per_rank[ctx.rank]

    def __getitem__(self, key: str) -> str:
        return self._mine()[key]

    def __setitem__(self, key: str, value: str) -> None:
        if not isinstance(key, str) or not isinstance(value, str):
            raise TypeError(
                f"str expected, not {type(value if isinstance(key, str) else key).__name__}"
            )
        self._mine()[key] = value

    def __delitem__(self, key: str) -> None:
        del self._mine()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._mine()))

    def __len__(self) -> int:
        return len(self._mine())

    def copy(self) -> dict[str, str]:
        return dict(self._mine())

    def __repr__(self) -> str:
        return f"RankEnviron({dict(self._mine())!r})"


@contextlib.contextmanager
def rank_environ(world_size: int) -> Iterator[RankEnviron]:
    """Replace ``os.environ`` by a :class:`RankEnviron` holding, for every rank, a copy of the
    current environment plus :func:`torchrun_variables`; restore the real one afterwards."""
    real = os.environ
    base = dict(real)
    with socket.socket() as s:  # a free port, as --standalone picks (a program's TCPStore)
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = RankEnviron(real, [{**base, **torchrun_variables(r, world_size, port)}
                             for r in range(world_size)])  # fmt: skip
    os.environ = env  # noqa: B003 - meant: os.getenv reads the same module attribute
    try:
        yield env
    finally:
        os.environ = real  # noqa: B003
