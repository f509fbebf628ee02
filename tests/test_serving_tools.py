"""Tests of the chapter's simulators and data tools: HPA, rolling update, RAG, feature store,
checkpoint storage and ONNX export."""

import math

import numpy as np
import pytest
import torch

from labs import data, gpt
from labs.serving import export, feature_store, hpa, rag, rollout, storage


def test_hpa_rule():
    assert hpa.hpa_desired(4, 0.9, 0.6) == 6  # ceil(4 * 1.5)
    assert hpa.hpa_desired(3, 0.65, 0.6) == 3  # within the 10 % tolerance
    assert hpa.hpa_desired(3, 0.1, 0.6) == 1  # ceil(0.5) clamped to min 1
    assert hpa.hpa_desired(10, 5.0, 0.5, max_replicas=20) == 20
    with pytest.raises(ValueError):
        hpa.hpa_desired(0, 1.0, 0.5)


def test_stabilization_window_stops_flapping():
    load = [20 + 15 * math.sin(i / 3) + (30 if i % 7 == 0 else 0) for i in range(60)]
    flappy = hpa.simulate_hpa(load, capacity_per_pod=5)
    stable = hpa.simulate_hpa(load, capacity_per_pod=5, stabilization_s=300)
    assert stable.scale_events < flappy.scale_events / 5
    assert max(stable.utilization[10:]) <= max(flappy.utilization[10:])


@pytest.mark.parametrize("surge,unavail", [(1, 0), (2, 0), (1, 1)])
def test_rolling_update_keeps_capacity(surge, unavail):
    timeline, dropped = rollout.simulate_rollout(
        4, surge, unavail, requests_per_step=15, capacity_per_pod=5
    )
    assert timeline[-1].old_ready == 0 and timeline[-1].new_ready == 4
    for s in timeline:
        assert s.old_ready + s.new_ready + s.new_starting <= 4 + surge
        assert s.old_ready + s.new_ready >= 4 - unavail
    assert dropped == 0 if unavail == 0 else dropped >= 0


def test_rolling_update_with_unavailable_pods_drops_at_full_load():
    _, dropped = rollout.simulate_rollout(4, 0, 2, requests_per_step=20, capacity_per_pod=5)
    assert dropped > 0
    with pytest.raises(ValueError, match="cannot both be 0"):
        rollout.simulate_rollout(4, 0, 0)


def test_chunk_and_retrieval():
    text = data.load_corpus()
    chunks = rag.chunk(text, 300, 50)
    assert all(len(c) <= 300 for c in chunks)
    assert " ".join(chunks[0].split()[-3:]) in chunks[1]  # consecutive chunks overlap
    with pytest.raises(ValueError):
        rag.chunk(text, 100, 100)
    emb = rag.TfidfEmbedder(dim=32).fit(chunks)
    x = emb.encode(chunks)
    assert x.shape == (len(chunks), 32)
    np.testing.assert_allclose(np.linalg.norm(x, axis=1), 1, rtol=1e-4)
    _, ids = rag.exact_search(x, emb.encode([chunks[5]]), 1)
    assert ids[0, 0] == 5
    prompt = rag.rag_prompt("What is a GPU?", chunks[:3], 64)
    assert len(prompt) == 64 and prompt.endswith("\nQ: What is a GPU?\nA:")  # question whole
    assert prompt.startswith(("\n".join(chunks[:3]))[-(64 - 21) :])  # then the context's end
    with pytest.raises(ValueError, match="no room for retrieved text"):
        rag.rag_prompt("What is a GPU?", chunks[:3], 21)


