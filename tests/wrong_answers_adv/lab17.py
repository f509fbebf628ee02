"""Adversarial wrong answers for lab 17 (3D parallelism)."""

from labs.course.wrong_answers import Wrong

WRONG = [
    Wrong(
        1,
        "data-parallel index without the modulo",
        old="return (rank // tp) % dp, rank % tp, rank // (tp * dp)",
        new="return rank // tp, rank % tp, rank // (tp * dp)",
    ),
    Wrong(
        1,
        "groups keyed by the wrong coordinates (tp groups vary dp)",
        old='key = {"dp": (t, p), "tp": (d, p), "pp": (d, t)}[kind]',
        new='key = {"dp": (d, p), "tp": (t, p), "pp": (d, t)}[kind]',
    ),
    Wrong(
        3,
        "averages the gradients over the data-parallel group",
        old='        dist.all_reduce(param.grad, group=groups["dp"])',
        new='        dist.all_reduce(param.grad, group=groups["dp"])\n        param.grad /= dp',
    ),
    Wrong(
        3,
        "equal-size micro-batches with torch.split: the rows past a multiple are dropped",
        old="""    xs = x.chunk(dp)[dp_i].chunk(micro_batches)
    ys = y.chunk(dp)[dp_i].chunk(micro_batches)""",
        new="""    mb_rows = max(1, len(x.chunk(dp)[dp_i]) // micro_batches)
    xs = x.chunk(dp)[dp_i].split(mb_rows)
    ys = y.chunk(dp)[dp_i].split(mb_rows)""",
    ),
    Wrong(
        3,
        "loss as a mean over the micro-batch instead of half the sum of squares",
        old="(0.5 * ((out - ys[mb]) ** 2).sum()).backward()",
        new="((out - ys[mb]) ** 2).mean().backward()",
    ),
    Wrong(
        4,
        "judges an order by its data-parallel time alone",
        old='return sum(c["seconds"] for c in comm.values())',
        new='return comm["dp"]["seconds"]',
    ),
    Wrong(
        4,
        "judges an order by its slowest dimension instead of the sum",
        old='return sum(c["seconds"] for c in comm.values())',
        new='return max(c["seconds"] for c in comm.values())',
    ),
]
