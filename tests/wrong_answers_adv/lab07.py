"""Adversarial wrong answers for lab 7 (prompting, evaluation, voting, constrained decoding)."""

from labs.course.wrong_answers import Wrong

WRONG = [
    Wrong(
        1,
        "writes the colon even without an instruction",
        old='head = f"{instruction}{fmt.colon}" if instruction else ""',
        new="head = f\"{instruction or ''}{fmt.colon}\"",
    ),
    Wrong(
        1,
        "hard-codes the default end marker ';' instead of fmt.end",
        old='body = "".join(f"{x}{fmt.arrow}{y}{fmt.end}" for x, y in examples)',
        new='body = "".join(f"{x}{fmt.arrow}{y};" for x, y in examples)',
    ),
    Wrong(
        1,
        "joins the examples with the end marker (none after the last one)",
        old='body = "".join(f"{x}{fmt.arrow}{y}{fmt.end}" for x, y in examples)',
        new='body = fmt.end.join(f"{x}{fmt.arrow}{y}" for x, y in examples)',
    ),
    Wrong(
        2,
        "does not cut at the end marker: compares the first len(answer) characters",
        old="answer = tok.decode(out[0, ids.shape[1] :]).split(fmt.end)[0]",
        new="answer = tok.decode(out[0, ids.shape[1] :])[: len(p.answer)]",
    ),
    Wrong(
        2,
        "samples at temperature 1 instead of decoding greedily",
        old="out = model.generate(ids, max_new, temperature=0.0)",
        new="out = model.generate(ids, max_new, temperature=1.0)",
    ),
    Wrong(
        2,
        "cuts at the default end marker ';' whatever the format",
        old=".split(fmt.end)[0]",
        new=".split(';')[0]",
    ),
    Wrong(
        3,
        "ties broken by set order (max over set(candidates))",
        block="""
        if not candidates:
            raise ValueError("majority_vote: no candidates")
        return max(set(candidates), key=candidates.count)
        """,
    ),
    Wrong(
        3,
        "ties go to the alphabetically smallest answer",
        block="""
        if not candidates:
            raise ValueError("majority_vote: no candidates")
        counts = {}
        for c in candidates:
            counts[c] = counts.get(c, 0) + 1
        best = max(counts.values())
        return min(c for c in counts if counts[c] == best)
        """,
    ),
    Wrong(
        3,
        "ties go to the answer seen last",
        old="return next(c for c in candidates if counts[c] == best)",
        new="return next(c for c in reversed(candidates) if counts[c] == best)",
    ),
    Wrong(
        3,
        "returns None for an empty list instead of raising",
        old='raise ValueError("majority_vote: no candidates")',
        new="return None",
    ),
    Wrong(
        4,
        "no partial=True: only complete matches are allowed",
        old="pat.fullmatch(prefix + ch, partial=True)",
        new="pat.fullmatch(prefix + ch)",
    ),
    Wrong(
        5,
        "stops at the first complete match",
        block="""
        for _ in range(max_new):
            if constrained.is_complete(pattern, out):
                break
            logits = model(ids[:, -model.config.block_size :])[0, -1]
            mask = allowed_mask(pattern, out)
            if not bool(mask.any()):
                break
            nxt = int(logits.masked_fill(~mask, float("-inf")).argmax())
            out += tok.chars[nxt]
            ids = torch.cat([ids, torch.tensor([[nxt]])], dim=1)
        """,
    ),
    Wrong(
        5,
        "allows the stop character even before the text is complete",
        old="        if complete:\n            mask[tok.stoi[stop]] = True",
        new="        mask[tok.stoi[stop]] = True",
    ),
    Wrong(
        5,
        "never appends the chosen character to the model's context",
        old="ids = torch.cat([ids, torch.tensor([[nxt]])], dim=1)",
        new="pass",
    ),
]
