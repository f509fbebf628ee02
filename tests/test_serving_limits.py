"""Tests of labs.serving.limits (four rate limiters on a fake clock) and labs.serving.auth."""

import pytest

from labs.serving import auth, limits


class FakeClock:
    def __init__(self, t: float = 0.0):
        self.t = t

    def __call__(self) -> float:
        return self.t


def test_token_bucket_burst_then_rate():
    clock = FakeClock()
    tb = limits.TokenBucket(rate=2.0, capacity=3, clock=clock)
    assert [tb.allow()[0] for _ in range(4)] == [True, True, True, False]
    ok, wait = tb.allow()
    assert not ok and wait == pytest.approx(0.5)
    clock.t = 0.5
    assert tb.allow() == (True, 0.0)
    clock.t = 100.0  # refills to capacity, not beyond
    assert sum(tb.allow()[0] for _ in range(10)) == 3


def test_leaky_bucket_drains_at_rate():
    clock = FakeClock()
    lb = limits.LeakyBucket(rate=1.0, capacity=2, clock=clock)
    assert [lb.allow()[0] for _ in range(3)] == [True, True, False]
    assert lb.allow()[1] == pytest.approx(1.0)
    clock.t = 1.0
    assert lb.allow()[0] and not lb.allow()[0]


def test_fixed_window_resets_at_boundary_and_allows_double_burst():
    clock = FakeClock(0.9)
    fw = limits.FixedWindow(limit=3, window=1.0, clock=clock)
    assert [fw.allow()[0] for _ in range(4)] == [True, True, True, False]
    assert fw.allow()[1] == pytest.approx(0.1)
    clock.t = 1.0  # a new window: three more within 0.1 s -> 6 in 0.1 s
    assert [fw.allow()[0] for _ in range(4)] == [True, True, True, False]


def test_sliding_window_log_never_exceeds_limit_in_any_window():
    arrivals = [0.9, 0.9, 0.9, 1.0, 1.0, 1.0, 1.85, 1.95, 2.0]
    allowed = limits.simulate("sliding_window", arrivals, rate=3.0, burst=3)
    times = [t for t, ok in zip(arrivals, allowed, strict=True) if ok]
    for t in times:
        assert sum(1 for u in times if t - 1.0 < u <= t) <= 3
    assert allowed == [True, True, True, False, False, False, False, True, True]
    fixed = limits.simulate("fixed_window", arrivals, rate=3.0, burst=3)
    assert sum(fixed[:6]) == 6  # the fixed window lets 2 x limit through around the boundary


@pytest.mark.parametrize("kind", ["token_bucket", "leaky_bucket", "fixed_window", "sliding_window"])
def test_long_run_rate_is_the_same_for_every_kind(kind):
    arrivals = [i * 0.01 for i in range(2000)]  # 100 requests/s offered for 20 s
    admitted = sum(limits.simulate(kind, arrivals, rate=5.0, burst=10))
    assert 100 <= admitted <= 100 + 10 + 1


def test_bad_arguments_are_reported():
    with pytest.raises(ValueError, match="rate"):
        limits.TokenBucket(rate=0, capacity=1)
    with pytest.raises(ValueError, match="kind must be one of"):
        limits.make_limiter("bucket", 1, 1)
    with pytest.raises(ValueError, match="must not decrease"):
        limits.simulate("token_bucket", [1.0, 0.5], 1, 1)


def test_keyed_limiter_is_per_key():
    clock = FakeClock()
    kl = limits.KeyedLimiter(lambda: limits.TokenBucket(1.0, 1, clock))
    assert kl.allow("a")[0] and not kl.allow("a")[0]
    assert kl.allow("b")[0]


def test_api_keys_from_env_and_file(tmp_path, monkeypatch):
    monkeypatch.setenv("DLSYS_API_KEYS", " k1 , k2,")
    monkeypatch.delenv("DLSYS_API_KEYS_FILE", raising=False)
    assert auth.load_api_keys() == ["k1", "k2"]
    f = tmp_path / "keys"
    f.write_text("# comment\nsecret\n\n")
    assert auth.load_api_keys(f) == ["secret"]
    monkeypatch.setenv("DLSYS_API_KEYS", "")
    with pytest.raises(ValueError, match="no API key configured"):
        auth.load_api_keys()


def test_is_valid_key():
    keys = ["abc123", "zzz"]
    assert auth.is_valid_key("abc123", keys)
    for bad in (None, "", "abc", "abc1234", "ABC123", " abc123"):
        assert not auth.is_valid_key(bad, keys)
    assert auth.is_valid_key("h\u00e9", ["h\u00e9"])  # non-ASCII keys are compared as UTF-8
