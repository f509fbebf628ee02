"""Four rate limiters, written from scratch on an injectable clock.

Each limiter answers ``allow(cost=1) -> (allowed, retry_after_s)``: whether a request may pass
now and, if not, how many seconds until it would. Time comes from ``clock()`` (seconds, any
origin), so a test or a simulation can drive it by hand; the server passes ``time.monotonic``.

* :class:`TokenBucket`: ``capacity`` tokens, refilled at ``rate`` tokens/s; bursts up to capacity.
* :class:`LeakyBucket` (as a meter): a bucket of ``capacity`` drains at ``rate``/s; a request
  adds ``cost`` if it fits. Admits the same long-run rate; smooths rather than stores bursts.
* :class:`FixedWindow`: at most ``limit`` requests per aligned window of ``window`` seconds; up to
  2 x limit can pass around a window boundary.
* :class:`SlidingWindowLog`: at most ``limit`` requests in any ``window`` seconds (exact; keeps a
  timestamp per admitted request).
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable, Iterable

__all__ = [
    "TokenBucket",
    "LeakyBucket",
    "FixedWindow",
    "SlidingWindowLog",
    "KeyedLimiter",
    "make_limiter",
    "SharedLimit",
    "simulate",
]

Clock = Callable[[], float]


def _positive(name: str, value: float) -> float:
    if not value > 0:
        raise ValueError(f"{name} must be positive, got {value!r}")
    return float(value)


class TokenBucket:
    """``capacity`` tokens, ``rate`` tokens added per second, a request spends ``cost``."""

    def __init__(self, rate: float, capacity: float, clock: Clock = time.monotonic):
        self.rate = _positive("rate (tokens per second)", rate)
        self.capacity = _positive("capacity (tokens)", capacity)
        self.clock = clock
        self.tokens = self.capacity
        self.last = clock()

    def allow(self, cost: float = 1.0) -> tuple[bool, float]:
        now = self.clock()
        self.tokens = min(self.capacity, self.tokens + (now - self.last) * self.rate)
        self.last = now
        if self.tokens >= cost:
            self.tokens -= cost
            return True, 0.0
        return False, (cost - self.tokens) / self.rate


class LeakyBucket:
    """A bucket of ``capacity`` that leaks ``rate`` per second; a request pours in ``cost``."""

    def __init__(self, rate: float, capacity: float, clock: Clock = time.monotonic):
        self.rate = _positive("rate (per second)", rate)
        self.capacity = _positive("capacity", capacity)
        self.clock = clock
        self.level = 0.0
        self.last = clock()

    def allow(self, cost: float = 1.0) -> tuple[bool, float]:
        now = self.clock()
        self.level = max(0.0, self.level - (now - self.last) * self.rate)
        self.last = now
        if self.level + cost <= self.capacity:
            self.level += cost
            return True, 0.0
        return False, (self.level + cost - self.capacity) / self.rate


class FixedWindow:
    """At most ``limit`` requests in each window ``[k * window, (k + 1) * window)``."""

    def __init__(self, limit: int, window: float, clock: Clock = time.monotonic):
        self.limit = int(_positive("limit (requests per window)", limit))
        self.window = _positive("window (seconds)", window)
        self.clock = clock
        self.index = None
        self.count = 0

    def allow(self, cost: float = 1.0) -> tuple[bool, float]:
        now = self.clock()
        index = math.floor(now / self.window)
        if index != self.index:
            self.index, self.count = index, 0
        if self.count + cost <= self.limit:
            self.count += cost
            return True, 0.0
        return False, (index + 1) * self.window - now


class SlidingWindowLog:
    """At most ``limit`` requests in any half-open interval ``(now - window, now]``."""

    def __init__(self, limit: int, window: float, clock: Clock = time.monotonic):
        self.limit = int(_positive("limit (requests per window)", limit))
        self.window = _positive("window (seconds)", window)
        self.clock = clock
        self.log: deque[float] = deque()

    def allow(self, cost: float = 1.0) -> tuple[bool, float]:
        now = self.clock()
        while self.log and self.log[0] <= now - self.window:
            self.log.popleft()
        if len(self.log) + cost <= self.limit:
            self.log.extend([now] * int(cost))
            return True, 0.0
        return False, self.log[0] + self.window - now


def make_limiter(kind: str, rate: float, burst: float, clock: Clock = time.monotonic):
    """One limiter admitting ``rate`` requests/s on average with bursts of ``burst``.

    The windows are ``burst / rate`` seconds long, so all four kinds allow the same long-run rate.
    """
    kinds = {
        "token_bucket": lambda: TokenBucket(rate, burst, clock),
        "leaky_bucket": lambda: LeakyBucket(rate, burst, clock),
        "fixed_window": lambda: FixedWindow(int(burst), burst / rate, clock),
        "sliding_window": lambda: SlidingWindowLog(int(burst), burst / rate, clock),
    }
    if kind not in kinds:
        raise ValueError(f"make_limiter: kind must be one of {sorted(kinds)}, got {kind!r}")
    return kinds[kind]()


class KeyedLimiter:
    """One limiter per key (an API key, a client address), created on first use."""

    def __init__(self, factory: Callable[[], object]):
        self.factory = factory
        self.limiters: dict[str, object] = {}

    def allow(self, key: str, cost: float = 1.0) -> tuple[bool, float]:
        if key not in self.limiters:
            self.limiters[key] = self.factory()
        return self.limiters[key].allow(cost)


def simulate(kind: str, arrivals: Iterable[float], rate: float, burst: float) -> list[bool]:
    """Replay request arrival times (seconds, non-decreasing) through a fresh limiter.

    Returns one ``allowed`` flag per arrival; deterministic, no real time passes.
    """
    now = [0.0]
    limiter = make_limiter(kind, rate, burst, clock=lambda: now[0])
    out = []
    for t in arrivals:
        if t < now[0]:
            raise ValueError(f"simulate: arrival times must not decrease ({t} after {now[0]})")
        now[0] = t
        out.append(limiter.allow()[0])
    return out


class SharedLimit:
    """A limit such as ``"5/second"`` kept in shared storage (``redis://host:port``), so that
    every replica pointing at the same storage enforces it together (the ``limits`` package,
    which ``slowapi`` wraps; a moving window).

    When the storage cannot be reached, ``fail_open=True`` admits the request and
    ``fail_open=False`` refuses it; :meth:`allow` returns ``(None, 0)`` then, so that the
    server can answer 503 rather than 429. :meth:`healthy` pings the storage. Both raise
    ``ValueError`` at construction for a malformed limit or URI.
    """

    def __init__(self, rate_limit: str, storage_uri: str, fail_open: bool = False,
                 timeout_s: float = 0.5):  # fmt: skip
        from limits import parse, storage, strategies

        try:
            self.item = parse(rate_limit)
        except ValueError:
            raise ValueError(f"shared limit {rate_limit!r}: expected e.g. '5/second', "
                             "'100/minute'") from None  # fmt: skip
        try:
            opts = {"socket_timeout": timeout_s, "socket_connect_timeout": timeout_s}
            self.storage = storage.storage_from_string(storage_uri, **opts)
        except Exception as err:
            raise ValueError(f"storage URI {storage_uri!r}: {err}") from None
        self.strategy = strategies.MovingWindowRateLimiter(self.storage)
        self.fail_open = fail_open

    def allow(self, key: str) -> tuple[bool | None, float]:
        """(True, 0), (False, seconds to wait), or (None, 0) when the storage is unreachable
        and the policy is fail-closed."""
        try:
            if self.strategy.hit(self.item, "llm", key):
                return True, 0.0
            reset = self.strategy.get_window_stats(self.item, "llm", key).reset_time
        except Exception:
            return (True, 0.0) if self.fail_open else (None, 0.0)
        return False, max(0.0, reset - time.time())

    def healthy(self) -> bool:
        try:
            return bool(self.storage.check())
        except Exception:
            return False
