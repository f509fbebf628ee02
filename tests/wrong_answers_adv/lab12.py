"""Adversarial wrong answers for lab 12 (collectives from point-to-point messages)."""

from labs.course.wrong_answers import Wrong

WRONG = [
    Wrong(
        1,
        "one generator for all ranks (the rank is left out of the seed)",
        old="rng = random.Random(seed * 1000 + rank)",
        new="rng = random.Random(seed * 1000)",
    ),
    Wrong(
        1,
        "draws the number before the sleep",
        block="""
        rank, size = dist.get_rank(), dist.get_world_size()
        rng = random.Random(seed * 1000 + rank)
        value = rng.randint(0, 999)
        time.sleep(rng.uniform(0, 0.01))
        box = torch.zeros(1, dtype=torch.int64)
        if rank % 2 == 1:
            dist.recv(box, src=rank - 1)
            print(f"rank {rank} received {box.item()} from rank {rank - 1}")
            return ("received", box.item())
        if rank + 1 < size:
            box[0] = value
            dist.send(box, dst=rank + 1)
            return ("sent", box.item())
        return ("alone", None)
        """,
    ),
    Wrong(
        2,
        "tree ignores src: relative rank taken as the rank itself",
        old="v = (rank - src) % p",
        new="v = rank % p",
    ),
    Wrong(
        2,
        "tree forwards along a chain: every rank that has the data sends to the next one",
        block="""
        rank, p = dist.get_rank(), dist.get_world_size()
        v = (rank - src) % p
        if v > 0:
            dist.recv(x, src=(v - 1 + src) % p)
        if v + 1 < p:
            dist.send(x, dst=(v + 1 + src) % p)
        """,
        part=1,
    ),
    Wrong(
        2,
        "naive broadcast via the tree's rounds but sending only from the root",
        block="""
        rank, p = dist.get_rank(), dist.get_world_size()
        v = (rank - src) % p
        step = 1
        while step < p:
            if v == 0:
                for dst in range(step, min(2 * step, p)):
                    dist.send(x, dst=(dst + src) % p)
            elif step <= v < 2 * step:
                dist.recv(x, src=src)
            step *= 2
        """,
        part=1,
    ),
    Wrong(
        3,
        "receive buffer in float64 whatever the tensor's dtype",
        old="buf = torch.empty_like(cs[inc])",
        new="buf = torch.empty(cs[inc].shape, dtype=torch.float64)",
    ),
    Wrong(
        3,
        "world rank instead of the group rank",
        old="r, p = dist.get_rank(group), dist.get_world_size(group)\n    cs = chunks(x, p)\n    for s in range(p - 1):\n        out, inc",
        new="r, p = dist.get_rank() % dist.get_world_size(group), dist.get_world_size(group)\n    cs = chunks(x, p)\n    for s in range(p - 1):\n        out, inc",
    ),
    Wrong(
        3,
        "all-reduce as p - 1 passes of the whole tensor around the ring",
        block="""
        r, p = dist.get_rank(group), dist.get_world_size(group)
        send = x.clone()
        total = x.clone()
        for s in range(p - 1):
            buf = torch.empty_like(x)
            exchange(send, buf, (r + 1) % p, (r - 1) % p, group)
            total += buf
            send = buf
        x.copy_(total)
        """,
        part=2,
    ),
    Wrong(
        3,
        "torch.chunk instead of tensor_split (different chunk boundaries)",
        old="cs = chunks(x, p)\n    for s in range(p - 1):\n        out, inc",
        new="cs = list(torch.chunk(x.view(-1), p))\n    for s in range(p - 1):\n        out, inc",
    ),
    Wrong(
        4,
        "no power-of-two check",
        old="""    if p & (p - 1):
        raise ValueError(f"halving_doubling_all_reduce needs a power-of-two p, got {p}")""",
        new="",
    ),
    Wrong(
        4,
        "raises for a bad p, but the message does not say what is wrong",
        old='raise ValueError(f"halving_doubling_all_reduce needs a power-of-two p, got {p}")',
        new='raise ValueError(f"halving_doubling_all_reduce: bad world size {p}")',
    ),
    Wrong(
        4,
        "keeps the upper half when r & d == 0",
        old="keep, give = ((lo, mid), (mid, hi)) if r & d == 0 else ((mid, hi), (lo, mid))",
        new="keep, give = ((mid, hi), (lo, mid)) if r & d == 0 else ((lo, mid), (mid, hi))",
    ),
    Wrong(
        5,
        "cross-node groups made of consecutive ranks ([0, 1], [2, 3], ...)",
        old="dist.new_group(list(range(j, NODES * PER_NODE, PER_NODE))) for j in range(PER_NODE)",
        new="dist.new_group([2 * j, 2 * j + 1]) for j in range(PER_NODE)",
    ),
    Wrong(
        5,
        "flat all-reduce inside the node, then across nodes (no reduce-scatter)",
        old="""    j = ring_reduce_scatter(x, local_group)
    ring_all_reduce(chunks(x, dist.get_world_size(local_group))[j], cross_group)
    ring_all_gather(x, local_group)""",
        new="""    ring_all_reduce(x, local_group)
    ring_all_reduce(x, cross_group)""",
    ),
]
