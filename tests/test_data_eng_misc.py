"""Weight spectra, cleaning, embeddings and instruction-data helpers of labs.data_eng."""

import warnings
from collections import Counter

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from labs.data_eng import cleaning, embeddings, instruct, spectrum


def test_power_law_fit_recovers_known_alpha_and_matches_powerlaw():
    powerlaw = pytest.importorskip("powerlaw")
    x = spectrum.sample_power_law(3000, 3.0, xmin=0.5, seed=1)
    fit = spectrum.fit_power_law(x)
    assert fit.alpha == pytest.approx(3.0, abs=0.15)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = powerlaw.Fit(x, verbose=False)  # its own xmin scan
    at_their_xmin = spectrum.fit_power_law(x, xmin=ref.xmin)
    assert at_their_xmin.alpha == pytest.approx(ref.power_law.alpha, rel=1e-6)  # same MLE
    assert at_their_xmin.D == pytest.approx(ref.power_law.D, rel=1e-6)  # same KS distance
    assert fit.alpha == pytest.approx(ref.power_law.alpha, abs=0.1)
    assert fit.D <= ref.power_law.D + 1e-12  # our scan picks the xmin with the smallest D


def test_esd_of_random_matrix_fills_marchenko_pastur_bulk():
    w = torch.randn(400, 100, generator=torch.Generator().manual_seed(0))
    ev = spectrum.esd(w)
    lo, hi = spectrum.mp_bounds(400, 100)
    assert ev.shape == (100,)
    assert lo * 0.8 < ev.min() and ev.max() < hi * 1.15
    with pytest.raises(ValueError):
        spectrum.esd(torch.zeros(3))


def test_crawl_and_clean_counts():
    docs = cleaning.make_crawl(seed=0)
    kinds = Counter(d["kind"] for d in docs)
    kept, removed = cleaning.clean(docs)
    kept_kinds = Counter(d["kind"] for d in kept)
    assert removed["normalized"] == kinds["unicode"]
    assert kept_kinds["foreign"] == 0 and not any(k.startswith("junk") for k in kept_kinds)
    assert removed["language"] == kinds["foreign"]
    assert removed["exact_dup"] == kinds["exact_dup"]
    assert kept_kinds["clean"] + kept_kinds["unicode"] >= kinds["clean"] + kinds["unicode"] - 8
    assert cleaning.normalize("\ufb01ne\u00a0\uff21") == "fine A"
    with pytest.raises(ValueError):
        cleaning.clean([])


def test_quality_rules_fire_on_their_junk():
    for kind, text in cleaning._JUNK.items():
        assert cleaning.quality_flags(text), kind
    good = cleaning.sentences(cleaning.data.load_corpus())[:3]
    assert cleaning.quality_flags(" ".join(good)) == []


def test_skipgram_loss_falls_and_neighbours_are_words():
    text = "the cat sat on the mat . the dog sat on the rug . " * 30
    vec, itos, losses = embeddings.train_skipgram(text, dim=8, epochs=3, min_count=1)
    assert losses[-1] < losses[0]
    assert vec.shape == (len(itos), 8)
    near = embeddings.nearest(vec, itos, "cat", k=2)
    assert len(near) == 2 and all(w in itos for w, _ in near)
    with pytest.raises(ValueError):
        embeddings.nearest(vec, itos, "zebra")


def test_loss_mask_gives_zero_gradient_on_prompt():
    torch.manual_seed(0)
    ids = torch.randint(0, 20, (12,))
    learn = torch.zeros(12, dtype=torch.bool)
    learn[8:] = True
    targets = instruct.masked_targets(ids, learn)
    assert (targets[:7] == -100).all() and (targets[7:] == ids[8:]).all()
    logits = torch.randn(11, 20, requires_grad=True)
    F.cross_entropy(logits, targets, ignore_index=-100).backward()
    assert torch.count_nonzero(logits.grad[:7]) == 0
    assert torch.count_nonzero(logits.grad[7:]) > 0
    with pytest.raises(ValueError):
        instruct.masked_targets(ids, learn[:5])


def test_render_chat_spans():
    msgs = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}]
    text, spans = instruct.render_chat(msgs, add_generation_prompt=False)
    assert [text[a:b] for a, b in spans] == ["Hello\n<|end|>\n"]
    with pytest.raises(ValueError):
        instruct.render_chat([{"role": "robot", "content": "x"}])


def test_cohen_kappa():
    a = ["yes", "yes", "no", "no", "yes", "no", "yes", "yes", "no", "yes"]
    b = ["yes", "no", "no", "no", "yes", "no", "yes", "yes", "yes", "yes"]
    # p_o = 0.8; both say "yes" 6 times in 10: p_e = 0.6*0.6 + 0.4*0.4 = 0.52
    assert instruct.cohen_kappa(a, b) == pytest.approx(0.28 / 0.48)
    assert instruct.cohen_kappa(a, a) == 1.0
    with pytest.raises(ValueError):
        instruct.cohen_kappa(a, b[:3])
    rng = np.random.default_rng(0)
    x, y = rng.integers(0, 3, 5000).tolist(), rng.integers(0, 3, 5000).tolist()
    assert abs(instruct.cohen_kappa(x, y)) < 0.05
