"""Adversarial wrong answers for lab 5 (LoRA, NF4, double quantization, QLoRA)."""

from labs.course.wrong_answers import Wrong

WRONG = [
    # SLIPS the checks (at 347915e): the layer input's gradient is 0 instead of W^T g (exercise 1 never checks x.grad)
    Wrong(
        1,
        "runs the frozen base under torch.no_grad(): no gradient reaches the layer's input",
        old="return self.base(x) + self.scaling * (x @ self.lora_A.T @ self.lora_B.T)",
        new=(
            "with torch.no_grad():\n            frozen = self.base(x)\n"
            "        return frozen + self.scaling * (x @ self.lora_A.T @ self.lora_B.T)"
        ),
    ),
    Wrong(
        1,
        "freezes only the base weight, the bias still trains",
        old="""        for p in base.parameters():
            p.requires_grad_(False)""",
        new="""        base.weight.requires_grad_(False)""",
    ),
    Wrong(
        1,
        "A and B swapped: lora_A zeros, lora_B Kaiming-initialised",
        block="""
        if r <= 0 or alpha <= 0:
            raise ValueError(f"LoRA needs r > 0 and alpha > 0, got r={r}, alpha={alpha}")
        for p in base.parameters():
            p.requires_grad_(False)
        self.lora_A = nn.Parameter(torch.zeros(r, base.in_features))
        self.lora_B = nn.Parameter(torch.empty(base.out_features, r))
        nn.init.kaiming_uniform_(self.lora_B, a=math.sqrt(5))
        self.scaling = alpha / r
        """,
    ),
    Wrong(
        1,
        "Kaiming-uniform with the default a=0 (bound sqrt(6/fan_in), too wide)",
        old="nn.init.kaiming_uniform_(self.lora_A, a=math.sqrt(5))",
        new="nn.init.kaiming_uniform_(self.lora_A)",
    ),
    Wrong(
        1,
        "rejects r < 0 but lets r = 0 through (ZeroDivisionError later)",
        old="if r <= 0 or alpha <= 0:",
        new="if r < 0 or alpha <= 0:",
    ),
    Wrong(
        1,
        "scaling alpha instead of alpha / r",
        old="self.scaling = alpha / r",
        new="self.scaling = alpha",
    ),
    Wrong(
        2,
        "packs the first value of a pair in the low nibble",
        old="packed = (codes[0::2] << 4) | codes[1::2]",
        new="packed = codes[0::2] | (codes[1::2] << 4)",
    ),
    Wrong(
        2,
        "block maximum without abs (a block whose largest magnitude is negative)",
        old="absmax = blocks.abs().amax(dim=1)",
        new="absmax = blocks.amax(dim=1)",
    ),
    Wrong(
        2,
        "keeps the input dtype: absmax comes back float64 for a double weight",
        old="blocks = w.detach().float().reshape(-1, blocksize)",
        new="blocks = w.detach().reshape(-1, blocksize)",
    ),
    Wrong(
        2,
        "rounds up to the next level (bucketize against the levels, not the midpoints)",
        old="codes = torch.bucketize(normed, mids).to(torch.uint8).reshape(-1)",
        new="codes = torch.bucketize(normed, NF4_CODE).clamp(max=15).to(torch.uint8).reshape(-1)",
    ),
    Wrong(
        2,
        "divides by a zero absmax (a block of zeros becomes NaN)",
        old="normed = blocks / absmax.clamp_min(1e-30)[:, None]",
        new="normed = blocks / absmax[:, None]",
    ),
    Wrong(
        3,
        "does not subtract the mean before quantizing the absmax values",
        block="""
        offset = absmax.mean()
        centred = absmax
        pad = (-centred.numel()) % blocksize2
        blocks = torch.cat([centred, centred.new_zeros(pad)]).reshape(-1, blocksize2)
        scales = blocks.abs().amax(dim=1).clamp_min(1e-30)
        code = dynamic_code()
        mids = (code[1:] + code[:-1]) / 2
        codes = torch.bucketize(blocks / scales[:, None], mids).to(torch.uint8).reshape(-1)
        return codes, scales, offset * 0
        """,
    ),
    Wrong(
        3,
        "bits per parameter counts one fp32 scale per 256 weights, not per 256 absmax values",
        old="return 4 + 8 / blocksize + 32 / (blocksize * blocksize2)",
        new="return 4 + 8 / blocksize + 32 / blocksize2",
    ),
    Wrong(
        3,
        "dequantization forgets to add the mean back",
        old="return values.reshape(-1)[:n] + offset",
        new="return values.reshape(-1)[:n]",
    ),
    Wrong(
        4,
        "ignores compute_dtype: dequantizes and computes in float32",
        old=".to(self.compute_dtype)",
        new=".float()",
    ),
    Wrong(
        4,
        "keeps the bias as a frozen nn.Parameter instead of a buffer",
        old='self.register_buffer("bias", None if linear.bias is None else linear.bias.detach().clone())',
        new=(
            "self.bias = None if linear.bias is None else "
            "nn.Parameter(linear.bias.detach().clone(), requires_grad=False)"
        ),
    ),
    # SLIPS the checks (at 347915e): linear.bias.add_(1) afterwards moves the QLoRA bias buffer too
    Wrong(
        4,
        "the bias buffer aliases the original layer's bias (detach without clone)",
        old="linear.bias.detach().clone()",
        new="linear.bias.detach()",
    ),
    Wrong(
        4,
        "keeps a float copy of the weight besides the NF4 tensor",
        old='self.register_buffer("packed", packed)',
        new=(
            'self.register_buffer("packed", packed)\n'
            "        self.register_buffer('weight', linear.weight.detach().clone())"
        ),
    ),
    Wrong(
        4,
        "returns the result in compute_dtype instead of x's dtype",
        old="return (y + self.scaling * update).to(x.dtype)",
        new="return y + self.scaling * update",
    ),
    # "double quantization off" (double_quant=False) was dropped: exercise 4's solution now calls
    # the student's own double_quantize (exercise 3), so there is no flag to turn off; the main
    # list (tests/wrong_answers/lab05.py) has the block-size variant of that mistake
]
