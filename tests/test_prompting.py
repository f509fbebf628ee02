"""labs.prompting: task family, training data, evaluation harness and constrained decoding."""

import json
import random

import pytest
import regex
import torch

from labs import data, gpt
from labs.prompting import constrained, evaluate, tasks, train


def test_tasks_and_render():
    assert [tasks.apply_task(t, "abc") for t in tasks.TASKS] == ["abc", "cba", "bca", "ABC"]
    p = tasks.Prompt("reverse", [("kfa", "afk")], "bmq", "reverse", "qmb")
    assert tasks.render(p) == "reverse: kfa>afk;bmq>"
    fmt = tasks.Format(arrow=" = ", end="\n", colon=". ")
    assert tasks.render(p, fmt) == "reverse. kfa = afk\nbmq = "
    with pytest.raises(ValueError):
        tasks.apply_task("sort", "abc")


def test_sample_prompt_is_seeded_and_noisy_examples_use_another_task():
    a = tasks.sample_prompt(random.Random(1), 5, noise=0.5)
    b = tasks.sample_prompt(random.Random(1), 5, noise=0.5)
    assert a == b
    rng = random.Random(0)
    for _ in range(50):
        p = tasks.sample_prompt(rng, 4, noise=0.5)
        inputs = [x for x, _ in p.examples] + [p.query]
        assert len(set(inputs)) == len(inputs)
        for (x, y), bad in zip(p.examples, p.noisy):
            assert (y == tasks.apply_task(p.task, x)) != bad


def test_training_targets_cover_outputs_only():
    p = tasks.Prompt("upper", [("abc", "ABC")], "xyz", None, "XYZ")
    x, y = train.encode_example(p, 16)
    tok = data.CharTokenizer()
    text = "abc>ABC;xyz>XYZ;"
    assert tok.decode(x[:15]) == text[:-1]
    kept = "".join(tok.chars[int(t)] if t != -100 else "." for t in y[:15])
    assert kept == "...ABC;....XYZ;"  # y[t] is the target of input position t
    assert (y[15:] == -100).all()


def test_harness_and_majority_vote():
    model = gpt.GPT(train.CONFIG)
    prompts = evaluate.make_eval_set(8, 2, seed=3)
    assert prompts == evaluate.make_eval_set(8, 2, seed=3)
    out = evaluate.answers(model, prompts)
    assert len(out) == 8 and all(isinstance(o, str) for o in out)
    assert 0.0 <= evaluate.accuracy(model, prompts) <= 1.0
    assert evaluate.majority_vote(["ab", "cd", "cd", "ab", "ef"]) == "ab"
    moved = evaluate.with_noisy_example(prompts, 0)
    assert all(m.examples[0][1] != tasks.apply_task(m.task, m.examples[0][0]) for m in moved)
    assert all(
        sorted(x for x, _ in m.examples) == sorted(x for x, _ in p.examples)
        for m, p in zip(moved, prompts)
    )
    sc = evaluate.self_consistency(model, prompts[:4], samples=(1, 3), seed=1)
    assert set(sc) == {1, 3} and all(0.0 <= v <= 1.0 for v in sc.values())
    assert sc == evaluate.self_consistency(model, prompts[:4], samples=(1, 3), seed=1)
    with pytest.raises(ValueError):
        evaluate.accuracy(model, [])
    with pytest.raises(ValueError):
        evaluate.self_consistency(model, prompts, samples=(0,))


class _Fixed(torch.nn.Module):
    """A "model" that always prefers the same characters, to test masking on its own."""

    def __init__(self, favourite: str):
        super().__init__()
        self.config = gpt.GPTConfig()
        self.bias = torch.full((96,), -5.0)
        for i, ch in enumerate(favourite):
            self.bias[data.CharTokenizer().stoi[ch]] = 5.0 - i

    def forward(self, idx):
        return self.bias.expand(idx.shape[0], idx.shape[1], 96)


def test_allowed_mask_and_constrained_generation():
    pat = r"[a-c]{2}!"
    mask = constrained.allowed_mask(pat, "a")
    allowed = {data.CharTokenizer().chars[i] for i in torch.nonzero(mask).flatten().tolist()}
    assert allowed == {"a", "b", "c"}
    assert constrained.is_complete(pat, "ab!") and not constrained.is_complete(pat, "ab")
    out = constrained.constrained_generate(_Fixed("zyx!c"), "prompt", pat)
    assert out == "cc!"  # the model's favourites are banned until '!' and 'c' are allowed
    with pytest.raises(ValueError):
        constrained.constrained_generate(_Fixed("a"), "p", r"a{5}", max_new_tokens=3)


def test_schema_to_regex_accepts_exactly_the_schema():
    schema = {
        "type": "object",
        "properties": {
            "task": {"type": "string", "enum": ["copy", "reverse"]},
            "answer": {"type": "string", "pattern": "[a-z]{3}"},
            "shots": {"type": "integer"},
            "ok": {"type": "boolean"},
        },
    }
    pat = regex.compile(constrained.schema_to_regex(schema))
    good = json.dumps({"task": "reverse", "answer": "abc", "shots": 12, "ok": True})
    assert pat.fullmatch(good)
    for bad in [
        {"task": "sort", "answer": "abc", "shots": 1, "ok": False},
        {"task": "copy", "answer": "abcd", "shots": 1, "ok": False},
        {"task": "copy", "answer": "abc", "shots": "1", "ok": False},
    ]:
        assert not pat.fullmatch(json.dumps(bad))
    assert constrained.validity([good, good[:-1]], pat) == 0.5
    with pytest.raises(ValueError):
        constrained.schema_to_regex({"type": "array"})


def test_random_model_output_becomes_valid_under_the_constraint():
    model = gpt.GPT(gpt.GPTConfig(n_layer=1, n_embd=32, block_size=64))
    gen = torch.Generator().manual_seed(0)
    pat = constrained.schema_to_regex(
        {"type": "object", "properties": {"answer": {"type": "string", "pattern": "[a-z]{3}"}}}
    )
    outs = [
        constrained.constrained_generate(model, "abc>", pat, temperature=1.0, generator=gen)
        for _ in range(3)
    ]
    assert constrained.validity(outs, pat) == 1.0
