"""Plausible wrong answers to lab 12; each must be rejected by its exercise's checks."""

from labs.course.wrong_answers import Wrong

WRONG = [
    Wrong(
        1,
        "one generator seed for all ranks",
        old="rng = random.Random(seed * 1000 + rank)",
        new="rng = random.Random(seed)",
    ),
    Wrong(
        1,
        "the unseeded global generator",
        old="rng = random.Random(seed * 1000 + rank)",
        new="rng = random",
    ),
    Wrong(
        1,
        "draws a number before the sleep too",
        old="time.sleep(rng.uniform(0, 0.01))",
        new="drawn = rng.randint(0, 999)\n    time.sleep(rng.uniform(0, 0.01))",
    ),
    Wrong(
        1,
        "a different generator for the number than for the sleep",
        old="box[0] = rng.randint(0, 999)",
        new="box[0] = random.Random(seed).randint(0, 999)",
    ),
    Wrong(
        1,
        "prints the receiving rank's own number as sender",
        old='print(f"rank {rank} received {box.item()} from rank {rank - 1}")',
        new='print(f"rank {rank} received {box.item()} from rank {rank}")',
    ),
    Wrong(
        2,
        "tree ignores the root (relative ranks from 0)",
        old="v = (rank - src) % p",
        new="v = rank",
    ),
    Wrong(
        2,
        "naive broadcast as a chain (each rank forwards to the next)",
        block="""
        rank, p = dist.get_rank(), dist.get_world_size()
        v = (rank - src) % p
        if v > 0:
            dist.recv(x, src=(rank - 1) % p)
        if v < p - 1:
            dist.send(x, dst=(rank + 1) % p)
    """,
    ),
    Wrong(
        2,
        "tree in which only the root sends",
        old="if v < step and v + step < p:",
        new="if v == 0 and v + step < p:",
    ),
    Wrong(3, "accumulation written as overwrite", old="cs[inc] += buf", new="cs[inc].copy_(buf)"),
    Wrong(
        3,
        "returns the next rank's chunk index",
        old="return r",
        new="return (r + 1) % p",
    ),
    Wrong(
        3,
        "all-gather sends the chunk one step behind",
        old="exchange(cs[(r - s) % p], cs[(r - s - 1) % p]",
        new="exchange(cs[(r - s - 1) % p], cs[(r - s) % p]",
    ),
    Wrong(
        3,
        "chunks by split(n // p): wrong when p does not divide n",
        old="cs = chunks(x, p)\n    for s in range(p - 1):\n        out, inc",
        new="cs = list(x.view(-1).split(max(1, x.numel() // p)))\n    for s in range(p - 1):\n        out, inc",
    ),
    Wrong(
        3,
        "ignores group= (world rank and size)",
        old="r, p = dist.get_rank(group), dist.get_world_size(group)\n    cs = chunks(x, p)\n    for s in range(p - 1):\n        exchange(cs[(r - s) % p]",
        new="r, p = dist.get_rank(), dist.get_world_size()\n    cs = chunks(x, p)\n    for s in range(p - 1):\n        exchange(cs[(r - s) % p]",
    ),
    Wrong(
        3,
        "reduce-scatter one step ahead (sends chunk r - s, adds into r - s - 1)",
        old="out, inc = (r - s - 1) % p, (r - s - 2) % p",
        new="out, inc = (r - s) % p, (r - s - 1) % p",
    ),
    Wrong(
        3,
        "receive buffer in the default dtype (float32), not the tensor's",
        old="buf = torch.empty_like(cs[inc])",
        new="buf = torch.empty(cs[inc].numel())",
    ),
    Wrong(
        3,
        "receive buffer hard-coded to float64 (the dtype of the check's data)",
        old="buf = torch.empty_like(cs[inc])",
        new="buf = torch.empty(cs[inc].numel(), dtype=torch.float64)",
    ),
    Wrong(
        3,
        "p steps instead of p - 1 in the reduce-scatter",
        old="    cs = chunks(x, p)\n    for s in range(p - 1):\n        out, inc",
        new="    cs = chunks(x, p)\n    for s in range(p):\n        out, inc",
    ),
    Wrong(
        4,
        "all-gather retraces the rounds in the same order",
        old="for d, keep, give in reversed(rounds):",
        new="for d, keep, give in rounds:",
    ),
    Wrong(4, "no check that p is a power of two", old="if p & (p - 1):", new="if p < 1:"),
    Wrong(4, "checks only that p is even", old="if p & (p - 1):", new="if p % 2 and p > 1:"),
    Wrong(
        4, "1 taken for not a power of two", old="if p & (p - 1):", new="if p < 2 or p & (p - 1):"
    ),
    Wrong(
        4,
        "an assert instead of a ValueError",
        old='raise ValueError(f"halving_doubling_all_reduce needs a power-of-two p, got {p}")',
        new='assert False, f"halving_doubling_all_reduce needs a power-of-two p, got {p}"',
    ),
    Wrong(
        4,
        "ValueError without a message",
        old='raise ValueError(f"halving_doubling_all_reduce needs a power-of-two p, got {p}")',
        new="raise ValueError",
    ),
    Wrong(
        4,
        "all-gather's receive buffer in the default dtype (float32)",
        old="dtype=x.dtype)",
        new=")",
    ),
    Wrong(
        4,
        "all-gather's receive buffer hard-coded to float64",
        old="dtype=x.dtype)",
        new="dtype=torch.float64)",
    ),
    Wrong(
        4, "keeps the upper half on the lower rank", old="if r & d == 0 else", new="if r & d else"
    ),
    Wrong(
        5,
        "all-reduces the whole tensor across nodes",
        old="ring_all_reduce(chunks(x, dist.get_world_size(local_group))[j], cross_group)",
        new="ring_all_reduce(x, cross_group)",
    ),
    Wrong(
        5,
        "skips the cross-node step",
        old="ring_all_reduce(chunks(x, dist.get_world_size(local_group))[j], cross_group)",
        new="pass",
    ),
    Wrong(
        5,
        "node and cross-node groups transposed (node = rank % 2)",
        block="""
        r = dist.get_rank()
        node_groups = [dist.new_group(list(range(k, NODES * PER_NODE, NODES))) for k in range(NODES)]
        cross_groups = [dist.new_group([NODES * j, NODES * j + 1]) for j in range(PER_NODE)]
        return node_groups[r % NODES], cross_groups[r // NODES]
        """,
    ),
    Wrong(
        3, "all-reduce by the built-in collective", block="dist.all_reduce(x, group=group)", part=2
    ),
    # SLIPS the notebook check (at 347915e), which builds its expected lines from the results;
    # labs-grade rejects it (the expected lines come from the reference run: "776" vs "776.0")
    Wrong(
        1,
        "sends the number as a float32 tensor (the exercise asks for int64)",
        old="box = torch.zeros(1, dtype=torch.int64)",
        new="box = torch.zeros(1)",
    ),
]
