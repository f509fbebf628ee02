"""Plausible wrong answers to lab 18; each must be rejected by its exercise's checks."""

from labs.course.wrong_answers import Wrong

WRONG = [
    # exercise 1: routes in two directions
    Wrong(
        1,
        "second direction on chunk 0",
        old="[(p - 1 - r, 1) for r in range(p)]",
        new="[(p - 1 - r, 0) for r in range(p)]",
    ),
    Wrong(
        1,
        "second direction not reversed",
        old="[(p - 1 - r, 1) for r in range(p)]",
        new="[(r, 1) for r in range(p)]",
    ),
    Wrong(
        1,
        "pairs as lists instead of tuples",
        old="[(r, 0) for r in range(p)]",
        new="[[r, 0] for r in range(p)]",
    ),
    # exercise 2: a bidirectional GPipe
    Wrong(
        2,
        "alternates blindly between the directions",
        block="""
        half = m // 2
        actions = []
        for r in range(p):
            fwd, bwd = [], []
            for i in range(half):
                fwd += [pp.Action("F", i, 0), pp.Action("F", half + i, 1)]
                bwd += [pp.Action("B", i, 0), pp.Action("B", half + i, 1)]
            actions.append(fwd + bwd)
        return actions
        """,
    ),
    Wrong(
        2,
        "first direction entirely before the second",
        block="""
        half = m // 2
        first = [pp.Action("F", i, 0) for i in range(half)]
        second = [pp.Action("F", half + j, 1) for j in range(m - half)]
        back = [pp.Action("B", i, 0) for i in range(half)]
        back += [pp.Action("B", half + j, 1) for j in range(m - half)]
        return [first + second + back for _ in range(p)]
        """,
    ),
    Wrong(
        2,
        "backwards ordered like the forwards (roles not swapped)",
        old="bwd = [((i + p - 1 - r, 0)",
        new="bwd = [((i + r, 0)",
    ),
    Wrong(
        2,
        "readiness ties go to the second direction",
        old="key=lambda t: t[0])]\n            + [a for _, a in sorted(bwd, key=lambda t: t[0])]",
        new="key=lambda t: (t[0][0], -t[0][1]))]\n            + [a for _, a in sorted(bwd, key=lambda t: (t[0][0], -t[0][1]))]",
    ),
    Wrong(
        2,
        "backwards in the reverse order of the forwards (LIFO, as GPipe drains)",
        old="+ [a for _, a in sorted(bwd, key=lambda t: t[0])]",
        new='+ [pp.Action("B", a.mb, a.chunk) for _, a in sorted(fwd, key=lambda t: t[0])][::-1]',
    ),
    Wrong(
        2,
        "both directions' readiness counted from rank 0",
        old="((j + p - 1 - r, 1)",
        new="((j + r, 1)",
    ),
    Wrong(2, "copies DualPipe's actions", block="return dualpipe(p, m).actions"),
    # exercise 3: DualPipe's bubble
    Wrong(
        3,
        "B taken as the input-gradient part only",
        old="(fb + (b_input + w) - 3 * w)",
        new="(fb + b_input - 3 * w)",
    ),
    Wrong(3, "p - 1 instead of p/2 - 1", old="(p / 2 - 1)", new="(p - 1)"),
    Wrong(3, "forward cost used for the backward", old="(b_input + w)", new="(f + w)"),
    Wrong(
        3,
        "subtracts 3 B instead of 3 W (the same only when B = W)",
        old="- 3 * w",
        new="- 3 * b_input",
    ),
]
