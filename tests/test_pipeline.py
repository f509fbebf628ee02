"""Pipeline schedules as data, the simulator, the executor and torch.distributed.pipelining."""

from __future__ import annotations

import subprocess
import sys

import matplotlib
import procgroup
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from labs.parallel import pipeline as pp
from labs.parallel.pipeline.dualpipe import dualpipe, dualpipe_v
from labs.parallel.pipeline.execute import reference_grads, run_schedule

matplotlib.use("Agg")

GRID = [(p, m) for p in (1, 2, 3, 4, 8) for m in (1, 2, 4, 5, 8, 16)]


@pytest.mark.parametrize("p,m", GRID)
def test_gpipe_and_1f1b_bubble_and_memory(p, m):
    for make in (pp.gpipe, pp.one_f_one_b):
        tl = pp.simulate(make(p, m), {"F": 1.0, "B": 1.5, "W": 0.5})
        assert pp.bubble_fraction(tl) == pytest.approx((p - 1) / (m + p - 1))
        assert pp.bubble_fraction(tl) == pytest.approx(pp.bubble_fraction_formula(p, m))
    assert pp.peak_stash(pp.simulate(pp.gpipe(p, m))) == [m] * p
    assert pp.peak_stash(pp.simulate(pp.one_f_one_b(p, m))) == [min(p - r, m) for r in range(p)]


@pytest.mark.parametrize("p,m,v", [(2, 4, 2), (4, 8, 2), (4, 8, 4), (3, 9, 3), (8, 16, 2)])
def test_interleaved_bubble(p, m, v):
    s = pp.interleaved_1f1b(p, m, v)
    assert s.num_stages == p * v
    tl = pp.simulate(s)
    assert pp.bubble_fraction(tl) == pytest.approx((p - 1) / (v * m + p - 1))
    assert pp.idle_time(tl) == pytest.approx(pp.bubble_time("Interleaved 1F1B", p, v))


@settings(max_examples=40, deadline=None)
@given(
    p=st.integers(2, 8),
    extra=st.integers(0, 10),
    f=st.sampled_from([0.5, 1.0, 2.0]),
    b=st.sampled_from([0.5, 1.0, 1.5]),
    w=st.sampled_from([0.25, 0.5, 1.0]),
)
def test_zb_h1_matches_formula_and_memory(p, extra, f, b, w):
    m = p + extra
    w = min(w, f, b)  # the formula assumes a W is no longer than an F or a B
    costs = {"F": f, "B": b, "W": w}
    tl = pp.simulate(pp.zb_h1(p, m), costs)
    assert pp.idle_time(tl) == pytest.approx(pp.bubble_time("ZB-H1", p, costs=costs))
    assert max(pp.peak_stash(tl)) == p


@pytest.mark.parametrize("p", [2, 4, 6, 8])
def test_dualpipe_matches_the_authors_table(p):
    for m in (2 * p, 2 * p + 4):
        s = dualpipe(p, m)
        assert s.copies == 2
        for costs in ({"F": 1, "B": 1, "W": 1}, {"F": 1, "B": 1, "W": 1, "F&B": 2.5}):
            tl = pp.simulate(s, costs)
            assert pp.idle_time(tl) == pytest.approx(pp.bubble_time("DualPipe", p, costs=costs))
            assert max(pp.peak_stash(tl)) == p + 1
        v = pp.simulate(dualpipe_v(p, m), {"F": 1, "B": 1, "W": 1})
        assert pp.idle_time(v) == pytest.approx(pp.bubble_time("DualPipeV", p))


def test_one_f_one_b_and_gpipe_as_data():
    assert [str(a) for a in pp.one_f_one_b(2, 3).actions[0]] == ["F0", "F1", "B0", "F2", "B1", "B2"]
    assert [str(a) for a in pp.gpipe(2, 2).actions[1]] == ["F0", "F1", "B0", "B1"]
    s = pp.interleaved_1f1b(2, 2, 2)
    assert s.routes[0] == [(0, 0), (1, 0), (0, 1), (1, 1)]


def test_implied_messages():
    s = pp.one_f_one_b(3, 2)
    assert [(str(a), d, peer) for a, d, peer in s.messages(1)] == [
        ("F0", "recv", 0), ("F0", "send", 2), ("F1", "recv", 0), ("F1", "send", 2),
        ("B0", "recv", 2), ("B0", "send", 0), ("B1", "recv", 2), ("B1", "send", 0),
    ]  # fmt: skip
    v = dualpipe_v(2, 4)  # the turn of the V stays on the last rank
    assert all(peer != 1 for _, _, peer in v.messages(1))
    sends = sum(d == "send" for r in range(s.p) for _, d, _ in s.messages(r))
    recvs = sum(d == "recv" for r in range(s.p) for _, d, _ in s.messages(r))
    assert sends == recvs == 2 * s.m * (s.num_stages - 1)


def test_bad_schedules_are_reported():
    p, m = 2, 2
    route = [[(0, 0), (1, 0)]] * m
    # the last stage runs a backward before the forward that feeds it
    bad = pp.Schedule(
        "bad",
        p,
        m,
        1,
        [
            pp.gpipe(p, m).actions[0],
            [pp.Action("B", 0), pp.Action("F", 0), pp.Action("F", 1), pp.Action("B", 1)],
        ],
        route,
    )
    with pytest.raises(pp.ScheduleError, match="deadlock.*rank 1 waits before B0"):
        pp.simulate(bad)
    missing = pp.Schedule(
        "missing", p, m, 1, [pp.gpipe(p, m).actions[0], [pp.Action("F", 0)]], route
    )
    with pytest.raises(pp.ScheduleError, match="exactly one F"):
        pp.simulate(missing)
    early_w = pp.Schedule(
        "w", 1, 1, 1, [[pp.Action("F", 0), pp.Action("W", 0), pp.Action("B", 0)]], [[(0, 0)]]
    )
    with pytest.raises(pp.ScheduleError, match="before its B"):
        early_w.check()


