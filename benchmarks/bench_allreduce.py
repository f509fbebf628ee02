"""Emulated all-reduce (labs.dist on threads) vs gloo all-reduce vs a memory-bandwidth floor.

Run:  python benchmarks/bench_allreduce.py [--quick]

For world sizes 2 and 4 and float32 buffers from 1 KB to 64 MB it measures, in one run:

* ``emu``   -- seconds per ``labs.dist.all_reduce`` call on emulated ranks (threads);
* ``gloo``  -- seconds per ``torch.distributed.all_reduce`` with the gloo backend, one process
  per rank on this machine (the rendezvous and the processes are started once per world size);
* ``floor`` -- seconds numpy needs to sum the same ``p`` buffers into one (``np.add`` with
  ``out=``): reading ``p`` buffers and writing one is the least any all-reduce must do.

It prints the per-call overhead of a tiny all-reduce (best and median of 27 repeats in 3
launches), then the ratios emu/floor and gloo/emu per size, then the scheduling choices of
``labs.dist`` measured side by side (alternating launches, median of 5; see
``labs/dist/_sched.py``): pinning the sleep of every waiting rank rather than only in large
collectives with short parts (``World.pin_all``, the policy of earlier versions), and
``LABS_DIST_PIN=0`` (no SCHED_BATCH, no pinned sleeps).  Last, the backend path
(``labs.dist.backend``, issue 31): a 16-byte and a 1 MB all-reduce issued as DDP's reducer and
comm hooks issue a bucket's (``torch.distributed.all_reduce(bucket, async_op=True)``, then
``get_future().wait()``), through torch's own function and the emulated process group, against
the direct ``labs.dist.all_reduce`` call, alternating in one launch.  Targets (issues 3 and 31):
tiny tensors at world size 4 cost at most 50 us per call; at 16 MB, emu within 1.5x of the
floor and below gloo.  Times depend on the machine and its load; only the ratios measured side by side mean
something.

Where a tiny call's time goes: every rank runs some Python (argument checks, the trace record),
the last rank to arrive sums the buffers, and each of the other p-1 ranks sleeps once and is
woken once -- an operating-system thread switch, and a hand-over of Python's GIL.  Only one rank
runs Python at a time, so these costs add up rather than overlap: p hand-overs per call, each a
few microseconds, plus p times the Python of one call.
"""

from __future__ import annotations

import argparse
import os
import socket
import time

import numpy as np
import torch
import torch.distributed as tdist
import torch.multiprocessing as mp

from labs import dist
from labs.dist._emulator import World

SIZES = [1 << 10, 16 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20]


