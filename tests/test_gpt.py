"""Tests of labs.gpt (the tiny GPT and its training loop) and labs.data (corpus, tokenizer, task)."""

import math

import pytest
import torch

from labs import data, gpt

TINY = gpt.GPTConfig(n_layer=1, n_head=2, n_embd=32, block_size=32)


def test_shapes_and_tied_head():
    model = gpt.GPT(TINY)
    idx = torch.randint(0, TINY.vocab_size, (3, 20))
    assert model(idx).shape == (3, 20, TINY.vocab_size)
    assert model.lm_head.weight is model.tok_emb.weight
    untied = gpt.GPT(
        gpt.GPTConfig(n_layer=1, n_head=2, n_embd=32, block_size=32, tie_weights=False)
    )
    assert untied.lm_head.weight is not untied.tok_emb.weight
    assert untied.num_params() - model.num_params() == 96 * 32


def test_parameter_count_and_layer_names():
    model = gpt.GPT(TINY)
    c, v, t = TINY.n_embd, TINY.vocab_size, TINY.block_size
    per_block = 4 * (c * c + c) + (c * 4 * c + 4 * c) + (4 * c * c + c) + 2 * 2 * c
    assert model.num_params() == v * c + t * c + TINY.n_layer * per_block + 2 * c
    names = {n for n, m in model.named_modules() if isinstance(m, torch.nn.Linear)}
    for suffix in ("attn.q_proj", "attn.k_proj", "attn.v_proj", "attn.o_proj"):
        assert f"blocks.0.{suffix}" in names
    assert {"blocks.0.mlp.up_proj", "blocks.0.mlp.down_proj", "lm_head"} <= names


def test_causal():
    """Changing a later token must not change the logits of earlier positions."""
    model = gpt.GPT(TINY)
    idx = torch.randint(0, TINY.vocab_size, (1, 16))
    other = idx.clone()
    other[0, 10:] = (other[0, 10:] + 1) % TINY.vocab_size
    a, b = model(idx), model(other)
    torch.testing.assert_close(a[:, :10], b[:, :10])
    assert not torch.allclose(a[:, 10:], b[:, 10:])


def test_init_is_seeded():
    a, b = gpt.GPT(TINY), gpt.GPT(TINY)
    c = gpt.GPT(gpt.GPTConfig(n_layer=1, n_head=2, n_embd=32, block_size=32, seed=1))
    for (n, p), q in zip(a.named_parameters(), b.parameters()):
        assert torch.equal(p, q), n
    assert not torch.equal(a.blocks[0].attn.q_proj.weight, c.blocks[0].attn.q_proj.weight)


def test_loss_ignores_minus_100_and_starts_near_uniform():
    model = gpt.GPT(TINY)
    idx = torch.randint(0, TINY.vocab_size, (2, 16))
    tgt = torch.randint(0, TINY.vocab_size, (2, 16))
    with torch.no_grad():
        loss = float(model.loss(idx, tgt))
    assert abs(loss - math.log(TINY.vocab_size)) < 0.1  # small init: near-uniform predictions
    masked = tgt.clone()
    masked[:, 8:] = -100
    full = torch.nn.functional.cross_entropy(model(idx)[:, :8].reshape(-1, 96), tgt[:, :8].ravel())
    torch.testing.assert_close(model.loss(idx, masked), full)


def test_bad_input_is_rejected():
    with pytest.raises(ValueError, match="divisible"):
        gpt.GPTConfig(n_embd=30, n_head=4)
    with pytest.raises(ValueError, match="positive"):
        gpt.GPTConfig(n_layer=0)
    model = gpt.GPT(TINY)
    with pytest.raises(ValueError, match="block_size"):
        model(torch.zeros(1, 33, dtype=torch.long))
    with pytest.raises(ValueError, match="shape"):
        model(torch.zeros(33, dtype=torch.long))
    for p in model.parameters():
        p.requires_grad_(False)
    with pytest.raises(ValueError, match="requires_grad"):
        gpt.train(model, iter([]), 1)


def test_pretraining_is_deterministic_and_learns():
    a_model, a = gpt.pretrain(TINY, steps=40, batch_size=8, lr=1e-2, seed=0)
    _, b = gpt.pretrain(TINY, steps=40, batch_size=8, lr=1e-2, seed=0)
    _, c = gpt.pretrain(TINY, steps=3, batch_size=8, lr=1e-2, seed=1)
    assert a == b
    assert a[1:3] != c[1:3]
    assert a[0] > 4.0  # random: ln 96 = 4.56
    assert sum(a[-5:]) / 5 < 3.4  # character statistics learned; a unigram model gives ~3.1
    tok = data.CharTokenizer()
    out = a_model.generate(tok.encode("The ").unsqueeze(0), 20, temperature=0.0)
    assert out.shape == (1, 24)


