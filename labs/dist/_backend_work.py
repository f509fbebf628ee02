"""The work handles of :mod:`labs.dist.backend`, and the gloo group that stands in for the
emulated groups' gloo backend where torch's C++ asks for one."""

from __future__ import annotations

from typing import Any

import torch
from torch._C import _distributed_c10d as c10d

from . import _profiler

__all__ = ["_EmulatedWork", "gloo_stand_in"]


# -- work handles -------------------------------------------------------------------------------
class _EmulatedWork(c10d.Work):
    """A ``torch.distributed.Work`` over the emulator's waits: ``wait()`` completes the operation
    (blocking through the emulator), ``get_future()`` waits and returns a done future."""

    def __init__(self, works: list[Any], result: list[torch.Tensor], source: int = -1,
                 after: Any = None, event: Any = None):  # fmt: skip
        super().__init__()
        self._works, self._result, self._done, self._source = works, result, False, source
        self._after = after  # run once the works completed (copy results into place)
        self._event = event  # a profiler event to end then (labs.dist._profiler.record)

    def wait(self, timeout: Any = None) -> bool:
        if not self._done:
            for w in self._works:
                if w is not None:
                    w.wait()
            if self._after is not None:
                self._after()
            self._done = True
            _profiler.finish(self._event)
        return True

    def get_future(self) -> torch.futures.Future:
        self.wait()
        fut: torch.futures.Future = torch.futures.Future()
        fut.set_result(self._result)
        return fut

    def is_completed(self) -> bool:
        return self._done

    def is_success(self) -> bool:
        return self._done

    def result(self) -> list[torch.Tensor]:
        self.wait()
        return self._result

    def _source_rank(self) -> int:
        """The sender's group rank, for a receive from any source."""
        return self._source


_stand_in: list[Any] = []


def gloo_stand_in() -> Any:
    """A gloo process group of one rank (on 127.0.0.1), made once per process."""
    if not _stand_in:
        opts = c10d.ProcessGroupGloo._Options()
        opts._devices = [c10d.ProcessGroupGloo.create_device(hostname="127.0.0.1")]
        opts._threads = 2  # gloo's default, which DDP logs
        _stand_in.append(c10d.ProcessGroupGloo(c10d.HashStore(), 0, 1, opts))
    return _stand_in[0]
