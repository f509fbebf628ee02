"""Prometheus metrics of the service, and how to read quantiles back from ``/metrics``.

Each app gets its own :class:`prometheus_client.CollectorRegistry`, so two apps in one process
(tests) do not share counters. Latency is a histogram: Prometheus stores bucket counts, and a
quantile is estimated from them by linear interpolation inside the bucket that holds it (the
rule of PromQL's ``histogram_quantile``), implemented in :func:`histogram_quantile`.
"""

from __future__ import annotations

import math

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.parser import text_string_to_metric_families

__all__ = ["ServiceMetrics", "parse_metrics", "histogram_quantile", "LATENCY_BUCKETS"]

LATENCY_BUCKETS = (0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0, 10.0)


class ServiceMetrics:
    """The service's counters, gauges and histograms in a private registry."""

    def __init__(self) -> None:
        r = self.registry = CollectorRegistry()
        self.requests = Counter(
            "llm_requests",
            "HTTP requests by endpoint and status (every status, also 401, 413, 429, 503)",
            ["endpoint", "status"],
            registry=r,
        )
        self.latency = Histogram(
            "llm_request_latency_seconds",
            "Time from request arrival to the last token (completed generations)",
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.ttft = Histogram(
            "llm_time_to_first_token_seconds",
            "Time from request arrival to the first token",
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.queue_depth = Gauge(
            "llm_queue_depth", "Requests waiting to join the batch", registry=r
        )
        self.active = Gauge("llm_active_generations", "Requests in the running batch", registry=r)
        self.kv_usage = Gauge(
            "llm_kv_cache_usage_perc",
            "Fraction of the KV cache's blocks in use, 0 to 1 (vLLM's vllm:kv_cache_usage_perc)",
            registry=r,
        )
        self.tokens = Counter("llm_generated_tokens", "Tokens generated", registry=r)
        self.finished = Counter(
            "llm_generations",
            "Finished generations by finish reason (stop, length, cancelled, error)",
            ["reason"],
            registry=r,
        )
        self.cancelled = Counter(
            "llm_cancelled_requests", "Generations stopped because the client left", registry=r
        )
        self.batch_size = Histogram(
            "llm_batch_size",
            "Requests per decode step of the engine",
            buckets=(1, 2, 4, 8, 16, 32, 64),
            registry=r,
        )
        self.steps = Gauge("llm_engine_steps", "Engine steps run since start", registry=r)

    def render(self) -> bytes:
        """The text exposition format served at ``/metrics``."""
        return generate_latest(self.registry)


def parse_metrics(text: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    """``/metrics`` text -> {sample name: [(labels, value), ...]} (``_bucket``, ``_sum``, ...)."""
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out.setdefault(s.name, []).append((dict(s.labels), float(s.value)))
    return out


def histogram_quantile(q: float, buckets: list[tuple[float, float]]) -> float:
    """Estimate the ``q`` quantile from cumulative buckets ``[(upper_bound, count), ...]``.

    As PromQL does: find the bucket where the cumulative count reaches ``q * total`` and
    interpolate linearly between its lower and upper bound. Returns NaN without observations;
    returns the largest finite bound when the quantile falls in the ``+Inf`` bucket.
    """
    if not 0 <= q <= 1:
        raise ValueError(f"histogram_quantile: q must be in [0, 1], got {q}")
    buckets = sorted(buckets)
    total = buckets[-1][1] if buckets else 0.0
    if total == 0:
        return math.nan
    rank = q * total
    lower, below = 0.0, 0.0
    for upper, count in buckets:
        if count >= rank:
            if math.isinf(upper):
                return lower
            if count == below:
                return upper
            return lower + (upper - lower) * (rank - below) / (count - below)
        lower, below = upper, count
    return lower


def latency_buckets(parsed: dict, name: str = "llm_request_latency_seconds"):
    """The ``[(le, count)]`` buckets of histogram ``name`` from :func:`parse_metrics` output."""
    return [(float(labels["le"]), v) for labels, v in parsed.get(name + "_bucket", [])]
