"""Plausible wrong answers to lab 20; each must be rejected by its exercise's checks."""

from labs.course.wrong_answers import Wrong

WRONG = [
    Wrong(
        1,
        "distillation loss without the T^2 factor",
        old="alpha * temperature**2 * soft",
        new="alpha * soft",
    ),
    Wrong(
        1,
        "KL divergence in the wrong direction (student || teacher)",
        old="soft = F.kl_div(",
        new="soft = (lambda a, b, **kw: F.kl_div(b, a, **kw))(",
    ),
    Wrong(
        1,
        "averages the KL over every logit instead of over tokens",
        old='reduction="batchmean"',
        new='reduction="mean"',
    ),
    Wrong(
        1,
        "lets gradients flow into the teacher",
        old="t = teacher_logits.detach().reshape(-1, v)",
        new="t = teacher_logits.reshape(-1, v)",
    ),
    Wrong(
        1,
        "softens the student only",
        old="F.log_softmax(t / temperature, dim=-1)",
        new="F.log_softmax(t, dim=-1)",
    ),
    Wrong(2, "forgets the singular values", old="root = s[:r].sqrt()", new="root = torch.ones(r)"),
    Wrong(
        2,
        "keeps the smallest singular values",
        old="return root[:, None] * vh[:r], u[:, :r] * root",
        new="return s[-r:].sqrt()[:, None] * vh[-r:], u[:, -r:] * s[-r:].sqrt()",
    ),
    Wrong(
        2,
        "puts all singular values into A",
        old="return root[:, None] * vh[:r], u[:, :r] * root",
        new="return s[:r, None] * vh[:r], u[:, :r]",
    ),
    Wrong(
        2,
        "no check of the rank",
        old='raise ValueError(f"rank must be in 1..{min(w.shape)}, got {r}")',
        new="pass",
    ),
    Wrong(
        3,
        "sums singular values instead of their squares",
        old="return float((s[r:].pow(2).sum() / s.pow(2).sum()).sqrt())",
        new="return float(s[r:].sum() / s.sum())",
    ),
    Wrong(3, "off by one in the discarded values", old="s[r:].pow(2)", new="s[r + 1 :].pow(2)"),
    Wrong(
        3,
        "treats the values as ascending: discards the largest",
        old="s[r:].pow(2).sum()",
        new="s[: len(s) - r].pow(2).sum()",
    ),
    Wrong(
        3,
        "returns the kept share instead of the lost one",
        old="s[r:].pow(2).sum()",
        new="s[:r].pow(2).sum()",
    ),
    Wrong(3, "squares in the input dtype (float16 overflows)", old="    s = s.double()\n", new=""),
    Wrong(
        3,
        "returns a tensor, not a float",
        old="return float((s[r:].pow(2).sum() / s.pow(2).sum()).sqrt())",
        new="return (s[r:].pow(2).sum() / s.pow(2).sum()).sqrt()",
    ),
    Wrong(
        3,
        "forgets the square root",
        old="return float((s[r:].pow(2).sum() / s.pow(2).sum()).sqrt())",
        new="return float(s[r:].pow(2).sum() / s.pow(2).sum())",
    ),
    Wrong(
        4,
        "counts the state dict, where shared tensors appear under every name",
        block="return sum(t.numel() * t.element_size() for t in model.state_dict().values())",
    ),
    Wrong(
        4,
        "assumes 4 bytes per parameter",
        block="return 4 * sum(p.numel() for p in model.parameters())",
    ),
    Wrong(
        4,
        "counts duplicates",
        block="return sum(p.numel() * p.element_size() for _, p in model.named_parameters(remove_duplicate=False))",
    ),
    Wrong(
        5,
        "fixed-width bits instead of the entropy",
        block="return float(index.numel() * math.ceil(math.log2(k)))",
    ),
    Wrong(
        5,
        "natural logarithm (nats, not bits)",
        old="math.log2(c / n)",
        new="math.log(c / n)",
    ),
    Wrong(
        5,
        "bits per weight instead of the total",
        old="return float(-sum(c * math.log2(c / n) for c in counts if c > 0))",
        new="return float(-sum(c / n * math.log2(c / n) for c in counts if c > 0))",
    ),
    Wrong(
        5,
        "counts without minlength and in the index dtype (uint8 overflows)",
        old="counts = torch.bincount(index.reshape(-1).long(), minlength=k).tolist()",
        new="counts = torch.unique(index, return_counts=True)[1].to(index.dtype).tolist()",
    ),
    Wrong(
        5,
        "divides by k instead of the number of weights",
        old="math.log2(c / n)",
        new="math.log2(c / k)",
    ),
    Wrong(
        6,
        "whitens with L transposed",
        old="w.double() @ chol, full_matrices=False",
        new="w.double() @ chol.T, full_matrices=False",
    ),
    Wrong(
        6,
        "forgets to undo the whitening",
        old="a = root[:, None] * vh[:r] @ torch.linalg.inv(chol)",
        new="a = root[:, None] * vh[:r]",
    ),
    Wrong(
        6,
        "plain SVD: ignores the inputs",
        old="chol = torch.linalg.cholesky(gram.double())",
        new="chol = torch.eye(gram.shape[0], dtype=torch.float64)",
    ),
    Wrong(
        6,
        "diagonal scaling (ASVD) instead of whitening",
        old="chol = torch.linalg.cholesky(gram.double())",
        new="chol = torch.diag(gram.double().diagonal().sqrt())",
    ),
    Wrong(
        6,
        "all singular values into the first factor",
        old="return a.float(), (u[:, :r] * root).float()",
        new="return (a * root[:, None]).float(), u[:, :r].float()",
    ),
    # issue 35: mixed dtypes
    Wrong(
        4,
        "multiplies every count by the first parameter's element size",
        block="""
        seen, total = set(), 0
        size = next(model.parameters()).element_size()
        for p in model.parameters():
            if id(p) not in seen:
                seen.add(id(p))
                total += p.numel() * size
        return total
        """,
    ),
    # adversary; slipped at 347915e: no checked model has buffers; note labs.compress.sharing.unique_bytes counts buffers too (BatchNorm: 152 vs 112)
    Wrong(
        4,
        "counts buffers too",
        block="""
        seen, total = set(), 0
        for p in [*model.parameters(), *model.buffers()]:
            if id(p) not in seen:
                seen.add(id(p))
                total += p.numel() * p.element_size()
        return total
        """,
    ),
]
