"""Adversarial wrong answers for lab 16 (ZeRO)."""

from labs.course.wrong_answers import Wrong

WRONG = [
    Wrong(
        1,
        "stage off by one: ZeRO-1 shards the gradients too",
        old='"gradients": g * psi / (n_d if stage >= 2 else 1)',
        new='"gradients": g * psi / (n_d if stage >= 1 else 1)',
    ),
    Wrong(
        1,
        "ZeRO-3 shards only the weights (> instead of >= on the stages)",
        old='"optimizer": k * psi / (n_d if stage >= 1 else 1)',
        new='"optimizer": k * psi / (n_d if stage > 1 else 1)',
    ),
    Wrong(
        2,
        "reduce_scatter_mean sums but does not divide by world",
        old="    mine /= world\n",
        new="",
    ),
    Wrong(
        2,
        "returns a new tensor (mine / world) instead of the view of flat",
        old="    mine /= world\n    return mine",
        new="    return mine / world",
    ),
    Wrong(
        2,
        "reduce-scatters into a separate buffer and never writes flat's slice",
        old="    dist.reduce_scatter_tensor(mine, flat)\n    mine /= world\n    return mine",
        new="    out = torch.empty_like(mine)\n    dist.reduce_scatter_tensor(out, flat)\n    return out / world",
    ),
    Wrong(
        3,
        "keeps the view of the padded buffer (the full gradient storage stays alive)",
        old="mine = reduce_scatter_mean(flat, zero_rank.world, zero_rank.rank).clone()",
        new="mine = reduce_scatter_mean(flat, zero_rank.world, zero_rank.rank)",
    ),
    Wrong(
        4,
        "release does nothing (the weights stay materialised)",
        block="""
        pass
        """,
        part=1,
    ),
    Wrong(
        4,
        "materialize resizes the storage but never gathers the slices",
        old="    all_gather_shards(flat, shard.detach(), world)",
        new="    pass",
    ),
    Wrong(
        4,
        "release swaps in an empty tensor (views keep the old storage alive)",
        block="""
        flat.data = torch.empty(0)
        """,
        part=1,
    ),
]
