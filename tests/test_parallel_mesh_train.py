"""The 4-D (tp x cp x pp x dp) training step equals the single-device step, loss, gradients and
weights after SGD; its collectives run on the groups they should; bad meshes are refused."""

import pytest
import torch

from labs import dist, gpt
from labs.parallel import mesh_train as mt
from labs.parallel.mesh import Mesh

VOCAB, SEQ = 11, 12


def _batch(rows: int, seq: int = SEQ, seed: int = 1):
    gen = torch.Generator().manual_seed(seed)
    return (torch.randint(0, VOCAB, (rows, seq), generator=gen),
            torch.randint(0, VOCAB, (rows, seq), generator=gen))  # fmt: skip


def _assert_matches_reference(model, dims, rows, micro_batches, sp):
    idx, tgt = _batch(rows, model.config.block_size)
    ref = mt.reference_step(model, idx, tgt, lr=0.1)
    res = mt.train_step(model, Mesh(dims), idx, tgt, micro_batches=micro_batches, sp=sp, lr=0.1)
    seen = set()
    for r, out in enumerate(res):
        t = out["coords"]["tp"]
        torch.testing.assert_close(out["loss"], ref["loss"], rtol=1e-12, atol=1e-12)
        for name, g in out["grads"].items():
            want = mt.shard_of(name, ref["grads"][name], t, dims["tp"])
            torch.testing.assert_close(g, want, rtol=1e-10, atol=1e-12, msg=f"rank {r} {name}")
            after = mt.shard_of(name, ref["params"][name], t, dims["tp"])
            torch.testing.assert_close(out["params"][name], after, rtol=1e-10, atol=1e-12)
        seen |= set(out["grads"])
        stage_params = {n for n in ref["grads"] if n.startswith(f"blocks.{out['coords']['pp']}.")}
        if dims["pp"] == 2:  # one layer per stage
            assert stage_params <= set(out["grads"])
    assert seen == set(ref["grads"])  # every parameter lives on some rank
    return res


@pytest.mark.parametrize("sp, micro_batches", [(True, 2), (False, 1)])
def test_16_ranks_equal_single_device(sp, micro_batches):
    model = mt.tiny_gpt(vocab=VOCAB, seq_len=SEQ)
    res = _assert_matches_reference(model, {"tp": 2, "cp": 2, "pp": 2, "dp": 2}, 4,
                                    micro_batches, sp)  # fmt: skip
    # the q_proj gradient really is split over tp: the two halves differ
    g0 = res[0]["grads"]["blocks.0.attn.q_proj.weight"]
    g1 = res[1]["grads"]["blocks.0.attn.q_proj.weight"]
    assert g0.shape == (8, 16) and not torch.allclose(g0, g1)


@pytest.mark.parametrize(
    "dims, sp",
    [({"tp": 2, "cp": 2, "pp": 2, "dp": 1}, True), ({"tp": 1, "cp": 2, "pp": 1, "dp": 2}, False),
     ({"tp": 4, "cp": 1, "pp": 1, "dp": 1}, True), ({"tp": 1, "cp": 3, "pp": 1, "dp": 1}, False)],
)  # fmt: skip
def test_smaller_meshes_equal_single_device(dims, sp):
    _assert_matches_reference(mt.tiny_gpt(vocab=VOCAB, seq_len=SEQ), dims, 2, 1, sp)


def test_collectives_run_on_their_groups():
    model, (idx, tgt) = mt.tiny_gpt(vocab=VOCAB, seq_len=SEQ), _batch(4)
    mesh = Mesh({"tp": 2, "cp": 2, "pp": 2, "dp": 2})
    mt.train_step(model, mesh, idx, tgt, micro_batches=2)
    table = {(op, kind): (n, b) for op, kind, n, b in mt.collective_table(dist.last_trace(), mesh)}
    assert set(table) == {("all_gather_into_tensor", "tp"), ("reduce_scatter_tensor", "tp"),
                          ("all_reduce", "tp"), ("send/recv", "cp"), ("send/recv", "pp"),
                          ("all_reduce", "dp+cp"), ("broadcast", "pp")}  # fmt: skip
    # pp: 8 ranks per stage, 2 micro-batches, one activation forward and one gradient back;
    # each message is 1 sequence x 3 tokens (12 / cp / tp) x width 16 x 8 bytes
    assert table["send/recv", "pp"] == (2 * 8 * 2, 2 * 8 * 2 * 1 * 3 * 16 * 8)
    # dp+cp: one gradient bucket per rank, and the loss summed on the 8 ranks of the last stage
    assert table["all_reduce", "dp+cp"][0] == 16 + 8
    # SP: per layer and micro-batch, two all-gathers forward and two in backward (the
    # column-parallel input gradient is a reduce-scatter, the row-parallel output one is a gather)
    assert table["all_gather_into_tensor", "tp"][0] == table["reduce_scatter_tensor", "tp"][0]


def test_bad_meshes_are_refused():
    model, (idx, tgt) = mt.tiny_gpt(vocab=VOCAB, seq_len=SEQ), _batch(4)
    cases = [
        ({"tp": 3, "cp": 1, "pp": 1, "dp": 1}, {}, "n_head=4 heads do not split over tp=3"),
        ({"tp": 1, "cp": 1, "pp": 3, "dp": 1}, {}, "n_layer=2 layers do not split into pp=3"),
        ({"tp": 1, "cp": 1, "pp": 1, "dp": 3}, {}, "does not split into dp=3"),
        ({"tp": 1, "cp": 8, "pp": 1, "dp": 1}, {}, "seq_len=12 is too short for cp=8"),
        ({"tp": 2, "cp": 2, "pp": 1, "dp": 1}, {"sp": True}, None),  # fine: shards of 6 tokens
        ({"tp": 4, "cp": 2, "pp": 1, "dp": 1}, {"sp": True}, "must split over tp=4"),
        ({"tp": 2, "dp": 2}, {}, "needs dimensions tp, cp, pp, dp"),
    ]
    for dims, kw, msg in cases:
        if msg is None:
            mt._check(model, Mesh(dims), idx, tgt, 1, **kw)
            continue
        with pytest.raises(ValueError, match=msg):
            mt.train_step(model, Mesh(dims), idx, tgt, **kw)
    with pytest.raises(ValueError, match="targets"):
        mt.train_step(model, Mesh({"tp": 1, "cp": 1, "pp": 1, "dp": 1}), idx, tgt[:, :5])
    tied = gpt.GPT(gpt.GPTConfig(vocab_size=VOCAB, block_size=SEQ, n_layer=2, n_head=4, n_embd=16))
    with pytest.raises(ValueError, match="tie_weights=False"):
        mt.train_step(tied, Mesh({"tp": 1, "cp": 1, "pp": 2, "dp": 1}), idx, tgt)
    # the per-rank program refuses a mesh that does not match the world
    with pytest.raises(ValueError, match="has 2 ranks but the world has 4"):
        dist.launch(mt.mesh_step, 4, model, Mesh({"tp": 2, "cp": 1, "pp": 1, "dp": 1}), idx, tgt)
    # without SP, any CP shard length works: 12 tokens over cp=4 with tp=4 and sp=False
    mt._check(model, Mesh({"tp": 4, "cp": 4, "pp": 1, "dp": 1}), idx, tgt, 1, sp=False)