def test_generate_greedy_and_stop_token():
    model = gpt.GPT(TINY)
    idx = torch.zeros(2, 3, dtype=torch.long)
    g1 = model.generate(idx, 5, temperature=0.0)
    g2 = model.generate(idx, 5, temperature=0.0)
    assert torch.equal(g1, g2)
    first = int(g1[0, 3])
    short = model.generate(idx, 5, temperature=0.0, stop_token=first)
    assert short.shape == (2, 4)
    s1 = model.generate(idx, 5, generator=torch.Generator().manual_seed(0), top_k=5)
    s2 = model.generate(idx, 5, generator=torch.Generator().manual_seed(0), top_k=5)
    assert torch.equal(s1, s2)


def test_tokenizer_round_trip_and_errors():
    tok = data.CharTokenizer()
    text = data.load_corpus()
    assert len(text) > 20_000 and tok.vocab_size == 96
    ids = tok.encode(text[:500])
    assert ids.dtype == torch.long and tok.decode(ids) == text[:500]
    with pytest.raises(ValueError, match="not in the vocabulary"):
        tok.encode("caf\u00e9")


def test_batches_are_deterministic_shifted_windows():
    ids = torch.arange(1000)
    x1, y1 = next(data.batches(ids, 4, 16, seed=3))
    x2, y2 = next(data.batches(ids, 4, 16, seed=3))
    assert torch.equal(x1, x2) and torch.equal(y1, y2)
    assert torch.equal(y1, x1 + 1) and x1.shape == (4, 16)
    with pytest.raises(ValueError, match="block_size"):
        next(data.batches(ids[:10], 4, 16))


def test_instruction_task():
    train = data.make_instructions(200, "train")
    test = data.make_instructions(50, "test")
    words = {e["input"].lower() for e in train if not e["input"].isdigit()}
    assert words.isdisjoint({e["input"].lower() for e in test if not e["input"].isdigit()})
    assert data.make_instructions(5, "test", seed=2) == data.make_instructions(5, "test", seed=2)
    ex = {"instruction": "Spell it backwards.", "input": "cache", "output": "ehcac"}
    assert data.format_example(ex) == (
        "### Instruction\nSpell it backwards.\n\n### Input\ncache\n\n### Response\nehcac\n"
    )
    for e in train + test:
        assert e["output"] == data.TASKS[e["instruction"]](e["input"]) and len(e["input"]) == 5
    kinds = {(e["instruction"], e["input"].isupper(), e["input"].isdigit()) for e in train}
    assert len(kinds) == 6  # both answers of both yes/no questions, and the two letter tasks
    tok = data.CharTokenizer()
    x, y = next(data.instruction_batches([ex], tok, 2, 96))
    answer = y[0][y[0] != -100]
    assert tok.decode(answer) == "ehcac\n"
    # the target at each scored position is the next input character
    pos = (y[0] != -100).nonzero().ravel()
    assert torch.equal(x[0, pos[1:]], y[0, pos[:-1]])
    with pytest.raises(ValueError, match="split"):
        data.make_instructions(3, "valid")


class _Oracle:
    """A stand-in model whose greedy answer is right for every word except 'cache'."""

    def __init__(self, examples):
        self.answers = {data.format_prompt(e): e["output"] for e in examples}
        self.tok = data.CharTokenizer()

    def generate(self, idx, max_new_tokens, temperature=1.0, stop_token=None):
        rows = []
        for row in idx:
            prompt = self.tok.decode(row)
            ans = self.answers[prompt] if "cache" not in prompt else "wrong"
            rows.append(torch.cat([row, self.tok.encode((ans + "\n")[:max_new_tokens])]))
        return torch.nn.utils.rnn.pad_sequence(rows, batch_first=True)


def test_score_instructions_counts_exact_matches():
    examples = [
        {"instruction": t, "input": w, "output": data.TASKS[t](w)}
        for t in data.TASKS
        for w in ("cache", "tensor", "rank")
    ]
    tok = data.CharTokenizer()
    assert data.score_instructions(_Oracle(examples), tok, examples) == pytest.approx(8 / 12)


def test_training_loop_module_is_reexported_by_gpt():
    """The loop lives in labs.training.loop; ``gpt.train`` and ``gpt.evaluate`` still work."""
    from labs.training import loop

    assert gpt.train is loop.train and gpt.evaluate is loop.evaluate
    assert {"GPTConfig", "GPT", "train", "pretrain", "evaluate"} <= set(gpt.__all__)
