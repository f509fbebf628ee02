"""Adversarial wrong answers for lab 15 (tensor parallelism)."""

from labs.course.wrong_answers import Wrong

WRONG = [
    Wrong(
        1,
        "strided blocks (every t-th row) instead of contiguous ones",
        old="return [x[:, i * k : (i + 1) * k] @ a[i * k : (i + 1) * k] for i in range(t)]",
        new="return [x[:, i::t] @ a[i::t] for i in range(t)]",
    ),
    Wrong(
        1,
        "splits a's columns (and uses all of x): the parts are column blocks of x @ a",
        old="return [x[:, i * k : (i + 1) * k] @ a[i * k : (i + 1) * k] for i in range(t)]",
        new=(
            "c = a.shape[1] // t\n"
            "    return [np.pad(x @ a[:, i * c : (i + 1) * c], ((0, 0), (i * c, a.shape[1] - (i + 1) * c)))"
            " for i in range(t)]"
        ),
    ),
    Wrong(
        2,
        "applies GeLU after the row product (to the partial outputs)",
        old="return [gelu(x @ a[:, i * k : (i + 1) * k]) @ b[i * k : (i + 1) * k] for i in range(t)]",
        new="return [gelu(x @ a[:, i * k : (i + 1) * k] @ b[i * k : (i + 1) * k]) for i in range(t)]",
    ),
    Wrong(
        2,
        "splits b by columns instead of the matching rows",
        old="return [gelu(x @ a[:, i * k : (i + 1) * k]) @ b[i * k : (i + 1) * k] for i in range(t)]",
        new=(
            "return [np.pad(gelu(x @ a) @ b[:, i * (b.shape[1] // t) : (i + 1) * (b.shape[1] // t)],"
            " ((0, 0), (i * (b.shape[1] // t), b.shape[1] - (i + 1) * (b.shape[1] // t))))"
            " for i in range(t)]"
        ),
    ),
    Wrong(
        3,
        "adds fc2's bias on every rank before the all-reduce",
        old="return G.apply(h @ self.w2.T) + self.b2",
        new="return G.apply(h @ self.w2.T + self.b2)",
    ),
    Wrong(
        4,
        "adds proj's bias before the all-reduce",
        old="return G.apply(tp.causal_attention(q, k, v, self.local_heads) @ self.wo.T) + self.bo",
        new="return G.apply(tp.causal_attention(q, k, v, self.local_heads) @ self.wo.T + self.bo)",
    ),
    Wrong(
        4,
        "applies F to q, k and v separately (three all-reduces in backward)",
        old="""        x = F.apply(x)
        q, k, v = (nn.functional.linear(x, self.qkv[i], self.qkv[i + 3]) for i in range(3))""",
        new="""        q, k, v = (nn.functional.linear(F.apply(x), self.qkv[i], self.qkv[i + 3]) for i in range(3))""",
    ),
    Wrong(
        4,
        "strided feature slices (every t-th row) instead of this rank's contiguous heads",
        old="rows = slice(rank * k, (rank + 1) * k)",
        new="rows = slice(rank, None, t)",
    ),
]
