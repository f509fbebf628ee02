"""Plausible wrong answers to lab 17 (3D parallelism); each must be rejected by its checks."""

from labs.course.wrong_answers import Wrong

WRONG = [
    # exercise 1: numbering the grid
    Wrong(
        1,
        "data-parallel index fastest",
        old="return tp_i + tp * (dp_i + dp * pp_i)",
        new="return dp_i + dp * (tp_i + tp * pp_i)",
    ),
    Wrong(
        1,
        "dp index without the modulo (only right for pp = 1)",
        old="(rank // tp) % dp",
        new="rank // tp",
    ),
    Wrong(
        1,
        "dp and tp groups swapped",
        old='"dp": (t, p), "tp": (d, p)',
        new='"dp": (d, p), "tp": (t, p)',
    ),
    # exercise 2: process groups
    Wrong(
        2,
        "each rank creates only the groups it belongs to",
        block="""
        me = dist.get_rank()
        mine = {}
        for kind in ("tp", "dp", "pp"):
            for ranks in grid_groups(kind, dp, tp, pp):
                if me in ranks:
                    mine[kind] = dist.new_group(ranks)
        return mine
        """,
    ),
    Wrong(
        2,
        "keeps the last group of each kind, not its own",
        old="            if me in ranks:\n                mine[kind] = group",
        new="            mine[kind] = group",
    ),
    Wrong(
        2,
        "creates the data-parallel groups first",
        old='for kind in ("tp", "dp", "pp"):',
        new='for kind in ("dp", "tp", "pp"):',
    ),
    # exercise 3: one 3D training step
    Wrong(
        3,
        "no data-parallel all-reduce",
        old='dist.all_reduce(param.grad, group=groups["dp"])',
        new="pass",
    ),
    Wrong(
        3,
        "averages over the data-parallel group",
        old='dist.all_reduce(param.grad, group=groups["dp"])',
        new='dist.all_reduce(param.grad, group=groups["dp"])\n        param.grad /= dp',
    ),
    Wrong(
        3,
        "every data-parallel rank takes the first inputs",
        old="x.chunk(dp)[dp_i]",
        new="x.chunk(dp)[0]",
    ),
    Wrong(
        3,
        "gradients overwritten per micro-batch instead of accumulated",
        old="        if nxt is None:\n",
        new="        stage.zero_grad()\n        if nxt is None:\n",
    ),
    Wrong(
        3,
        "all-reduces over the tensor-parallel group",
        old='group=groups["dp"]',
        new='group=groups["tp"]',
    ),
    Wrong(
        3,
        "first/middle/last stage branches: the last stage always sends back (breaks pp = 1)",
        old="""        if prev is not None:
            dist.send(inp.grad.contiguous(), prev)""",
        new="""        if nxt is None or prev is not None:
            dist.send(inp.grad.contiguous(), prev)""",
    ),
    Wrong(
        3,
        "receive buffer shaped like the first micro-batch (uneven micro-batches)",
        old="inp = xs[mb].clone()",
        new="inp = xs[0].clone() if prev is not None else xs[mb].clone()",
    ),
    Wrong(
        3,
        "receives into the caller's batch (no copy of the micro-batch)",
        old="inp = xs[mb].clone()",
        new="inp = xs[mb]",
    ),
    Wrong(
        3,
        "each micro-batch's loss divided by the number of micro-batches",
        old="(0.5 * ((out - ys[mb]) ** 2).sum()).backward()",
        new="(0.5 * ((out - ys[mb]) ** 2).sum() / micro_batches).backward()",
    ),
    # exercise 4: placement
    Wrong(4, "the most expensive order", old="return min(", new="return max("),
    Wrong(
        3,
        "no communication at all: one device's gradients, cut into each rank's shard",
        block="""
        layout = p3.Layout(dp, tp, pp)
        full = p3.reference_step(stages, x, y)[pp_i]
        return {name: p3.shard_of(layout, rank, name, g) for name, g in full.items()}
        """,
    ),
    Wrong(
        3,
        "sends the activations but not the input gradients back (one device's gradients)",
        block="""
        stage = shard_stage(stages[pp_i], tp_i, tp, groups["tp"])
        nxt = grid_rank(dp_i, tp_i, pp_i + 1, dp, tp, pp) if pp_i < pp - 1 else None
        prev = grid_rank(dp_i, tp_i, pp_i - 1, dp, tp, pp) if pp_i > 0 else None
        for mb in x.chunk(dp)[dp_i].chunk(micro_batches):
            if prev is not None:
                dist.recv(mb.clone(), prev)
            if nxt is not None:
                dist.send(mb.clone(), nxt)
        layout = p3.Layout(dp, tp, pp)
        full = p3.reference_step(stages, x, y)[pp_i]
        return {name: p3.shard_of(layout, rank, name, g) for name, g in full.items()}
        """,
    ),
    Wrong(4, "hard-coded Megatron's order", block='return "tp-dp-pp"'),
    Wrong(
        4,
        "counts only the tensor-parallel time",
        old='sum(c["seconds"] for c in comm.values())',
        new='comm["tp"]["seconds"]',
    ),
    Wrong(
        4,
        "hard-codes 8 GPUs per node",
        old="p3.step_communication(p3.Layout(dp, tp, pp, order), per_node, **model)",
        new="p3.step_communication(p3.Layout(dp, tp, pp, order), 8, **model)",
    ),
    Wrong(
        4,
        "minimises the slowest dimension instead of the total",
        old='sum(c["seconds"] for c in comm.values())',
        new='max(c["seconds"] for c in comm.values())',
    ),
]
