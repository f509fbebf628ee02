"""Adversarial wrong answers for lab 21 (pruning)."""

from labs.course.wrong_answers import Wrong

WRONG = [
    Wrong(
        1,
        "ranks the signed values instead of the magnitudes",
        old="drop = torch.topk(w.abs().reshape(-1), n_prune, largest=False).indices",
        new="drop = torch.topk(w.reshape(-1), n_prune, largest=False).indices",
    ),
    Wrong(
        1,
        "accepts sparsity = 1 (<= 1 instead of < 1)",
        old="if not 0.0 <= sparsity < 1.0:",
        new="if not 0.0 <= sparsity <= 1.0:",
    ),
    Wrong(
        2,
        "ranks normalised magnitudes (|w| / max|w| of the layer)",
        old="flat = torch.cat([w.abs().reshape(-1) for w in weights.values()])",
        new="flat = torch.cat([(w.abs() / w.abs().max()).reshape(-1) for w in weights.values()])",
    ),
    Wrong(
        3,
        "groups of m down the columns instead of along the rows",
        old="groups = w.abs().reshape(-1, m)",
        new="groups = w.abs().T.reshape(-1, m)",
    ),
    Wrong(
        3,
        "checks the total size instead of the number of columns (groups cross rows)",
        old="if w.shape[1] % m:",
        new="if w.numel() % m:",
    ),
    Wrong(
        4,
        "the new down_proj keeps its default bias",
        old="    new_down.bias.copy_(down.bias)\n",
        new="",
    ),
    Wrong(
        4,
        "L1 norms instead of L2",
        old="score = up.weight.norm(dim=1) * down.weight.norm(dim=0)",
        new="score = up.weight.norm(p=1, dim=1) * down.weight.norm(p=1, dim=0)",
    ),
]
