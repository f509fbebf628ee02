"""Adversarial wrong answers for lab 20 (distillation, low rank, sharing, clustering)."""

from labs.course.wrong_answers import Wrong

WRONG = [
    Wrong(
        1,
        "KL the wrong way round: KL(student || teacher)",
        old="""        F.log_softmax(s / temperature, dim=-1),
        F.log_softmax(t / temperature, dim=-1),""",
        new="""        F.log_softmax(t / temperature, dim=-1),
        F.log_softmax(s / temperature, dim=-1),""",
    ),
    Wrong(
        1,
        "forgets the T^2 factor",
        old="return alpha * temperature**2 * soft + (1 - alpha) * hard",
        new="return alpha * soft + (1 - alpha) * hard",
    ),
    Wrong(
        1,
        "batchmean without flattening: divides by the batch, not the number of tokens",
        old="""    soft = F.kl_div(
        F.log_softmax(s / temperature, dim=-1),
        F.log_softmax(t / temperature, dim=-1),""",
        new="""    soft = F.kl_div(
        F.log_softmax(student_logits / temperature, dim=-1),
        F.log_softmax(teacher_logits.detach() / temperature, dim=-1),""",
    ),
    Wrong(
        2,
        "all singular values go into B (A = Vh_r)",
        old="return root[:, None] * vh[:r], u[:, :r] * root",
        new="return vh[:r], u[:, :r] * s[:r]",
    ),
    Wrong(
        2,
        "rejects the full rank r = min(out, in) (< instead of <=)",
        old="if not 1 <= r <= min(w.shape):",
        new="if not 1 <= r < min(w.shape):",
    ),
    Wrong(
        2,
        "A and B swapped in shape (returns B, A)",
        old="return root[:, None] * vh[:r], u[:, :r] * root",
        new="return u[:, :r] * root, root[:, None] * vh[:r]",
    ),
    Wrong(
        3,
        "squares in the input dtype (float16 overflows above 256)",
        old="s = s.double()\n    return",
        new="return",
    ),
    Wrong(
        3,
        "discarded values from index r + 1 (off by one)",
        old="s[r:].pow(2).sum()",
        new="s[r + 1 :].pow(2).sum()",
    ),
    Wrong(
        4,
        "4 bytes per element whatever the dtype",
        old="total += p.numel() * p.element_size()",
        new="total += p.numel() * 4",
    ),
    Wrong(
        5,
        "natural log instead of log2",
        old="c * math.log2(c / n)",
        new="c * math.log(c / n)",
    ),
    Wrong(
        5,
        "fixed-width ceil(log2 k) bits per index instead of the entropy",
        old="return float(-sum(c * math.log2(c / n) for c in counts if c > 0))",
        new="return float(n * math.ceil(math.log2(k)))",
    ),
    Wrong(
        6,
        "multiplies the first factor by L instead of L^-1",
        old="a = root[:, None] * vh[:r] @ torch.linalg.inv(chol)",
        new="a = root[:, None] * vh[:r] @ chol",
    ),
    Wrong(
        6,
        "undoes L with its transpose's inverse",
        old="a = root[:, None] * vh[:r] @ torch.linalg.inv(chol)",
        new="a = root[:, None] * vh[:r] @ torch.linalg.inv(chol.T)",
    ),
    Wrong(
        6,
        "returns float64 factors",
        old="return a.float(), (u[:, :r] * root).float()",
        new="return a, u[:, :r] * root",
    ),
    Wrong(
        6,
        "whitens with the gram matrix itself instead of its Cholesky factor",
        old="chol = torch.linalg.cholesky(gram.double())",
        new="chol = gram.double()",
    ),
]
