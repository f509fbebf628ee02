"""Ring attention: how much of the K/V transfer the overlap hides, measured with gloo processes.

Run:  python benchmarks/bench_ring_attention.py [--quick]

``labs.parallel.ring_attention`` starts each forward step's send/recv of the next K/V shard
before it computes with the current one, and waits after (``overlap=True``, the default).  With
``overlap=False`` it waits for the transfer first.  For ``P`` processes on this machine (gloo
over loopback, one torch thread each) and several shard lengths this script measures, side by
side in one run (alternating, median of the rounds, the slowest rank counts):

* ``ring``    -- seconds per forward pass of ring attention with the overlap;
* ``serial``  -- the same with ``overlap=False``;
* ``comm``    -- the ``P - 1`` shifts of the K/V shards alone (no attention);

and prints ``serial / ring`` and the fraction of the communication the overlap hid,
``(serial - ring) / comm``.  Where the transfer is short next to the compute (long shards),
there is little to hide; on a machine with as many free cores as ranks, gloo's transfer threads
run beside the compute.  On a 2-core machine the ranks and gloo's threads share the cores, so
expect less than on a GPU cluster, where a copy engine and the network move the data while the
SMs compute.  Only the ratios measured side by side mean something.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import time

import torch
import torch.distributed as tdist
import torch.multiprocessing as mp

from labs.parallel import ring_attention as ra

H, D = 8, 64  # heads, head dimension


def _time_cases(rank: int, p: int, n: int, rounds: int) -> dict[str, float]:
    """Median seconds per call of each case for a shard of ``n`` tokens on this rank."""
    g = torch.Generator().manual_seed(rank)
    q, k, v = (torch.randn(1, H, n, D, generator=g) for _ in range(3))
    kv = torch.stack([k, v]).contiguous()

    def comm() -> None:
        cur = kv
        for _ in range(p - 1):
            nxt = torch.empty_like(cur)
            works = [tdist.isend(cur, (rank + 1) % p), tdist.irecv(nxt, (rank - 1) % p)]
            for w in works:
                w.wait()
            cur = nxt

    cases = {
        "ring": lambda: ra.ring_attention(q, k, v, overlap=True),
        "serial": lambda: ra.ring_attention(q, k, v, overlap=False),
        "comm": comm,
    }
    times: dict[str, list[float]] = {c: [] for c in cases}
    for f in cases.values():  # warm-up
        f()
    for r in range(rounds):
        for name in list(cases) if r % 2 == 0 else list(cases)[::-1]:
            tdist.barrier()
            t0 = time.perf_counter()
            cases[name]()
            times[name].append(time.perf_counter() - t0)
    return {c: statistics.median(t) for c, t in times.items()}


def _worker(rank: int, p: int, port: int, lengths: list[int], rounds: int, out_q) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    tdist.init_process_group("gloo", rank=rank, world_size=p)
    out = {n: _time_cases(rank, p, n, rounds) for n in lengths}
    out_q.put((rank, out))
    tdist.barrier()
    tdist.destroy_process_group()


def measure(p: int, lengths: list[int], rounds: int) -> dict[int, dict[str, float]]:
    """Per shard length, seconds per call of each case on the slowest of ``p`` processes."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    q = mp.get_context("spawn").SimpleQueue()
    procs = mp.start_processes(_worker, args=(p, port, lengths, rounds, q), nprocs=p,
                               join=False, start_method="spawn")  # fmt: skip
    results = [q.get()[1] for _ in range(p)]
    while not procs.join(timeout=600):
        pass
    return {n: {c: max(r[n][c] for r in results) for c in results[0][n]} for n in lengths}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer rounds and lengths")
    args = ap.parse_args()
    lengths = [128, 512] if args.quick else [64, 128, 256, 512, 1024]
    rounds = 5 if args.quick else 9
    print(f"cores: {os.cpu_count()}, load average: {os.getloadavg()[0]:.1f}; "
          f"heads {H}, head dim {D}, float32, non-causal forward")  # fmt: skip
    for p in (2, 4):
        res = measure(p, lengths, rounds)
        kv_bytes = {n: 2 * H * n * D * 4 for n in lengths}
        print(f"\n{p} processes (gloo):")
        print(f"{'shard':>6} {'K/V MB':>7} {'ring ms':>8} {'serial ms':>9} {'comm ms':>8} "
              f"{'serial/ring':>11} {'hidden':>7}")  # fmt: skip
        for n in lengths:
            t = res[n]
            hidden = (t["serial"] - t["ring"]) / t["comm"] if t["comm"] > 0 else float("nan")
            print(f"{n:>6} {kv_bytes[n] / 1e6:7.2f} {t['ring'] * 1e3:8.2f} "
                  f"{t['serial'] * 1e3:9.2f} {t['comm'] * 1e3:8.2f} "
                  f"{t['serial'] / t['ring']:11.2f} {hidden:7.0%}")  # fmt: skip


if __name__ == "__main__":
    main()
