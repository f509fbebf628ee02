"""Adaptive request batching with asyncio: gather requests until the batch is full or the oldest
has waited long enough, then process them together.

The queue in front of the model is bounded. When it is full, :meth:`AdaptiveBatcher.submit`
raises :class:`Overloaded` at once (the server answers 503) instead of letting the queue, and
every waiting client's latency, grow without limit.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

__all__ = ["should_flush", "Overloaded", "AdaptiveBatcher"]

T = TypeVar("T")


def should_flush(n_pending: int, oldest_wait_s: float, max_batch_size: int, max_wait_s: float):
    """The flush rule: run a batch when it is full, or when its oldest request has waited
    ``max_wait_s`` seconds. An empty batch is never run."""
    if n_pending <= 0:
        return False
    return n_pending >= max_batch_size or oldest_wait_s >= max_wait_s


class Overloaded(RuntimeError):
    """The batcher's queue is full; retry later."""


class AdaptiveBatcher(Generic[T]):
    """Collect items from many coroutines and hand them to ``process`` in batches.

    Args:
        process: ``await process(batch)`` handles a list of items (at most ``max_batch_size``);
            items carry their own way of returning results (a future, a queue).
        max_batch_size: the largest batch; 1 turns batching off.
        max_wait_s: how long the first item of a batch may wait for company, in seconds.
        max_queue: items allowed to wait; one more raises :class:`Overloaded`.
    """

    def __init__(
        self,
        process: Callable[[list[T]], Awaitable[None]],
        max_batch_size: int = 8,
        max_wait_s: float = 0.005,
        max_queue: int = 64,
        clock: Callable[[], float] = time.monotonic,
    ):
        if max_batch_size < 1 or max_queue < 1 or max_wait_s < 0:
            raise ValueError(
                "AdaptiveBatcher: need max_batch_size >= 1, max_queue >= 1, max_wait_s >= 0; "
                f"got {max_batch_size}, {max_queue}, {max_wait_s}"
            )
        self.process = process
        self.max_batch_size = max_batch_size
        self.max_wait_s = max_wait_s
        self.clock = clock
        self.queue: asyncio.Queue[tuple[float, T]] = asyncio.Queue(maxsize=max_queue)
        self.batch_sizes: list[int] = []
        self._task: asyncio.Task | None = None

    @property
    def depth(self) -> int:
        """Items waiting (not yet in a batch)."""
        return self.queue.qsize()

    def submit(self, item: T) -> None:
        """Enqueue ``item`` or raise :class:`Overloaded` when the queue is full."""
        if self._task is None:
            raise RuntimeError("AdaptiveBatcher.submit before start(); call await start() first")
        try:
            self.queue.put_nowait((self.clock(), item))
        except asyncio.QueueFull:
            raise Overloaded(f"queue full ({self.queue.maxsize} waiting)") from None

    async def start(self) -> None:
        self._task = asyncio.create_task(self._loop())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
            self._task = None

    async def _next_batch(self) -> list[T]:
        first_at, first = await self.queue.get()
        batch = [first]
        while True:
            # whatever is already waiting joins at once (up to the batch size)
            while len(batch) < self.max_batch_size and not self.queue.empty():
                batch.append(self.queue.get_nowait()[1])
            waited = self.clock() - first_at
            if should_flush(len(batch), waited, self.max_batch_size, self.max_wait_s):
                return batch
            try:
                _, item = await asyncio.wait_for(self.queue.get(), self.max_wait_s - waited)
            except TimeoutError:
                return batch
            batch.append(item)

    async def _loop(self) -> None:
        while True:
            batch = await self._next_batch()
            self.batch_sizes.append(len(batch))
            try:
                await self.process(batch)
            except Exception:  # one bad batch must not stop the server; process reports it
                logging.getLogger(__name__).exception("batch of %d failed", len(batch))
