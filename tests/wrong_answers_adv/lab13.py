"""Adversarial wrong answers for lab 13 (data parallelism on core.Model)."""

from labs.course.wrong_answers import Wrong

WRONG = [
    Wrong(
        1,
        "averages the gradients (the loss is a sum, so they must be summed)",
        old="                dist.all_reduce(layer[key])",
        new="                dist.all_reduce(layer[key])\n                layer[key] /= self.world_size",
    ),
    Wrong(
        1,
        "every rank runs the whole batch",
        old="x = dp.shard(i, self.rank, self.world_size)\n        y = dp.shard(o, self.rank, self.world_size)",
        new="x, y = i, o",
    ),
    Wrong(
        1,
        "all-reduces only the 'a' gradients",
        old='for key in ("a", "b"):\n                dist.all_reduce(layer[key])',
        new='for key in ("a",):\n                dist.all_reduce(layer[key])',
    ),
    Wrong(
        1,
        "all-reduces a copy of each gradient (the model keeps its local gradient)",
        old="dist.all_reduce(layer[key])",
        new="dist.all_reduce(layer[key].copy())",
    ),
    Wrong(
        2,
        "runs every micro-batch on the same copy: each backward overwrites the last",
        block="""
        total = model.copy()
        for j in range(k):
            total.backward(total.forward(dp.shard(x, j, k)) - dp.shard(y, j, k))
        return total
        """,
    ),
    Wrong(
        2,
        "averages the micro-batch gradients",
        old="    total.grads = sums",
        new="    for acc in sums:\n        for key in acc:\n            acc[key] /= k\n    total.grads = sums",
    ),
    Wrong(
        2,
        "works on the model it was given (no copy): the caller's model is changed",
        old="total = model.copy()",
        new="total = model",
    ),
    Wrong(
        3,
        "an oversized gradient joins the current bucket",
        old="if buckets and filled + size <= cap:",
        new="if buckets and (filled + size <= cap or size > cap):",
    ),
    Wrong(
        3,
        "first fit: a gradient goes into the first earlier bucket with room (reorders)",
        block="""
        buckets, fills = [], []
        for idx, size in enumerate(sizes):
            for b, filled in enumerate(fills):
                if filled + size <= cap:
                    buckets[b].append(idx)
                    fills[b] += size
                    break
            else:
                buckets.append([idx])
                fills.append(size)
        return buckets
        """,
    ),
    Wrong(
        4,
        "copies the results into a rebound list entry, not into the arrays (no copy back)",
        old="grads[j][...] = flat[offset : offset + n].reshape(grads[j].shape)",
        new="grads[j] = flat[offset : offset + n].reshape(grads[j].shape)",
    ),
    Wrong(
        4,
        "bucket plan over the element counts instead of the byte sizes",
        old="my_bucket_plan([g.nbytes for g in grads], cap)",
        new="my_bucket_plan([g.size for g in grads], cap)",
    ),
]
