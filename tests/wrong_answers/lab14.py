"""Plausible wrong answers to lab 14; each must be rejected by its exercise's checks."""

from labs.course.wrong_answers import Wrong

WRONG = [
    # exercise 1: a pipeline with send and receive
    Wrong(
        1,
        "sends the output gradient back instead of the input gradient",
        old="dist.send(grad_in, dst=self.rank - 1)",
        new="dist.send(grad, dst=self.rank - 1)",
    ),
    Wrong(
        1,
        "every rank runs its layer on the global input (right on rank 0 only)",
        old="out = local.forward(x, layers=layer)",
        new="out = local.forward(i, layers=layer)",
    ),
    Wrong(1, "hard-coded for four ranks", old="last = self.world_size - 1", new="last = 3"),
    # exercise 2: GPipe
    Wrong(
        2,
        "one micro-batch at a time (forward then backward)",
        block='return [[pp.Action(kind, i) for i in range(m) for kind in "FB"] for _ in range(p)]',
    ),
    Wrong(2, "hard-coded for four ranks", old="for _ in range(p)", new="for _ in range(4)"),
    Wrong(
        2,
        "backwards of the odd micro-batches only",
        old='[pp.Action("B", i) for i in range(m)]',
        new='[pp.Action("B", i) for i in range(m) if i % 2 or m == 1]',
    ),
    # exercise 3: 1F1B
    Wrong(
        3,
        "warm-up not capped at m (only right when m >= p - 1)",
        old="warm = min(p - 1 - r, m)",
        new="warm = p - 1 - r",
    ),
    Wrong(
        3,
        "one warm-up forward too many",
        old="warm = min(p - 1 - r, m)",
        new="warm = min(p - r, m)",
    ),
    Wrong(
        3,
        "backward before forward in the steady state",
        old='seq += [pp.Action("F", warm + i), pp.Action("B", i)]',
        new='seq += [pp.Action("B", i), pp.Action("F", warm + i)]',
    ),
    # exercise 4: bubble and peak stash of executed schedules
    Wrong(
        4,
        "the gradient verification is skipped",
        block="""
        stages = make_stages(schedule.num_stages)
        xs, ys = make_batches(schedule.m)
        result = run_schedule(schedule, stages, xs, ys)
        return pp.bubble_fraction(result.timeline), max(result.peak_stash)
        """,
    ),
    Wrong(4, "peak stash of rank 0 only", old="max(result.peak_stash)", new="result.peak_stash[0]"),
    Wrong(
        4,
        "bubble from the 1F1B formula instead of the executed timeline",
        old="pp.bubble_fraction(result.timeline)",
        new="(schedule.p - 1) / (schedule.m + schedule.p - 1)",
    ),
    Wrong(
        4,
        "verifies only the first stage",
        old="zip(result.grads, ref)",
        new="zip(result.grads[:1], ref[:1])",
    ),
    Wrong(
        4,
        "one stage per rank (ignores chunks)",
        old="make_stages(schedule.num_stages)",
        new="make_stages(schedule.p)",
    ),
    # exercise 5: formulas
    Wrong(
        5,
        "divides the whole 1F1B bubble by v",
        old="(p - 1) / (v * m + p - 1)",
        new="(p - 1) / (m + p - 1) / v",
    ),
    Wrong(
        5,
        "v multiplies the bubble",
        old="(p - 1) / (v * m + p - 1)",
        new="(p - 1) / (m + v * (p - 1))",
    ),
    Wrong(5, "W added instead of subtracted", old="(t_f + t_b - t_w)", new="(t_f + t_b + t_w)"),
    Wrong(
        5,
        "subtracts W once per rank only",
        old="(p - 1) * (t_f + t_b - t_w)",
        new="(p - 1) * (t_f + t_b) - t_w",
    ),
    # adversary; slipped at 347915e: executor and simulator agree on every checked schedule, so no value can tell them apart
    Wrong(
        4,
        "reports the simulator's bubble and stash instead of the executed run's",
        old="return pp.bubble_fraction(result.timeline), max(result.peak_stash)",
        new="sim = pp.simulate(schedule)\n    return pp.bubble_fraction(sim), max(pp.peak_stash(sim))",
    ),
]
