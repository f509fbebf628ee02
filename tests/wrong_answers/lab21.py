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
    Wrong(
        2,
        "returns float masks of ones and zeros",
        old="keep = torch.ones_like(flat, dtype=torch.bool)",
        new="keep = torch.ones_like(flat)",
    ),
    Wrong(
        3,
        "returns a float mask of ones and zeros",
        old="keep = torch.zeros_like(groups, dtype=torch.bool)",
        new="keep = torch.zeros_like(groups)",
    ),
    Wrong(
        3,
        "returns an int mask of ones and zeros",
        old="return keep.view_as(w)",
        new="return keep.view_as(w).long()",
    ),
    Wrong(
        5,
        "compares scores across the whole matrix instead of per output row",
        block="""
if not 0.0 <= sparsity < 1.0:
    raise ValueError(f"sparsity must be in [0, 1), got {sparsity}")
score = w.abs() * x.norm(dim=0)
k = round(sparsity * w.numel())
mask = torch.ones_like(w, dtype=torch.bool)
if k:
    mask.view(-1)[torch.topk(score.reshape(-1), k, largest=False).indices] = False
return mask
""",
    ),
    Wrong(
        5,
        "uses the squared norm of the inputs",
        old="score = w.abs() * x.norm(dim=0)",
        new="score = w.abs() * x.pow(2).sum(dim=0)",
    ),
    Wrong(
        5,
        "uses the mean |x| instead of the L2 norm",
        old="score = w.abs() * x.norm(dim=0)",
        new="score = w.abs() * x.abs().mean(dim=0)",
    ),
    Wrong(
        5,
        "ranks signed weights",
        old="score = w.abs() * x.norm(dim=0)",
        new="score = w * x.norm(dim=0)",
    ),
    Wrong(
        5,
        "norm over the wrong axis (per token instead of per input)",
        old="score = w.abs() * x.norm(dim=0)",
        new="score = w.abs() * x.norm(dim=1).mean()",
    ),
    Wrong(
        5,
        "truncates the number of weights to prune",
        old="k = round(sparsity * w.shape[1])",
        new="k = int(sparsity * w.shape[1])",
    ),
    Wrong(
        5,
        "returns a float mask",
        old="mask = torch.ones_like(w, dtype=torch.bool)",
        new="mask = torch.ones_like(w)",
    ),
    Wrong(
        5,
        "drops the highest scores",
        old="k, dim=1, largest=False)",
        new="k, dim=1, largest=True)",
    ),
    # issue 35: ties and rounding rules
    Wrong(
        1,
        "rounds the number of weights to prune up (torch.nn.utils.prune rounds to nearest)",
        old="n_prune = round(sparsity * w.numel())",
        new="n_prune = int(torch.tensor(sparsity * w.numel()).ceil())",
    ),
    Wrong(
        1,
        "threshold at the k-th smallest magnitude: ties drop more than round(sparsity * n) weights",
        block="""
        if not 0.0 <= sparsity < 1.0:
            raise ValueError(f"sparsity must be in [0, 1), got {sparsity}")
        n_prune = round(sparsity * w.numel())
        if not n_prune:
            return torch.ones_like(w, dtype=torch.bool)
        threshold = torch.kthvalue(w.abs().reshape(-1), n_prune).values
        return w.abs() > threshold
        """,
    ),
    # adversary; slipped at 347915e: w = [-1, 2, -3] comes back as [1, 2, 3]
    Wrong(
        1,
        "takes the magnitudes in place (reshape is a view): the caller's weight loses its signs",
        block="""
        if not 0.0 <= sparsity < 1.0:
            raise ValueError(f"sparsity must be in [0, 1), got {sparsity}")
        n_prune = round(sparsity * w.numel())
        mask = torch.ones_like(w, dtype=torch.bool)
        mags = w.reshape(-1)
        mags.abs_()
        if n_prune:
            drop = torch.topk(mags, n_prune, largest=False).indices
            mask.view(-1)[drop] = False
        return mask
        """,
    ),
]