def test_invalid_arguments():
    with pytest.raises(ValueError, match="multiple of p"):
        pp.interleaved_1f1b(4, 6, 2)
    with pytest.raises(ValueError, match="even"):
        dualpipe(3, 12)
    with pytest.raises(ValueError, match=">= 2p"):
        dualpipe_v(4, 6)
    with pytest.raises(ValueError, match="unknown schedule"):
        pp.bubble_time("Nope", 4)


def _stages(n, width=6, layers=8, seed=0):
    torch.manual_seed(seed)
    blocks = [
        torch.nn.Sequential(torch.nn.Linear(width, width), torch.nn.Tanh()) for _ in range(layers)
    ]
    per = layers // n
    return [torch.nn.Sequential(*blocks[i * per : (i + 1) * per]) for i in range(n)]


@pytest.mark.parametrize(
    "make",
    [
        lambda: pp.gpipe(4, 4),
        lambda: pp.one_f_one_b(4, 8),
        lambda: pp.interleaved_1f1b(2, 4, 2),
        lambda: pp.zb_h1(4, 8),
        lambda: dualpipe(4, 8),
        lambda: dualpipe_v(2, 4),
    ],
)
def test_executor_matches_single_device_and_simulation(make):
    s = make()
    stages = _stages(s.num_stages)
    torch.manual_seed(1)
    xs = [torch.randn(3, 6) for _ in range(s.m)]
    ys = [torch.randn(3, 6) for _ in range(s.m)]
    costs = {"F": 1.0, "B": 1.5, "W": 0.5, "F&B": 2.5}
    result = run_schedule(s, stages, xs, ys, costs=costs, comm=0.1)
    ref, ref_loss = reference_grads(stages, xs, ys)
    assert result.loss == pytest.approx(ref_loss, rel=1e-5)
    for got, want in zip(result.grads, ref):
        for g, w in zip(got, want):
            torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-6)
    sim = pp.simulate(s, costs, comm=0.1)
    assert [[(e.action, e.start, e.end) for e in ev] for ev in result.timeline.events] == [
        [(e.action, e.start, e.end) for e in ev] for ev in sim.events
    ]
    assert result.peak_stash == pp.peak_stash(sim)


def test_executor_rejects_wrong_inputs():
    s = pp.gpipe(2, 2)
    with pytest.raises(ValueError, match="needs 2 stages and 2 micro-batches"):
        run_schedule(s, _stages(2), [torch.zeros(1, 6)], [torch.zeros(1, 6)])


def test_draw_timeline_both_styles():
    import matplotlib.pyplot as plt

    tl = pp.simulate(dualpipe(4, 8))
    for raster in (False, True):
        ax = pp.draw_timeline(tl, raster=raster)
        assert "DualPipe" in ax.get_title(loc="left")
        plt.close(ax.figure)


@pytest.mark.parametrize("make", [pp.gpipe, pp.zb_h1, lambda p, m: pp.interleaved_1f1b(p, m, 2)])
def test_draw_timeline_is_legible_in_a_text_column(make):
    """Default size fits a 6.5-inch column; every text is >= 9 pt; labels do not overlap."""
    import matplotlib.pyplot as plt

    ax = pp.draw_timeline(pp.simulate(make(4, 8)))
    fig = ax.figure
    fig.tight_layout()
    fig.canvas.draw()
    assert fig.get_figwidth() <= 6.5
    texts = [t for t in fig.findobj(matplotlib.text.Text) if t.get_visible() and t.get_text()]
    assert texts and min(t.get_fontsize() for t in texts) >= 9
    renderer = fig.canvas.get_renderer()
    legend = ax.get_legend().get_window_extent(renderer)
    (title,) = [t for t in texts if t.get_text() == ax.get_title(loc="left")]
    assert not legend.overlaps(title.get_window_extent(renderer)), "legend hides the title"
    boxes = [t for t in ax.texts]  # micro-batch numbers must fit their boxes: none may overlap
    extents = sorted((t.get_window_extent(renderer) for t in boxes), key=lambda b: (b.y0, b.x0))
    for a, b in zip(extents, extents[1:]):
        assert not (abs(a.y0 - b.y0) < 1 and a.x1 > b.x0 + 0.5), "box labels overlap"
    plt.close(fig)


@pytest.mark.parametrize(
    "module",
    [
        "labs.parallel.pipeline.plot",
        "labs.parallel.pipeline.sim",
        "labs.parallel.pipeline.schedules",
        "labs.parallel.pipeline.dualpipe",
    ],
)
def test_pipeline_modules_import_alone(module):
    """Each piece imports first in a fresh interpreter (no import cycle)."""
    code = (
        f"import {module}; from labs.parallel.pipeline import Action, Schedule, simulate, "
        "draw_timeline, bubble_time; import labs.parallel.pipeline.execute"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_torch_pipelining_under_torchrun():
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node=2",
        "-m",
        "labs.parallel.pipeline.torchrun",
    ]
    out = procgroup.run(cmd, capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stderr[-3000:]
    lines = [ln for ln in out.stdout.splitlines() if "gradients match" in ln]
    assert len(lines) == 2 and all("match the single-process run: True" in ln for ln in lines), (
        out.stdout
    )
