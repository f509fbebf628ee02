"""Plausible wrong answers to lab 07; each must be rejected by its exercise's checks."""

from labs.course.wrong_answers import Wrong

WRONG = [
    Wrong(
        1,
        "no end marker after each example",
        old='f"{x}{fmt.arrow}{y}{fmt.end}"',
        new='f"{x}{fmt.arrow}{y}"',
    ),
    Wrong(
        1,
        "instruction followed by a space instead of the format's colon",
        old='f"{instruction}{fmt.colon}"',
        new='f"{instruction} "',
    ),
    Wrong(
        1,
        "arrow hard-coded to the default format",
        old='f"{x}{fmt.arrow}{y}{fmt.end}"',
        new='f"{x}>{y}{fmt.end}"',
    ),
    Wrong(2, "answer not cut at the end marker", old=".split(fmt.end)[0]", new=""),
    Wrong(
        2,
        "only the first character compared",
        old="right += answer == p.answer",
        new="right += answer[:1] == p.answer[:1]",
    ),
    Wrong(
        2,
        "instruction dropped from the prompt",
        old="render_prompt(p.examples, p.query, p.instruction, fmt)",
        new="render_prompt(p.examples, p.query, None, fmt)",
    ),
    Wrong(
        3,
        "ties go to the last candidate seen",
        old="next(c for c in candidates if counts[c] == best)",
        new="next(c for c in reversed(candidates) if counts[c] == best)",
    ),
    Wrong(
        3,
        "ties broken alphabetically",
        old="next(c for c in candidates if counts[c] == best)",
        new="min(c for c in candidates if counts[c] == best)",
    ),
    Wrong(
        3,
        "returns the first candidate",
        block=(
            "if not candidates:\n"
            "    raise ValueError('majority_vote: no candidates')\n"
            "return candidates[0]"
        ),
    ),
    Wrong(
        4, "complete matches only (no partial matching)", old="partial=True", new="partial=False"
    ),
    Wrong(
        4,
        "match instead of fullmatch (allows text after a complete match)",
        old="pat.fullmatch(prefix + ch, partial=True)",
        new="pat.match(prefix + ch, partial=True)",
    ),
    Wrong(
        4,
        "tests the prefix, not the prefix plus the character",
        old="pat.fullmatch(prefix + ch, partial=True)",
        new="pat.fullmatch(prefix, partial=True)",
    ),
    Wrong(
        5,
        "mask never applied",
        old='logits.masked_fill(~mask, float("-inf")).argmax()',
        new="logits.argmax()",
    ),
    Wrong(
        5,
        "first allowed character instead of the model's choice",
        old='int(logits.masked_fill(~mask, float("-inf")).argmax())',
        new="int(torch.nonzero(mask)[0])",
    ),
    Wrong(
        5,
        "stops at the first complete match",
        old="if complete and nxt == tok.stoi[stop]:",
        new="if complete:",
    ),
    Wrong(
        5,
        "stop character allowed before the text is complete",
        old="if complete:\n            mask[tok.stoi[stop]] = True",
        new="if True:\n            mask[tok.stoi[stop]] = True",
    ),
    # adversary; slipped at 347915e: an answer 'abc ' before the end marker counts as right (only if the model emits a space)
    Wrong(
        2,
        "strips whitespace before comparing (not an exact match)",
        old="right += answer == p.answer",
        new="right += answer.strip() == p.answer.strip()",
    ),
    # adversary; slipped at 347915e: a prompt + output longer than block_size raises ValueError in GPT; the check's prompts are short
    Wrong(
        5,
        "feeds the whole context without cropping to block_size",
        old="logits = model(ids[:, -model.config.block_size :])[0, -1]",
        new="logits = model(ids)[0, -1]",
    ),
]
