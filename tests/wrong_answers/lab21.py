"""Plausible wrong answers to lab 21; each must be rejected by its exercise's checks."""

from labs.course.wrong_answers import Wrong

WRONG = [
    Wrong(
        1,
        "ranks signed weights instead of magnitudes",
        old="torch.topk(w.abs().reshape(-1), n_prune, largest=False)",
        new="torch.topk(w.reshape(-1), n_prune, largest=False)",
    ),
    Wrong(
        1,
        "truncates the number of weights to prune",
        old="n_prune = round(sparsity * w.numel())",
        new="n_prune = int(sparsity * w.numel())",
    ),
    Wrong(
        1,
        "does not validate the sparsity",
        old='raise ValueError(f"sparsity must be in [0, 1), got {sparsity}")',
        new="pass",
    ),
    Wrong(
        1, "drops the largest weights", old="n_prune, largest=False)", new="n_prune, largest=True)"
    ),
    Wrong(
        2,
        "prunes each layer separately instead of globally",
        block="""
masks = {}
for name, w in weights.items():
    keep = torch.ones(w.numel(), dtype=torch.bool)
    n_prune = round(sparsity * w.numel())
    if n_prune:
        keep[torch.topk(w.abs().reshape(-1), n_prune, largest=False).indices] = False
    masks[name] = keep.view_as(w)
return masks
""",
    ),
    Wrong(
        2,
        "ranks signed weights globally",
        old="flat = torch.cat([w.abs().reshape(-1) for w in weights.values()])",
        new="flat = torch.cat([w.reshape(-1) for w in weights.values()])",
    ),
    Wrong(
        2,
        "cuts the global mask without advancing the offset",
        old="        start += w.numel()\n",
        new="\n",
    ),
    Wrong(
        3,
        "groups of m run down the columns instead of along a row",
        block="""
if w.shape[1] % m:
    raise ValueError(f"the number of columns {w.shape[1]} is not a multiple of m={m}")
groups = w.abs().T.reshape(-1, m)
keep = torch.zeros_like(groups, dtype=torch.bool)
keep.scatter_(1, groups.topk(n, dim=1).indices, True)
return keep.view(w.shape[1], w.shape[0]).T
""",
    ),
    Wrong(
        3,
        "keeps the smallest weights of each group",
        old="groups.topk(n, dim=1)",
        new="groups.topk(n, dim=1, largest=False)",
    ),
    Wrong(
        3,
        "compares signed values, not magnitudes",
        old="groups = w.abs().reshape(-1, m)",
        new="groups = w.reshape(-1, m)",
    ),
    Wrong(
        4,
        "scores channels by the up_proj row only",
        old="score = up.weight.norm(dim=1) * down.weight.norm(dim=0)",
        new="score = up.weight.norm(dim=1)",
    ),
    Wrong(
        4,
        "forgets the up_proj bias of the kept channels",
        old="    new_up.bias.copy_(up.bias[idx])\n",
        new="    new_up.bias.zero_()\n",
    ),
    Wrong(
        4,
        "keeps channels in score order instead of their original order",
        old="idx = score.topk(keep).indices.sort().values",
        new="idx = score.topk(keep).indices",
    ),
]
