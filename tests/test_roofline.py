"""Tests of labs.systems.roofline: intensity formulas, the roofline, and the measurement helpers."""

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from labs.systems import roofline as rl  # noqa: E402


def test_intensity_formulas():
    assert rl.arithmetic_intensity(100, 50) == 2
    # (m x k) @ (k x n), fp32: 2mkn / (4 (mk + kn + mn))
    assert rl.matmul_intensity(2, 3, 4) == pytest.approx(48 / (4 * (6 + 12 + 8)))
    assert rl.matmul_intensity(1024, 1024, 1024, 2) == pytest.approx(2 * 1024**3 / (6 * 1024**2))
    # y = 2x in fp32: 1 FLOP per 8 bytes; x + y: 1 FLOP per 12 bytes
    assert rl.elementwise_intensity(1) == pytest.approx(1 / 8)
    assert rl.elementwise_intensity(1, reads=2) == pytest.approx(1 / 12)
    with pytest.raises(ValueError):
        rl.arithmetic_intensity(1, 0)


def test_roofline_and_regimes():
    peak, bw = 312e12, 2.039e12  # A100 SXM: BF16 tensor cores and HBM2e
    assert rl.ridge_point(peak, bw) == pytest.approx(153.0, rel=1e-2)
    got = rl.attainable_flops([1.0, 153.0, 1e4], peak, bw)
    assert np.allclose(got, [bw, min(peak, 153 * bw), peak])
    assert rl.regime(rl.elementwise_intensity(1), peak, bw) == "memory-bound"
    assert rl.regime(rl.matmul_intensity(8192, 8192, 8192, 2), peak, bw) == "compute-bound"
    assert rl.regime(rl.matmul_intensity(1, 8192, 8192, 2), peak, bw) == "memory-bound"


def test_plot_roofline_draws_points():
    ax = rl.plot_roofline(1e11, 1e10, {"copy": (0.125, 1e9), "matmul": (100.0, 9e10)})
    assert len(ax.lines) >= 3 and ax.get_xscale() == "log"
    matplotlib.pyplot.close("all")


def test_measurements_are_plausible():
    flop_s = rl.peak_matmul_flops(sizes=(128, 256))
    bw = rl.stream_bandwidth(n_bytes=8 * 2**20, repeats=3)
    assert 1e8 < flop_s < 1e15
    assert 1e8 < bw < 1e14
    with pytest.raises(ValueError):
        rl.stream_bandwidth(n_bytes=2)


def test_peak_memory_counts_live_tensors():
    n = 2**20  # one MiB of floats is 4 MiB

    def two_temporaries():
        a = torch.ones(n)
        b = torch.ones(n)
        return (a + b).sum()

    peak = rl.peak_memory_bytes(two_temporaries)
    assert 3 * 4 * n <= peak <= 3 * 4 * n + 2**16  # a, b and a + b were alive together
    assert rl.peak_memory_bytes(lambda: None) < 2**12


def test_peak_memory_measures_the_named_device():
    """CPU work measured on the CPU even where a GPU exists (a GPU sees none of it)."""
    big = lambda: torch.ones(2**20)  # noqa: E731 - 4 MiB on the CPU
    assert rl.peak_memory_bytes(big) >= 4 * 2**20
    with pytest.raises(ValueError, match="device must be"):
        rl.peak_memory_bytes(big, device="meta")
    if torch.cuda.is_available():
        assert rl.peak_memory_bytes(big, device="cuda") == 0
        on_gpu = lambda: torch.ones(2**20, device="cuda")  # noqa: E731
        assert rl.peak_memory_bytes(on_gpu, device="cuda") >= 4 * 2**20


def test_compare_times_thread_time_ignores_sleep_and_needs_one_thread():
    import time

    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        with pytest.raises(ValueError, match="set_num_threads"):
            rl.compare_times({"a": lambda: None}, thread_time=True)
        torch.set_num_threads(1)
        # sleeping is wall-clock time in which this thread uses no CPU: thread time skips it
        got = rl.compare_times({"sleep": lambda: time.sleep(0.05)}, repeats=2, thread_time=True)
        assert got["sleep"] < 0.02
        wall = rl.compare_times({"sleep": lambda: time.sleep(0.05)}, repeats=2)
        assert wall["sleep"] >= 0.05
    finally:
        torch.set_num_threads(threads)


def test_peak_memory_refuses_work_moved_to_another_thread():
    """The CPU profiler sees only its own thread: a call that hands its work to a Python thread
    would measure 0 bytes, so it is refused with a clear error; threads work again afterwards."""
    import threading

    x = torch.randn(256, 256)

    def elsewhere():
        worker = threading.Thread(target=lambda: x @ x)
        worker.start()
        worker.join()

    assert rl.peak_memory_bytes(lambda: x @ x) >= 256 * 256 * 4
    with pytest.raises(RuntimeError, match="started a thread"):
        rl.peak_memory_bytes(elsewhere)
    worker = threading.Thread(target=lambda: None)
    worker.start()
    worker.join()
