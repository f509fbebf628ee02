"""Plausible wrong answers to lab 13; each must be rejected by its exercise's checks."""

from labs.course.wrong_answers import Wrong

WRONG = [
    # exercise 1: data parallelism on core.Model
    Wrong(
        1,
        "averages the gradients (the loss is a sum, so they must be summed)",
        old="dist.all_reduce(layer[key])",
        new="dist.all_reduce(layer[key])\n                layer[key] /= self.world_size",
    ),
    Wrong(
        1,
        "every rank trains on rank 0's shard",
        old="self.rank, self.world_size)",
        new="0, self.world_size)",
    ),
    Wrong(
        1, "all-reduces only the a gradients", old='for key in ("a", "b")', new='for key in ("a",)'
    ),
    Wrong(
        1,
        "every rank runs the whole batch, then all-reduces",
        block="""
        local = m.copy()
        local.backward(local.forward(i) - o)
        for layer in local.grads:
            for key in ("a", "b"):
                dist.all_reduce(layer[key])
        return local
        """,
    ),
    Wrong(
        1,
        "hard-coded for 4 layers",
        old="for layer in local.grads:",
        new="for layer in [local.grads[j] for j in range(4)]:",
    ),
    Wrong(1, "returns the gradients, not the model", old="return local", new="return local.grads"),
    # exercise 2: gradient accumulation
    Wrong(
        2, "overwrites instead of accumulating", old="acc[key] += g[key]", new="acc[key] = g[key]"
    ),
    Wrong(
        2,
        "averages the micro-batch gradients",
        old="total.grads = sums",
        new="total.grads = [{key: s[key] / k for key in s} for s in sums]",
    ),
    Wrong(
        2,
        "runs backward on the given model itself",
        block="""
        sums = None
        for j in range(k):
            model.backward(model.forward(dp.shard(x, j, k)) - dp.shard(y, j, k))
            if sums is None:
                sums = [{key: g[key].copy() for key in ("a", "b")} for g in model.grads]
            else:
                for acc, g in zip(sums, model.grads):
                    for key in ("a", "b"):
                        acc[key] += g[key]
        total = model.copy()
        total.grads = sums
        return total
        """,
    ),
    Wrong(
        2,
        "pairs every micro-batch with the first targets",
        old="dp.shard(y, j, k)",
        new="dp.shard(y, 0, k)",
    ),
    # exercise 3: bucket plan
    Wrong(
        3,
        "a bucket must stay strictly below the cap",
        old="filled + size <= cap",
        new="filled + size < cap",
    ),
    Wrong(
        3,
        "closes a bucket only once it has overflowed",
        block="""
        buckets, current, filled = [], [], 0
        for idx, size in enumerate(sizes):
            current.append(idx)
            filled += size
            if filled >= cap:
                buckets.append(current)
                current, filled = [], 0
        if current:
            buckets.append(current)
        return buckets
        """,
    ),
    Wrong(
        3,
        "does not reset the fill level of a new bucket",
        old="filled = size",
        new="filled += size",
    ),
    # exercise 4: bucketed all-reduce
    Wrong(
        4,
        "all-reduces the flat buffer but never copies it back",
        block="""
        for bucket in my_bucket_plan([g.nbytes for g in grads], cap):
            flat = np.concatenate([grads[j].ravel() for j in bucket])
            dist.all_reduce(flat)
        """,
    ),
    Wrong(
        4,
        "copies every slice from the start of the buffer",
        old="flat[offset : offset + n]",
        new="flat[:n]",
    ),
    Wrong(
        4,
        "one all-reduce per gradient, ignoring the plan",
        block="""
        for g in grads:
            dist.all_reduce(g)
        """,
    ),
    Wrong(
        4,
        "plans with element counts instead of bytes",
        old="[g.nbytes for g in grads]",
        new="[g.size for g in grads]",
    ),
    # adversary; slipped at 347915e: acc.blocks[0]['a'] is model.blocks[0]['a']: an optimizer step on the result changes the input
    Wrong(
        2,
        "returns a shallow copy: the result shares its weight arrays with the model given",
        old="total = model.copy()",
        new="import copy as _copy\n    total = _copy.copy(model)",
    ),
]
