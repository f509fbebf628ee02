"""Plausible wrong answers to lab 05; each must be rejected by its exercise's checks."""

from labs.course.wrong_answers import Wrong

WRONG = [
    Wrong(
        1,
        "scaling alpha instead of alpha / r",
        old="self.scaling = alpha / r",
        new="self.scaling = alpha",
    ),
    Wrong(1, "scaling r / alpha", old="self.scaling = alpha / r", new="self.scaling = r / alpha"),
    Wrong(
        1,
        "B initialised randomly, A to zeros",
        old="self.lora_B = nn.Parameter(torch.zeros(base.out_features, r, device=base.weight.device))",
        new="self.lora_B = nn.Parameter(torch.randn(base.out_features, r, device=base.weight.device) * 0.01)",
    ),
    Wrong(1, "forgets to freeze the base layer", old="p.requires_grad_(False)", new="pass"),
    Wrong(1, "only rejects r == 0", old="if r <= 0 or alpha <= 0:", new="if r == 0 or alpha == 0:"),
    Wrong(
        1,
        "torch.mm, so only 2-D inputs work",
        block="return self.base(x) + self.scaling * torch.mm(torch.mm(x, self.lora_A.T), self.lora_B.T)",
        part=1,
    ),
    Wrong(
        1,
        "kaiming_uniform_ with a=5 instead of a=sqrt(5)",
        old="nn.init.kaiming_uniform_(self.lora_A, a=math.sqrt(5))",
        new="nn.init.kaiming_uniform_(self.lora_A, a=5)",
    ),
    Wrong(
        1,
        "kaiming_uniform_ with its default a=0 (bound sqrt(6 / in_features))",
        old="nn.init.kaiming_uniform_(self.lora_A, a=math.sqrt(5))",
        new="nn.init.kaiming_uniform_(self.lora_A)",
    ),
    Wrong(
        1,
        "integer division alpha // r",
        old="self.scaling = alpha / r",
        new="self.scaling = alpha // r",
    ),
    Wrong(
        1,
        "accepts r == 0 and alpha == 0 (< instead of <=)",
        old="if r <= 0 or alpha <= 0:",
        new="if r < 0 or alpha < 0:",
    ),
    Wrong(
        1,
        "freezes the weight but not the bias",
        old="for p in base.parameters():",
        new="for p in [base.weight]:",
    ),
    Wrong(
        2,
        "first code in the low nibble",
        old="packed = (codes[0::2] << 4) | codes[1::2]",
        new="packed = (codes[1::2] << 4) | codes[0::2]",
    ),
    Wrong(
        2,
        "block maximum instead of absolute maximum",
        old="absmax = blocks.abs().amax(dim=1)",
        new="absmax = blocks.amax(dim=1)",
    ),
    Wrong(
        2,
        "rounds down to a level instead of to the nearest",
        old="torch.bucketize(normed, mids)",
        new="(torch.bucketize(normed, NF4_CODE, right=True) - 1).clamp(0, 15)",
    ),
    Wrong(
        2,
        "absmax kept in the input's dtype",
        old="blocks = w.detach().float().reshape(-1, blocksize)",
        new="blocks = w.detach().reshape(-1, blocksize)",
    ),
    Wrong(
        2,
        "dequantize hard-coded for blocks of 64",
        old="reshape(-1, blocksize) * absmax[:, None]",
        new="reshape(-1, 64) * absmax[:, None]",
    ),
    Wrong(
        2,
        "divides a block of zeros by its zero absmax (NaN codes)",
        old="normed = blocks / absmax.clamp_min(1e-30)[:, None]",
        new="normed = blocks / absmax[:, None]",
    ),
    Wrong(
        3, "no mean subtracted", old="offset = absmax.mean()", new="offset = absmax.new_zeros(())"
    ),
    Wrong(
        3,
        "drops the partial last block instead of padding it",
        old="blocks = torch.cat([centred, centred.new_zeros(pad)]).reshape(-1, blocksize2)",
        new="blocks = centred[: centred.numel() - centred.numel() % blocksize2].reshape(-1, blocksize2)",
    ),
    Wrong(
        3,
        "ignores the second-level scales in the bit count",
        block="return 4 + 8 / blocksize",
        part=2,
    ),
    Wrong(
        3,
        "one 32-bit scale per blocksize2 weights",
        block="return 4 + 8 / blocksize + 32 / blocksize2",
        part=2,
    ),
    Wrong(
        3,
        "scales from the uncentred absmax values",
        old="scales = blocks.abs().amax(dim=1).clamp_min(1e-30)",
        new="scales = (blocks + offset).abs().amax(dim=1).clamp_min(1e-30)",
    ),
    Wrong(
        3,
        "pads a whole extra block when the count is a multiple of 256",
        old="pad = (-centred.numel()) % blocksize2",
        new="pad = blocksize2 - centred.numel() % blocksize2",
    ),
    Wrong(
        3,
        "double_dequantize keeps the padding",
        old="return values.reshape(-1)[:n] + offset",
        new="return values.reshape(-1) + offset",
    ),
    Wrong(
        4,
        "keeps the float weight as well",
        old='self.register_buffer("packed", packed)',
        new='self.register_buffer("packed", packed)\n        self.weight = nn.Parameter(linear.weight.detach().clone(), requires_grad=False)',
    ),
    Wrong(
        4,
        "trainable bias",
        old='self.register_buffer("bias", None if linear.bias is None else linear.bias.detach().clone())',
        new="self.bias = None if linear.bias is None else nn.Parameter(linear.bias.detach().clone())",
    ),
    Wrong(
        4,
        "returns the compute dtype",
        old="return (y + self.scaling * update).to(x.dtype)",
        new="return y + self.scaling * update",
    ),
    Wrong(
        4,
        "always computes in float32",
        block="""
        n_blocks = self.packed.numel() * 2 // 64
        absmax = double_dequantize(
            self.absmax_codes, self.absmax_scales, self.absmax_offset, n_blocks
        )
        w = nf4_dequantize_blocks(self.packed, absmax, self.shape)
        xc = x.float()
        y = F.linear(xc, w, self.bias)
        update = (xc @ self.lora_A.T) @ self.lora_B.T
        return (y + self.scaling * update).to(x.dtype)
        """,
        part=1,
    ),
    Wrong(
        4,
        "scaling alpha instead of alpha / r",
        old="self.scaling = alpha / r",
        new="self.scaling = alpha",
    ),
    Wrong(
        4,
        "double-quantizes the absmax in blocks of 64 (the NF4 block size) instead of 256",
        old="codes, scales, offset = double_quantize(absmax)",
        new="codes, scales, offset = double_quantize(absmax, 64)",
    ),
    Wrong(
        4,
        "bias as a frozen parameter instead of a buffer",
        old='self.register_buffer("bias", None if linear.bias is None else linear.bias.detach().clone())',
        new="self.bias = nn.Parameter(linear.bias.detach().clone(), requires_grad=False)",
    ),
    Wrong(
        4,
        "assumes the linear layer has a bias",
        old='self.register_buffer("bias", None if linear.bias is None else linear.bias.detach().clone())',
        new='self.register_buffer("bias", linear.bias.detach().clone())',
    ),
    Wrong(
        4,
        "integer division alpha // r",
        old="self.scaling = alpha / r",
        new="self.scaling = alpha // r",
    ),
    Wrong(
        4,
        "keeps a dequantized float copy as a plain attribute",
        old='self.register_buffer("packed", packed)',
        new='self.register_buffer("packed", packed)\n        self.weight = nf4_dequantize_blocks(packed, absmax, self.shape)',
    ),
    # adversary; slipped at 347915e: the layer input's gradient is 0 instead of W^T g (exercise 1 never checks x.grad)
    Wrong(
        1,
        "runs the frozen base under torch.no_grad(): no gradient reaches the layer's input",
        old="return self.base(x) + self.scaling * (x @ self.lora_A.T @ self.lora_B.T)",
        new=(
            "with torch.no_grad():\n            frozen = self.base(x)\n"
            "        return frozen + self.scaling * (x @ self.lora_A.T @ self.lora_B.T)"
        ),
    ),
    # adversary; slipped at 347915e: linear.bias.add_(1) afterwards moves the QLoRA bias buffer too
    Wrong(
        4,
        "the bias buffer aliases the original layer's bias (detach without clone)",
        old="linear.bias.detach().clone()",
        new="linear.bias.detach()",
    ),
]
