"""The same program under the thread emulator and under torchrun (gloo) gives the same results.

The test runs this file as a script with ``python -m torch.distributed.run``; in that mode the
``__main__`` block calls :func:`labs.dist.launch`, which initialises ``torch.distributed`` and
runs :func:`program` for the process's rank, and each rank saves its results to a ``.npz``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import procgroup
import pytest
import torch

from conftest import free_port
from labs import dist

HERE = Path(__file__).resolve()
WORLD = 2


def program() -> dict[str, np.ndarray]:
    """Exercise every labs.dist operation; return this rank's results as numpy arrays."""
    r, n = dist.get_rank(), dist.get_world_size()
    gen = torch.Generator().manual_seed(100 + r)
    out: dict[str, np.ndarray] = {}
    x = torch.randn(5, generator=gen)
    for op in ("SUM", "PRODUCT", "MIN", "MAX", "AVG"):
        y = x.clone()
        dist.all_reduce(y, op=getattr(dist.ReduceOp, op))
        out[f"all_reduce_{op}"] = y.numpy()
    a = np.arange(6, dtype=np.int64) * (r + 1)  # numpy, in place
    dist.all_reduce(a)
    out["all_reduce_numpy"] = a.copy()
    b = torch.full((3,), float(r))
    dist.broadcast(b, src=n - 1)
    out["broadcast"] = b.numpy()
    c = torch.full((2,), float(r + 1))
    dist.reduce(c, dst=0, op=dist.ReduceOp.SUM)
    out["reduce"] = c.numpy() if r == 0 else np.zeros(0)
    lst = [torch.empty(2, 2) for _ in range(n)]
    dist.all_gather(lst, torch.full((2, 2), float(r)))
    out["all_gather"] = torch.stack(lst).numpy()
    big = torch.empty(n * 3)
    dist.all_gather_into_tensor(big, torch.arange(3, dtype=torch.float32) + 10 * r)
    out["all_gather_into_tensor"] = big.numpy()
    gl = [torch.empty(4) for _ in range(n)] if r == 0 else None
    dist.gather(torch.full((4,), float(r)), gl, dst=0)
    out["gather"] = torch.stack(gl).numpy() if r == 0 else np.zeros(0)
    sc = torch.empty(3)
    dist.scatter(sc, [torch.full((3,), 7.0 * i) for i in range(n)] if r == 1 else None, src=1)
    out["scatter"] = sc.numpy()
    rs = torch.empty(2)
    dist.reduce_scatter(rs, [torch.full((2,), float(r + 10 * j)) for j in range(n)])
    out["reduce_scatter"] = rs.numpy()
    rst = torch.empty(2)
    dist.reduce_scatter_tensor(rst, torch.arange(2 * n, dtype=torch.float32) * (r + 1))
    out["reduce_scatter_tensor"] = rst.numpy()
    outs = [torch.empty(2) for _ in range(n)]
    dist.all_to_all(outs, [torch.full((2,), float(10 * r + j)) for j in range(n)])
    out["all_to_all"] = torch.stack(outs).numpy()
    p = torch.full((3,), float(r))
    if r == 0:
        dist.send(p + 100, dst=1)
        q = torch.empty(3)
        dist.recv(q, src=1)
    else:
        q = torch.empty(3)
        dist.recv(q, src=0)
        dist.send(q + 1, dst=0)
    out["send_recv"] = q.numpy()
    w1 = dist.isend(torch.full((2,), float(r)), dst=1 - r)
    z = np.zeros(2, dtype=np.float32)
    w2 = dist.irecv(z, src=1 - r)
    w1.wait()
    w2.wait()
    out["isend_irecv"] = z
    g = dist.new_group([0, 1])
    s = torch.ones(2) * (r + 1)
    dist.all_reduce(s, group=g, async_op=True).wait()
    out["group_async"] = s.numpy()
    dist.barrier()
    out["rank_size"] = np.array([dist.get_rank(), dist.get_world_size(), dist.get_rank(g)])
    return out


def _torchrun(tmp: Path, extra: list[str], env_extra: dict | None = None, timeout: float = 120):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "DIST_TEST_OUT": str(tmp)}
    env.update(env_extra or {})
    cmd = [sys.executable, "-m", "torch.distributed.run", *extra, str(HERE)]
    return subprocess.Popen(
        cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True
    )


def _finish(procs, timeout: float = 120) -> None:
    try:
        for p in procs:
            out, _ = p.communicate(timeout=timeout)
            assert p.returncode == 0, out.decode()[-3000:]
    finally:
        for p in procs:
            procgroup.kill_group(p)  # the launcher and every rank it started


def _compare(tmp: Path) -> None:
    emulated = dist.launch(program, WORLD)
    for r in range(WORLD):
        got = np.load(tmp / f"rank{r}.npz")
        assert sorted(got.files) == sorted(emulated[r]), r
        for key, want in emulated[r].items():
            np.testing.assert_allclose(got[key], want, rtol=1e-6, err_msg=f"rank {r}: {key}")


@pytest.mark.skipif(not torch.distributed.is_gloo_available(), reason="needs gloo")
def test_torchrun_standalone_matches_threads(tmp_path):
    procs = [_torchrun(tmp_path, ["--standalone", f"--nproc_per_node={WORLD}"])]
    _finish(procs)
    _compare(tmp_path)


@pytest.mark.skipif(not torch.distributed.is_gloo_available(), reason="needs gloo")
def test_torchrun_two_nodes_matches_threads(tmp_path):
    port = free_port()
    common = ["--nnodes=2", "--nproc_per_node=1", "--rdzv-backend=c10d",
              f"--rdzv-endpoint=127.0.0.1:{port}", "--rdzv-id=labs-dist-test"]  # fmt: skip
    procs = [_torchrun(tmp_path, [*common, f"--node_rank={i}"]) for i in range(2)]
    _finish(procs)
    _compare(tmp_path)


if __name__ == "__main__":  # run by torchrun: one process per rank
    rank = int(os.environ["RANK"])
    results = dist.launch(program, int(os.environ["WORLD_SIZE"]), timeout=60)
    assert all(v is None for i, v in enumerate(results) if i != rank)
    np.savez(Path(os.environ["DIST_TEST_OUT"]) / f"rank{rank}.npz", **results[rank])
