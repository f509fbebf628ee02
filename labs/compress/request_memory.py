"""Peak memory of one generation request, measured from the allocator, split into its parts.

A device must hold, at the worst moment of a request, the weights, the KV cache of the request and
the activations of the step in flight. The process's resident set size (RSS) cannot tell these
apart: it also holds the Python interpreter and PyTorch's libraries, and the allocator keeps freed
pages. So we count allocations instead: the PyTorch profiler (``profile_memory=True``) reports
every allocation and free the CPU allocator makes, and replaying them in time order gives the
live bytes at every moment (the method of :func:`labs.systems.roofline.peak_memory_bytes`).

* :func:`memory_timeline` -- live bytes after each allocation event while ``fn()`` runs.
* :func:`request_memory` -- weights + KV cache + activations of a cached greedy generation.
* :func:`rss_bytes` -- the process's resident set size, for comparison.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import psutil
import torch
import torch.nn as nn

from labs.inference.int8 import weight_bytes
from labs.inference.kv_cache import KVCache, generate

__all__ = ["memory_timeline", "request_memory", "rss_bytes"]


@contextmanager
def _quiet_fd2() -> Iterator[None]:
    """Silence file descriptor 2 (the profiler's native log lines) for the duration."""
    sys.stderr.flush()
    saved, devnull = os.dup(2), os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(devnull)
        os.close(saved)


def memory_timeline(fn: Callable[[], object]) -> list[int]:
    """Bytes allocated by PyTorch on the CPU and still live, after each allocation or free
    while ``fn()`` runs, counted from zero at its start (a list; its max is the peak)."""
    from torch.profiler import ProfilerActivity, profile

    with _quiet_fd2():
        with profile(activities=[ProfilerActivity.CPU], profile_memory=True):
            pass  # the first start of the profiler in a process allocates its own state
        with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
            fn()
    events = sorted(
        (e.start_ns(), e.nbytes())
        for e in prof.profiler.kineto_results.events()
        if e.name() == "[memory]" and e.device_type() == torch.autograd.DeviceType.CPU
    )
    live, out = 0, []
    for _, nbytes in events:
        live += nbytes
        out.append(live)
    return out


def rss_bytes() -> int:
    """Resident set size of this process in bytes (everything it has in RAM)."""
    return psutil.Process().memory_info().rss


def request_memory(model: nn.Module, prompt: torch.Tensor, max_new_tokens: int) -> dict:
    """Measure one greedy, KV-cached generation of ``max_new_tokens`` after ``prompt`` (B, T).

    Returns a dict of bytes: ``weights`` (held before and after), ``kv_cache`` (the cache this
    request allocates, from its shape), ``peak_request`` (the most bytes live at once during the
    request, measured), ``activations`` (``peak_request - kv_cache``: the largest transient
    working set), ``peak_total`` (``weights + peak_request``), and ``timeline`` (the live bytes
    after each allocator event).
    """
    b, t = prompt.shape
    kv = KVCache.for_model(model, b, t + max_new_tokens).nbytes()
    timeline = memory_timeline(lambda: generate(model, prompt, max_new_tokens))
    peak = max(timeline) if timeline else 0
    weights = weight_bytes(model)
    return {
        "weights": weights,
        "kv_cache": kv,
        "peak_request": peak,
        "activations": peak - kv,
        "peak_total": weights + peak,
        "timeline": timeline,
    }
