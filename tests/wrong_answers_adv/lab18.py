"""Adversarial wrong answers for lab 18 (DualPipe)."""

from labs.course.wrong_answers import Wrong

WRONG = [
    Wrong(
        1,
        "alternates the directions micro-batch by micro-batch",
        block="""
        return [
            [(r, 0) for r in range(p)] if i % 2 == 0 else [(p - 1 - r, 1) for r in range(p)]
            for i in range(m)
        ]
        """,
    ),
    Wrong(
        2,
        "ties in readiness go to the second direction",
        old="sorted(fwd, key=lambda t: t[0])",
        new="sorted(fwd, key=lambda t: (t[0][0], -t[0][1]))",
    ),
    Wrong(
        2,
        "backwards ordered like the forwards (roles of the directions not swapped)",
        old="""        bwd = [((i + p - 1 - r, 0), pp.Action("B", i, 0)) for i in range(half)]
        bwd += [((j + r, 1), pp.Action("B", half + j, 1)) for j in range(m - half)]""",
        new="""        bwd = [((i + r, 0), pp.Action("B", i, 0)) for i in range(half)]
        bwd += [((j + p - 1 - r, 1), pp.Action("B", half + j, 1)) for j in range(m - half)]""",
    ),
    Wrong(
        2,
        "alternates blindly: F of direction 0, then of direction 1, ...",
        block="""
        half = m // 2
        actions = []
        for r in range(p):
            fwd, bwd = [], []
            for i in range(half):
                fwd += [pp.Action("F", i, 0), pp.Action("F", half + i, 1)]
                bwd += [pp.Action("B", half + i, 1), pp.Action("B", i, 0)]
            actions.append(fwd + bwd)
        return actions
        """,
    ),
    Wrong(
        3,
        "uses b_input as the full backward B",
        old="return (p / 2 - 1) * (fb + (b_input + w) - 3 * w)",
        new="return (p / 2 - 1) * (fb + b_input - 3 * w)",
    ),
    Wrong(
        3,
        "(p - 1) stages instead of (p/2 - 1)",
        old="return (p / 2 - 1) * (fb + (b_input + w) - 3 * w)",
        new="return (p - 1) * (fb + (b_input + w) - 3 * w)",
    ),
    Wrong(
        3,
        "subtracts 2W instead of 3W",
        old="return (p / 2 - 1) * (fb + (b_input + w) - 3 * w)",
        new="return (p / 2 - 1) * (fb + (b_input + w) - 2 * w)",
    ),
]