def _iters(nbytes: int, quick: bool) -> int:
    budget = 1e8 if not quick else 3e7  # bytes reduced per measurement
    return int(max(2, min(300 if not quick else 100, budget // nbytes)))


REPEATS = 3  # every time is the best of 3 measurements: the machine may be shared


def emulated(p: int, nbytes: int, iters: int, repeats: int = REPEATS,
             per_rank_rng: bool = True) -> list[float]:  # fmt: skip
    """Seconds per ``labs.dist.all_reduce`` call on ``p`` emulated ranks, one per repeat."""

    def prog():
        x = torch.zeros(nbytes // 4)
        dist.all_reduce(x)  # warm-up
        times = []
        for _ in range(repeats):
            dist.barrier()
            t0 = time.perf_counter()
            for _ in range(iters):
                dist.all_reduce(x)
            times.append((time.perf_counter() - t0) / iters)
        return times

    per_rank = dist.launch(prog, p, timeout=600, per_rank_rng=per_rank_rng)
    return [max(ts[k] for ts in per_rank) for k in range(repeats)]  # the slowest rank counts


def floor(p: int, nbytes: int, iters: int) -> float:
    bufs = [np.zeros(nbytes // 4, dtype=np.float32) for _ in range(p)]
    out = np.empty_like(bufs[0])
    best = float("inf")
    for _ in range(REPEATS):
        t0 = time.perf_counter()
        for _ in range(iters):
            np.add(bufs[0], bufs[1], out=out)
            for b in bufs[2:]:
                np.add(out, b, out=out)
        best = min(best, (time.perf_counter() - t0) / iters)
    return best


def _gloo_worker(rank: int, p: int, port: int, sizes: list[int], quick: bool, q) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    tdist.init_process_group("gloo", rank=rank, world_size=p)
    out = {}
    for nbytes in sizes:
        iters = _iters(nbytes, quick)
        x = torch.zeros(nbytes // 4)
        tdist.all_reduce(x)
        best = float("inf")
        for _ in range(REPEATS):
            tdist.barrier()
            t0 = time.perf_counter()
            for _ in range(iters):
                tdist.all_reduce(x)
            best = min(best, time.perf_counter() - t0)
        out[nbytes] = best / iters
    q.put((rank, out))
    tdist.barrier()
    tdist.destroy_process_group()


def gloo(p: int, sizes: list[int], quick: bool) -> dict[int, float]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("spawn")
    q = ctx.SimpleQueue()
    procs = mp.start_processes(_gloo_worker, args=(p, port, sizes, quick, q), nprocs=p,
                               join=False, start_method="spawn")  # fmt: skip
    results = [q.get() for _ in range(p)]
    while not procs.join(timeout=600):  # join() returns False until every process has exited
        pass
    return {n: max(r[1][n] for r in results) for n in sizes}


def _fmt_bytes(n: int) -> str:
    return f"{n >> 20} MB" if n >= 1 << 20 else f"{n >> 10} KB"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer iterations, up to 16 MB")
    args = ap.parse_args()
    sizes = SIZES[:-1] if args.quick else SIZES
    print(f"cores: {os.cpu_count()}, load average: {os.getloadavg()[0]:.1f}")
    # first: the tiny calls are the most sensitive to what large buffers leave behind
    print("per-call overhead, 16-byte tensor (3 launches x 9 repeats x 500 calls; "
          "target <= 50 us at 4 ranks)")  # fmt: skip
    for p in (2, 4):
        cpu0 = time.process_time()
        ts = sorted(t for _ in range(3) for t in emulated(p, 16, 500, repeats=9))
        cpu = (time.process_time() - cpu0) / (3 * 9 * 500)
        print(f"  {p} ranks: best {ts[0] * 1e6:.1f} us, median {ts[len(ts) // 2] * 1e6:.1f} us "
              f"wall clock; {cpu * 1e6:.1f} us of CPU time over all threads")  # fmt: skip
    for p in (2, 4):
        g = gloo(p, sizes, args.quick)
        print(f"\nworld size {p}")
        print(f"{'size':>6} {'emu us':>10} {'floor us':>10} {'gloo us':>10} "
              f"{'emu/floor':>10} {'gloo/emu':>9}")  # fmt: skip
        for n in sizes:
            it = _iters(n, args.quick)
            e, f = min(emulated(p, n, it)), floor(p, n, it)
            print(f"{_fmt_bytes(n):>6} {e * 1e6:10.1f} {f * 1e6:10.1f} {g[n] * 1e6:10.1f} "
                  f"{e / f:10.2f} {g[n] / e:9.2f}")  # fmt: skip
    print("\nbackend path: a DDP bucket all-reduce through torch.distributed and the emulated "
          "process group vs the direct labs.dist call (median of 5, alternating)")  # fmt: skip
    for p, nbytes, iters in ((2, 16, 300), (4, 16, 300), (4, 1 << 20, 30)):
        d, b = backend_overhead(p, nbytes, iters)
        label = f"{nbytes} B" if nbytes < 1024 else _fmt_bytes(nbytes)
        print(f"  {p} ranks, {label:>6}: direct {d * 1e6:8.1f} us, through the backend "
              f"{b * 1e6:8.1f} us ({b / d:.2f}x, +{(b - d) * 1e6:.1f} us per call)")  # fmt: skip
    rng_switch_cost()
    print("\nscheduling choices, side by side (time of the variant / time of the default)")
    cases = [(4, 16, 500), (4, 1 << 20, 40), (2, 16 << 20, 4), (4, 16 << 20, 4)]
    for p, nbytes, iters in cases if not args.quick else cases[:2]:
        t = side_by_side(p, nbytes, iters)
        label = f"{nbytes} B" if nbytes < 1024 else _fmt_bytes(nbytes)
        print(f"  {p} ranks, {label:>6}: default {t['default'] * 1e6:9.1f} us;  pin every wait "
              f"{t['pin every wait'] / t['default']:.2f}x;  LABS_DIST_PIN=0 "
              f"{t['LABS_DIST_PIN=0'] / t['default']:.2f}x")  # fmt: skip


def backend_overhead(p: int, nbytes: int, iters: int, rounds: int = 5) -> tuple[float, float]:
    """Seconds per all-reduce call: direct ``labs.dist.all_reduce`` vs a DDP-style bucket
    all-reduce through ``torch.distributed`` and the emulated backend (median of ``rounds``
    alternating measurements in one launch; the slowest rank counts)."""

    def prog():
        dist.init_process_group("gloo")  # on an emulated rank: the emulated backend
        x = torch.zeros(nbytes // 4)

        def direct():
            dist.all_reduce(x)

        def bucket():
            tdist.all_reduce(x, async_op=True).get_future().wait()

        out: dict[str, list[float]] = {"direct": [], "bucket": []}
        for k in range(rounds):
            for name, f in (("direct", direct), ("bucket", bucket))[:: 1 if k % 2 == 0 else -1]:
                f()  # warm-up
                dist.barrier()
                t0 = time.perf_counter()
                for _ in range(iters):
                    f()
                out[name].append((time.perf_counter() - t0) / iters)
        dist.destroy_process_group()
        return out

    per_rank = dist.launch(prog, p, timeout=600)
    med = {n: sorted(max(r[n][k] for r in per_rank) for k in range(rounds))[rounds // 2]
           for n in ("direct", "bucket")}  # fmt: skip
    return med["direct"], med["bucket"]


def rng_switch_cost(p: int = 4, iters: int = 500, rounds: int = 5) -> None:
    """Per-rank random state (``launch``'s default) vs shared (``per_rank_rng=False``), side by
    side.

    With per-rank state one rank at a time runs user code and hands a baton on when it waits;
    each of the ``p - 1`` ranks that wait in a tiny all-reduce hands it on once and takes it
    back once, saving and restoring torch's generator state (one switch = one hand-over).
    """
    g = torch.default_generator
    state = g.get_state()
    n = 20000
    t0 = time.perf_counter()
    for _ in range(n):
        g.set_state(g.get_state())
    swap = (time.perf_counter() - t0) / n
    g.set_state(state)
    times: dict[bool, list[float]] = {False: [], True: []}
    cpu: dict[bool, list[float]] = {False: [], True: []}
    for k in range(rounds):
        for flag in (False, True) if k % 2 == 0 else (True, False):
            c0 = time.process_time()
            times[flag].append(min(emulated(p, 16, iters, repeats=3, per_rank_rng=flag)))
            cpu[flag].append((time.process_time() - c0) / (4 * iters))  # warm-up + 3 repeats
    shared, own = (sorted(times[f])[rounds // 2] for f in (False, True))
    cpu_shared, cpu_own = (sorted(cpu[f])[rounds // 2] for f in (False, True))
    print(f"\nper-rank random state, {p} ranks, 16-byte all-reduce (median of {rounds}):")
    print(f"  shared state {shared * 1e6:.1f} us per call; per-rank state {own * 1e6:.1f} us "
          f"per call ({own / shared:.2f}x); (own - shared) / {p - 1} switches = "
          f"{(own - shared) / (p - 1) * 1e6:.1f} us per switch; torch get_state + set_state "
          f"alone {swap * 1e6:.1f} us")  # fmt: skip
    print(f"  CPU time over all threads: {cpu_shared * 1e6:.1f} vs {cpu_own * 1e6:.1f} us per "
          f"call, {(cpu_own - cpu_shared) / (p - 1) * 1e6:.1f} us per switch")  # fmt: skip


def side_by_side(p: int, nbytes: int, iters: int, rounds: int = 5) -> dict[str, float]:
    """Seconds per all-reduce call under each scheduling variant: median over ``rounds``
    launches, the variants alternating so that a change in the machine's speed hits them all."""
    variants = {
        "default": (False, None),
        "pin every wait": (True, None),  # World.pin_all: the policy of earlier versions
        "LABS_DIST_PIN=0": (False, "0"),  # no SCHED_BATCH, no pinned sleeps
    }
    times: dict[str, list[float]] = {name: [] for name in variants}
    for k in range(rounds):
        order = list(variants) if k % 2 == 0 else list(variants)[::-1]
        for name in order:
            pin_all, pin = variants[name]
            World.pin_all = pin_all
            if pin is None:
                os.environ.pop("LABS_DIST_PIN", None)
            else:
                os.environ["LABS_DIST_PIN"] = pin
            try:
                times[name].append(min(emulated(p, nbytes, iters, repeats=3)))
            finally:
                World.pin_all = False
                os.environ.pop("LABS_DIST_PIN", None)
    return {name: sorted(ts)[len(ts) // 2] for name, ts in times.items()}


if __name__ == "__main__":
    main()