def test_ivf_recall_grows_with_nprobe():
    rng = np.random.default_rng(0)
    db = rng.normal(size=(5000, 16)).astype("float32")
    db /= np.linalg.norm(db, axis=1, keepdims=True)
    q = np.ascontiguousarray(db[:50] + 0.05 * rng.normal(size=(50, 16)), dtype="float32")
    _, exact = rag.exact_search(db, q, 5)
    recalls = []
    for nprobe in (1, 64):
        ivf = rag.build_ivf(db, 64, nprobe)
        recalls.append(rag.recall_at_k(ivf.search(q, 5)[1], exact))
    assert recalls[0] < recalls[1] == 1.0


def test_point_in_time_join_does_not_leak():
    rows, feats = feature_store.make_events()
    pit = feature_store.point_in_time_join(rows, feats, "user")
    naive = feature_store.latest_value_join(rows, feats, "user")
    assert feature_store.leaked_rows(pit) == 0
    assert feature_store.leaked_rows(naive) > len(rows) // 2
    assert len(pit) == len(rows) and (pit["label"] == rows["label"]).all()
    # each value is the latest one not after the row's time, checked by brute force
    for i in range(0, len(rows), 37):
        r = rows.iloc[i]
        past = feats[(feats.user == r.user) & (feats.ts <= r.ts)]
        expected = past.sort_values("ts").requests_so_far.iloc[-1] if len(past) else np.nan
        got = pit.loc[i, "requests_so_far"]
        assert (np.isnan(expected) and np.isnan(got)) or got == expected


def test_sharded_checkpoint_roundtrip(tmp_path):
    state = storage.make_state_dict(4, n_tensors=6)
    index = storage.save_sharded(state, tmp_path, max_shard_bytes=2**20)
    assert len(set(index["weight_map"].values())) >= 3
    back = storage.load_sharded(tmp_path)
    assert all(torch.equal(back[k], v) for k, v in state.items())
    one = storage.load_sharded(tmp_path, ["layers.3.weight"])
    assert list(one) == ["layers.3.weight"]
    with pytest.raises(KeyError):
        storage.load_sharded(tmp_path, ["nope"])
    hdr = storage.header_of(tmp_path / index["weight_map"]["layers.0.weight"])
    assert hdr["layers.0.weight"]["dtype"] == "F32"


def test_onnx_export_matches_pytorch(tmp_path):
    model = gpt.GPT(gpt.GPTConfig(block_size=32, n_layer=1))
    path = export.export_onnx(model, tmp_path / "m.onnx")
    sess = export.ort_session(path)
    for shape in ((1, 5), (3, 32)):
        idx = torch.randint(0, 96, shape)
        ref = model(idx).detach().numpy()
        np.testing.assert_allclose(export.ort_logits(sess, idx), ref, atol=1e-4, rtol=1e-4)


def test_replay_clock_is_the_step_timer():
    """serve_trace times each step with the clock it is given; both engines give the same greedy
    tokens whatever the clock, and the thread's CPU time needs PyTorch on one thread."""
    import time

    from labs.inference.batching import make_trace
    from labs.serving import replay

    torch.manual_seed(0)
    model = gpt.GPT(gpt.GPTConfig(block_size=64)).eval()
    trace = make_trace(6, rate=100.0, prompt_len=(4, 8), mean_output=4, max_output=8, seed=0)
    ticks = iter(range(10**6))  # a clock that advances by one "second" per reading
    fake = replay.serve_trace("continuous", trace, model, max_batch=4, clock=lambda: next(ticks))
    assert fake["ttft_mean_s"] >= 1  # every step took one tick of the fake clock
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        with pytest.raises(ValueError, match="set_num_threads"):
            replay.serve_trace("static", trace, model, clock=time.thread_time)
        torch.set_num_threads(1)
        out = {
            k: replay.serve_trace(k, trace, model, max_batch=4, clock=time.thread_time)
            for k in ("static", "continuous")
        }
    finally:
        torch.set_num_threads(threads)
    assert out["static"]["outputs"] == out["continuous"]["outputs"] == fake["outputs"]
    assert all(0 < v["ttft_mean_s"] < 1 for v in out.values())  # a tiny model: milliseconds
