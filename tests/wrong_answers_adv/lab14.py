"""Adversarial wrong answers for lab 14 (pipeline schedules)."""

from labs.course.wrong_answers import Wrong

WRONG = [
    Wrong(
        1,
        "the last rank uses o - out as the loss gradient",
        old="grad = out - o",
        new="grad = o - out",
    ),
    Wrong(
        1,
        "returns every layer's gradients instead of this rank's",
        old="return local.grads[self.rank]",
        new="return local.grads",
    ),
    Wrong(
        1,
        "the gradient of the mean squared error, (out - o) / batch, instead of half the sum",
        old="grad = out - o",
        new="grad = (out - o) / len(o)",
    ),
    Wrong(
        2,
        "one micro-batch too few (range(m - 1))",
        block="""
        return [
            [pp.Action("F", i) for i in range(m - 1)] + [pp.Action("B", i) for i in range(m - 1)]
            for _ in range(p)
        ]
        """,
    ),
    Wrong(
        3,
        "every rank warms up with p - 1 forwards",
        old="warm = min(p - 1 - r, m)",
        new="warm = min(p - 1, m)",
    ),
    Wrong(
        4,
        "verifies only the first stage's gradients",
        old="for got, want in zip(result.grads, ref):",
        new="for got, want in zip(result.grads[:1], ref[:1]):",
    ),
    Wrong(
        4,
        "the mean over ranks of the peak stash instead of the max",
        old="max(result.peak_stash)",
        new="round(sum(result.peak_stash) / len(result.peak_stash))",
    ),
    Wrong(
        5,
        "interleaving divides the whole bubble fraction by v",
        old="return (p - 1) / (v * m + p - 1)",
        new="return (p - 1) / (m + p - 1) / v",
    ),
    Wrong(
        5,
        "ZB-H1 idle time without the W credit",
        old="return (p - 1) * (t_f + t_b - t_w)",
        new="return (p - 1) * (t_f + t_b)",
    ),
    Wrong(
        5,
        "ZB-H1 idle time counts the full backward B + W",
        old="return (p - 1) * (t_f + t_b - t_w)",
        new="return (p - 1) * (t_f + t_b + t_w) - t_w",
    ),
]
