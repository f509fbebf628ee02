"""Adversarial wrong answers for lab 19 (on-device: sizes, ONNX, latency, choice, int4 packing)."""

from labs.course.wrong_answers import Wrong

WRONG = [
    Wrong(
        1,
        "returns a float (true division, no rounding)",
        block="""
        codes = n_params * bits / 8
        scales = n_params / group_size * scale_bytes if group_size else 0
        return codes + scales
        """,
    ),
    Wrong(
        1,
        "scale bytes counted as bits (scale_bytes / 8 per group)",
        old="math.ceil(n_params / group_size) * scale_bytes",
        new="math.ceil(math.ceil(n_params / group_size) * scale_bytes / 8)",
    ),
    Wrong(
        2,
        "example input in int32 (the graph then expects int32 ids)",
        old="example = torch.zeros(1, 64, dtype=torch.long)",
        new="example = torch.zeros(1, 64, dtype=torch.int32)",
    ),
    Wrong(
        2,
        "input named 'input_ids' instead of 'idx'",
        old='input_names=["idx"]',
        new='input_names=["input_ids"]',
    ),
    Wrong(
        3,
        "returns seconds, not milliseconds",
        old="return 1000 * median",
        new="return median",
    ),
    Wrong(
        3,
        "the mean instead of the median",
        old="""    times.sort()
    mid = len(times) // 2
    median = times[mid] if len(times) % 2 else (times[mid - 1] + times[mid]) / 2""",
        new="""    median = sum(times) / len(times)""",
    ),
    Wrong(
        3,
        "median without sorting the times",
        old="    times.sort()\n",
        new="",
    ),
    Wrong(
        3,
        "reads time.perf_counter instead of the clock it was given",
        old="start = clock()\n        fn()\n        times.append(clock() - start)",
        new="start = time.perf_counter()\n        fn()\n        times.append(time.perf_counter() - start)",
    ),
    Wrong(
        4,
        "picks the smallest file among those that fit, not the best perplexity",
        old='min(fits, key=lambda n: results[n]["ppl"])',
        new='min(fits, key=lambda n: results[n]["kb"])',
    ),
    Wrong(
        4,
        "returns an empty string when nothing fits",
        old="if fits else None",
        new='if fits else ""',
    ),
    Wrong(
        5,
        "range check on |q| > 8 lets a code of 8 through",
        old="if q.numel() and (int(q.min()) < -8 or int(q.max()) > 7):",
        new="if q.numel() and int(q.abs().max()) > 8:",
    ),
    Wrong(
        5,
        "packs the flattened tensor (pairs cross row boundaries, shape lost)",
        old="""    if u.shape[-1] % 2:
        u = torch.nn.functional.pad(u, (0, 1))""",
        new="""    u = u.reshape(-1)
    if u.shape[-1] % 2:
        u = torch.nn.functional.pad(u, (0, 1))""",
    ),
]
