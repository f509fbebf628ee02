"""Adversarial wrong answers for lab 5 (LoRA, NF4, double quantization, QLoRA)."""

from labs.course.wrong_answers import Wrong

WRONG = [
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
        "rejects r < 0 but lets r = 0 through (ZeroDivisionError later)",
        old="if r <= 0 or alpha <= 0:",
        new="if r < 0 or alpha <= 0:",
    ),
    Wrong(
        2,
        "packs the first value of a pair in the low nibble",
        old="packed = (codes[0::2] << 4) | codes[1::2]",
        new="packed = codes[0::2] | (codes[1::2] << 4)",
    ),
    Wrong(
        2,
        "rounds up to the next level (bucketize against the levels, not the midpoints)",
        old="codes = torch.bucketize(normed, mids).to(torch.uint8).reshape(-1)",
        new="codes = torch.bucketize(normed, NF4_CODE).clamp(max=15).to(torch.uint8).reshape(-1)",
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
    Wrong(
        4,
        "keeps a float copy of the weight besides the NF4 tensor",
        old='self.register_buffer("packed", packed)',
        new=(
            'self.register_buffer("packed", packed)\n'
            "        self.register_buffer('weight', linear.weight.detach().clone())"
        ),
    ),
    # "double quantization off" (double_quant=False) was dropped: exercise 4's solution now calls
    # the student's own double_quantize (exercise 3), so there is no flag to turn off; the main
    # list (tests/wrong_answers/lab05.py) has the block-size variant of that mistake
]
