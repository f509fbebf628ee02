"""Plausible wrong answers to lab 15; each must be rejected by its exercise's checks."""

from labs.course.wrong_answers import Wrong

WRONG = [
    # exercise 1: row-parallel product
    Wrong(1, "every rank returns x @ a / t", block="return [x @ a / t for _ in range(t)]"),
    Wrong(1, "hard-coded block size for t=2", old="k = a.shape[0] // t", new="k = 3"),
    Wrong(
        1,
        "splits a by columns (column-parallel)",
        block="""
        k = a.shape[1] // t
        return [x @ a[:, i * k : (i + 1) * k] for i in range(t)]
        """,
    ),
    Wrong(
        1,
        "round-robin rows (a[i::t]) instead of contiguous blocks: the sum is right",
        block="return [x[:, i::t] @ a[i::t] for i in range(t)]",
    ),
    # exercise 2: tensor-parallel MLP in numpy
    Wrong(
        2,
        "GeLU after the row-parallel product",
        old="gelu(x @ a[:, i * k : (i + 1) * k]) @ b[i * k : (i + 1) * k]",
        new="gelu(x @ a[:, i * k : (i + 1) * k] @ b[i * k : (i + 1) * k])",
    ),
    Wrong(2, "every rank returns the full output / t", block="return [gelu(x @ a) @ b / t] * t"),
    Wrong(
        2, "hard-coded block size for 12 hidden units", old="k = a.shape[1] // t", new="k = 12 // t"
    ),
    Wrong(
        2,
        "round-robin hidden units (a[:, i::t], b[i::t]): the sum is right",
        block="return [gelu(x @ a[:, i::t]) @ b[i::t] for i in range(t)]",
    ),
    # exercise 3: f, g and the tensor-parallel MLP
    Wrong(3, "f's backward does not all-reduce", block="return grad", part=1),
    Wrong(
        3,
        "g's backward all-reduces as well",
        block="""
        grad = grad.clone()
        dist.all_reduce(grad)
        return grad
        """,
        part=3,
    ),
    Wrong(
        3,
        "fc2's bias added on every rank before the sum",
        old="G.apply(h @ self.w2.T) + self.b2",
        new="G.apply(h @ self.w2.T + self.b2)",
    ),
    Wrong(
        3,
        "hard-coded for 4 ranks",
        old="k = full.fc1.out_features // t",
        new="k = full.fc1.out_features // 4",
    ),
    Wrong(
        3,
        "every rank takes the first columns of fc2",
        old="[:, rank * k : (rank + 1) * k]",
        new="[:, :k]",
    ),
    Wrong(
        3,
        "f's backward all-reduces autograd's gradient in place (no clone)",
        block="""
        dist.all_reduce(grad)
        return grad
        """,
        part=1,
    ),
    Wrong(
        3,
        "g's forward all-reduces its input in place (no clone)",
        block="""
        dist.all_reduce(x)
        return x
        """,
        part=2,
    ),
    Wrong(
        3,
        "fc2's bias divided by t and added on every rank before the sum: the output is right",
        old="G.apply(h @ self.w2.T) + self.b2",
        new="G.apply(h @ self.w2.T + self.b2 / dist.get_world_size())",
    ),
    Wrong(
        3,
        "assumes 4 d hidden units",
        old="k = full.fc1.out_features // t",
        new="k = 4 * full.fc1.in_features // t",
    ),
    # exercise 4: tensor-parallel self-attention
    Wrong(4, "no f on the input", old="x = F.apply(x)", new="x = x"),
    Wrong(
        4,
        "proj's bias added on every rank before the sum",
        old="@ self.wo.T) + self.bo",
        new="@ self.wo.T + self.bo)",
    ),
    Wrong(
        4,
        "all heads on every rank",
        old="self.local_heads = full.heads // t",
        new="self.local_heads = full.heads",
    ),
    Wrong(
        4,
        "hard-coded for 4 ranks",
        old="k = full.q.out_features // t",
        new="k = full.q.out_features // 4",
    ),
    Wrong(
        4,
        "proj's bias divided by t and added on every rank before the sum: the output is right",
        old="@ self.wo.T) + self.bo",
        new="@ self.wo.T + self.bo / dist.get_world_size())",
    ),
]
