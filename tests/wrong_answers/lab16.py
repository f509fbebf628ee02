"""Plausible wrong answers to lab 16; each must be rejected by its exercise's checks."""

from labs.course.wrong_answers import Wrong

WRONG = [
    # exercise 1: memory formulas
    Wrong(
        1,
        "each stage shards only its own term (stages not cumulative)",
        block="""
        out = {
            "weights": w * psi / (n_d if stage == 3 else 1),
            "gradients": g * psi / (n_d if stage == 2 else 1),
            "optimizer": k * psi / (n_d if stage == 1 else 1),
        }
        out["total"] = out["weights"] + out["gradients"] + out["optimizer"]
        return out
        """,
    ),
    Wrong(
        1, "ZeRO-1 already shards the gradients", old="n_d if stage >= 2", new="n_d if stage >= 1"
    ),
    Wrong(1, "ZeRO-2 already shards the weights", old="n_d if stage >= 3", new="n_d if stage >= 2"),
    Wrong(
        1,
        "whole bytes per rank by floor division (exact only when n_d divides psi)",
        block="""
        out = {
            "weights": w * psi // (n_d if stage >= 3 else 1),
            "gradients": g * psi // (n_d if stage >= 2 else 1),
            "optimizer": k * psi // (n_d if stage >= 1 else 1),
        }
        out["total"] = out["weights"] + out["gradients"] + out["optimizer"]
        return out
        """,
    ),
    # exercise 2: ZeRO-1 collectives
    Wrong(2, "sum instead of mean (Adam hides the scale)", old="mine /= world", new="pass"),
    Wrong(
        2,
        "ReduceOp.AVG and a division by world as well",
        old="dist.reduce_scatter_tensor(mine, flat)",
        new="dist.reduce_scatter_tensor(mine, flat, op=dist.ReduceOp.AVG)",
    ),
    Wrong(
        2,
        "reduce-scatters into the first slice on every rank",
        old="mine = flat[rank * k : (rank + 1) * k]",
        new="mine = flat[:k]",
    ),
    Wrong(
        2, "returns a copy of the slice, not the view", old="return mine", new="return mine.clone()"
    ),
    Wrong(
        2,
        "all-gather copies only this rank's slice",
        block="""
        k = mine.numel()
        rank = dist.get_rank()
        flat[rank * k : (rank + 1) * k] = mine
        """,
        part=1,
    ),
    # exercise 3: ZeRO-2
    Wrong(
        3,
        "keeps the view of the whole padded buffer",
        old="zero_rank.rank).clone()",
        new="zero_rank.rank)",
    ),
    Wrong(3, "does not free the full gradient", old="p.grad = None", new="pass"),
    Wrong(
        3,
        "reduce-scatters with dist directly and forgets the mean",
        block="""
        flat = torch.zeros(zero_rank.flat[p].numel())
        flat[: p.numel()] = p.grad.reshape(-1)
        mine = torch.empty(flat.numel() // zero_rank.world)
        dist.reduce_scatter_tensor(mine, flat)
        zero_rank.shard[p].grad = mine
        p.grad = None
        """,
    ),
    Wrong(
        3,
        "averages the already averaged slice again",
        old="zero_rank.rank).clone()",
        new="zero_rank.rank).clone() / zero_rank.world",
    ),
    Wrong(
        3,
        "reduce-scatters p.grad itself, without the padded buffer (right only when world divides)",
        block="""
        mine = reduce_scatter_mean(p.grad.reshape(-1), zero_rank.world, zero_rank.rank).clone()
        zero_rank.shard[p].grad = mine
        p.grad = None
        """,
    ),
    # exercise 4: ZeRO-3
    Wrong(4, "release zeroes the weights but keeps the memory", block="flat.zero_()", part=1),
    Wrong(
        4,
        "materialize restores the storage but does not gather",
        block="flat.untyped_storage().resize_(flat.numel() * flat.element_size())",
    ),
    Wrong(
        4,
        "materialize fills in only this rank's slice",
        block="""
        flat.untyped_storage().resize_(flat.numel() * flat.element_size())
        k = shard.numel()
        rank = dist.get_rank()
        flat[rank * k : (rank + 1) * k] = shard.detach()
        """,
    ),
    # numel bytes instead (too small) makes the gather write past the storage and kills the
    # kernel: code that crashes is not a wrong answer this test can run
    Wrong(
        4,
        "materialize resizes the storage for 8-byte elements (float64), twice what float32 needs",
        old="resize_(flat.numel() * flat.element_size())",
        new="resize_(flat.numel() * 8)",
    ),
    # issue 35 (and the adversary, slipped at 347915e): state across calls
    Wrong(
        3,
        "overwrites the shard's gradient instead of accumulating (a second backward before the "
        "step loses the first)",
        old="shard.grad = mine if shard.grad is None else shard.grad + mine",
        new="shard.grad = mine",
    ),
]
