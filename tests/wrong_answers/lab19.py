"""Plausible wrong answers to lab 19; each must be rejected by its exercise's checks."""

from labs.course.wrong_answers import Wrong

WRONG = [
    Wrong(1, "forgets the scales", old="return codes + scales", new="return codes"),
    Wrong(
        1,
        "counts only whole groups (floor)",
        old="math.ceil(n_params / group_size) * scale_bytes",
        new="(n_params // group_size) * scale_bytes",
    ),
    Wrong(
        1,
        "one group too many on exact fits",
        old="math.ceil(n_params / group_size) * scale_bytes",
        new="(n_params // group_size + 1) * scale_bytes",
    ),
    Wrong(
        1,
        "bits where bytes were asked",
        old="codes = math.ceil(n_params * bits / 8)",
        new="codes = n_params * bits",
    ),
    Wrong(
        1,
        "rounds the code bytes down",
        old="codes = math.ceil(n_params * bits / 8)",
        new="codes = n_params * bits // 8",
    ),
    Wrong(
        2,
        "no dynamic axes: the graph only accepts (1, 64)",
        old="""        dynamic_axes={"idx": {0: "batch", 1: "seq"}, "logits": {0: "batch", 1: "seq"}},
""",
        new="",
    ),
    Wrong(
        2,
        "only the batch axis is dynamic",
        old='dynamic_axes={"idx": {0: "batch", 1: "seq"}, "logits": {0: "batch", 1: "seq"}}',
        new='dynamic_axes={"idx": {0: "batch"}, "logits": {0: "batch"}}',
    ),
    Wrong(
        2,
        "a float example input (token ids must be int64)",
        old="example = torch.zeros(1, 64, dtype=torch.long)",
        new="example = torch.zeros(1, 64)",
    ),
    Wrong(
        3,
        "mean instead of median",
        old="return 1000 * median",
        new="return 1000 * sum(times) / len(times)",
    ),
    Wrong(3, "no warm-up", old="    for _ in range(warmup):\n        fn()\n", new=""),
    Wrong(
        3,
        "times all repeats at once and forgets to divide",
        block="""
for _ in range(warmup):
    fn()
start = clock()
for _ in range(repeats):
    fn()
return 1000 * (clock() - start)
""",
    ),
    Wrong(
        3,
        "upper middle element for an even count",
        old="median = times[mid] if len(times) % 2 else (times[mid - 1] + times[mid]) / 2",
        new="median = times[mid]",
    ),
    Wrong(
        4,
        "strict limits",
        old='r["kb"] <= max_kb and r["ms"] <= max_ms',
        new='r["kb"] < max_kb and r["ms"] < max_ms',
    ),
    Wrong(
        4,
        "ignores the latency budget",
        old='r["kb"] <= max_kb and r["ms"] <= max_ms',
        new='r["kb"] <= max_kb',
    ),
    Wrong(
        4,
        "ships the smallest file instead of the best model",
        old='key=lambda n: results[n]["ppl"]',
        new='key=lambda n: results[n]["kb"]',
    ),
    Wrong(
        5,
        "high nibble first",
        old="return u[..., 0::2] | (u[..., 1::2] << 4)",
        new="return (u[..., 0::2] << 4) | u[..., 1::2]",
    ),
    Wrong(
        5,
        "drops the last code of an odd row instead of padding",
        old="        u = torch.nn.functional.pad(u, (0, 1))",
        new="        u = u[..., :-1]",
    ),
    Wrong(
        5,
        "casts negative codes to uint8 without masking the nibble",
        old="u = (q.to(torch.int16) & 0xF).to(torch.uint8)",
        new="u = q.to(torch.uint8)",
    ),
    Wrong(
        5,
        "no range check",
        old='        raise ValueError(f"codes must lie in -8..7, got {int(q.min())}..{int(q.max())}")',
        new="        pass",
    ),
    Wrong(
        5,
        "offset binary (q + 8) instead of two's complement",
        old="u = (q.to(torch.int16) & 0xF).to(torch.uint8)",
        new="u = (q.to(torch.int16) + 8).to(torch.uint8)",
    ),
    # adversary; slipped at 347915e: pack_int4(torch.zeros(3, 0, dtype=torch.int8)) raises RuntimeError
    Wrong(
        5,
        "min/max without the empty-tensor guard: an empty tensor (n = 0) raises",
        old="if q.numel() and (int(q.min()) < -8 or int(q.max()) > 7):",
        new="if int(q.min()) < -8 or int(q.max()) > 7:",
    ),
]
