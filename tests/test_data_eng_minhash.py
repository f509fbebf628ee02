"""labs.data_eng.minhash against datasketch, and near-duplicate recall on planted copies."""

import numpy as np
import pytest
from datasketch import MinHash, MinHashLSH
from datasketch.lsh import _optimal_param

from labs.data_eng import minhash as mh
from labs.data_eng.cleaning import make_crawl


@pytest.fixture(scope="module")
def crawl():
    return make_crawl(seed=0)


def _datasketch(text, num_perm=128, seed=1):
    m = MinHash(num_perm=num_perm, seed=seed, scheme="affine32")
    m.update_batch([s.encode("utf-8") for s in mh.shingles(text)])
    return m


def test_signatures_bit_identical_to_datasketch(crawl):
    texts = [d["text"] for d in crawl[:40]] + ["é 你好 🙂", "ab"]
    for num_perm, seed in [(128, 1), (64, 7)]:
        ours = mh.signatures(texts, num_perm=num_perm, seed=seed, chunk=500)  # many chunks
        theirs = np.stack([_datasketch(t, num_perm, seed).hashvalues for t in texts])
        np.testing.assert_array_equal(ours, theirs)


def test_jaccard_estimate_within_expected_error(crawl):
    texts = [d["text"] for d in crawl]
    sig = mh.signatures(texts, num_perm=256)
    rng = np.random.default_rng(0)
    errs = []
    for i, j in rng.integers(0, len(texts), (60, 2)):
        true = mh.jaccard(mh.shingles(texts[i]), mh.shingles(texts[j]))
        est = float(mh.estimate_jaccard(sig[i], sig[j]))
        sd = max(np.sqrt(true * (1 - true) / 256), 1e-3)
        errs.append(abs(est - true) / sd)
    assert np.max(errs) < 4.5  # within 4.5 standard errors, every pair


@pytest.mark.parametrize("threshold,num_perm", [(0.5, 128), (0.8, 128), (0.3, 64)])
def test_optimal_bands_matches_datasketch(threshold, num_perm):
    assert mh.optimal_bands(threshold, num_perm) == _optimal_param(threshold, num_perm, 0.5, 0.5)


def test_lsh_candidates_equal_datasketch(crawl):
    texts = [d["text"] for d in crawl]
    sig = mh.signatures(texts)
    lsh = MinHashLSH(threshold=0.5, num_perm=128)
    ms = [_datasketch(t) for t in texts]
    for i, m in enumerate(ms):
        lsh.insert(i, m)
    theirs = {(min(i, j), max(i, j)) for i, m in enumerate(ms) for j in lsh.query(m) if i != j}
    assert mh.lsh_candidates(sig, *mh.optimal_bands(0.5, 128)) == theirs


def test_near_duplicates_recall_and_precision(crawl):
    texts = [" ".join(d["text"].split()) for d in crawl]
    planted = {
        (min(d["id"], d["source"]), max(d["id"], d["source"]))
        for d in crawl
        if d["kind"] in ("near_dup", "exact_dup")
    }
    pairs, keep = mh.near_duplicates(texts, threshold=0.5)
    found = pairs & planted
    assert len(found) / len(planted) >= 0.9
    assert len(found) / len(pairs) >= 0.9
    assert len(keep) <= len(texts) - 0.9 * len(planted)


def test_s_curve_and_bad_input():
    assert mh.s_curve(1.0, 20, 5) == pytest.approx(1.0)
    assert mh.s_curve(0.0, 20, 5) == pytest.approx(0.0)
    assert mh.lsh_threshold(20, 5) == pytest.approx(0.05**0.2)
    with pytest.raises(ValueError):
        mh.signatures([])
    with pytest.raises(ValueError):
        mh.lsh_candidates(np.zeros((3, 8), np.uint32), 3, 3)
    with pytest.raises(ValueError):
        mh.estimate_jaccard(np.zeros(4), np.zeros(5))


def test_lsh_as_map_and_shuffle_on_dask(crawl):
    db = pytest.importorskip("dask.bag")
    texts = [d["text"] for d in crawl]
    b, r = 25, 5

    def map_partition(part):
        part = list(part)
        sig = mh.signatures([t for _, t in part])
        return [
            ((band, row[band * r : (band + 1) * r].tobytes()), i)
            for (i, _), row in zip(part, sig)
            for band in range(b)
        ]

    def pairs(group):
        docs = sorted(doc for _, doc in group[1])
        return {(x, y) for k, x in enumerate(docs) for y in docs[k + 1 :]}

    bag = db.from_sequence(list(enumerate(texts)), npartitions=3).map_partitions(map_partition)
    groups = bag.groupby(lambda rec: rec[0], shuffle="tasks")
    found = set().union(*groups.map(pairs).compute(scheduler="sync"))
    assert found == mh.lsh_candidates(mh.signatures(texts), b, r)
