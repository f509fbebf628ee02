"""Plausible wrong answers to lab 06; each must be rejected by its exercise's checks."""

from labs.course.wrong_answers import Wrong

WRONG = [
    # 1: token bucket
    Wrong(
        1,
        "refills on the wall clock instead of the injected clock",
        old="now = self.clock()",
        new="now = time.monotonic()",
    ),
    Wrong(
        1,
        "no cap: tokens accumulate beyond capacity",
        old="self.tokens = min(self.capacity, self.tokens + (now - self.last) * self.rate)",
        new="self.tokens = self.tokens + (now - self.last) * self.rate",
    ),
    Wrong(
        1,
        "Retry-After is always one refill interval",
        old="return False, (1.0 - self.tokens) / self.rate",
        new="return False, 1.0 / self.rate",
    ),
    Wrong(
        1,
        "forgets to advance self.last (refills the same interval again and again)",
        old="        self.last = now\n",
        new="",
    ),
    # 2: sliding window log
    Wrong(
        2,
        "off by one at the window edge: keeps entries stamped exactly now - window",
        old="self.log[0] <= now - self.window",
        new="self.log[0] < now - self.window",
    ),
    Wrong(
        2,
        "logs refused requests too",
        block="""now = self.clock()
while self.log and self.log[0] <= now - self.window:
    self.log.popleft()
self.log.append(now)
if len(self.log) <= self.limit:
    return True, 0.0
return False, self.log[0] + self.window - now""",
    ),
    Wrong(
        2,
        "a fixed window in disguise (clears the log when the window has passed)",
        block="""now = self.clock()
if self.log and now - self.log[0] >= self.window:
    self.log.clear()
if len(self.log) < self.limit:
    self.log.append(now)
    return True, 0.0
return False, self.log[0] + self.window - now""",
    ),
    Wrong(
        2,
        "wait measured from the newest entry instead of the oldest",
        old="return False, self.log[0] + self.window - now",
        new="return False, self.log[-1] + self.window - now",
    ),
    # 3: batch formation
    Wrong(
        3,
        "a request arriving exactly at the deadline misses the batch",
        old="arrivals[j] <= deadline",
        new="arrivals[j] < deadline",
    ),
    Wrong(
        3,
        "timer restarts at every arrival (measured from the newest request)",
        block="""i = 0
while i < len(arrivals):
    members = [i]
    j = i + 1
    while (
        j < len(arrivals)
        and len(members) < max_batch_size
        and arrivals[j] <= arrivals[j - 1] + max_wait
    ):
        members.append(j)
        j += 1
    full = len(members) == max_batch_size
    dispatch = arrivals[members[-1]] if full else arrivals[members[-1]] + max_wait
    batches.append((dispatch, members))
    i = j""",
    ),
    Wrong(
        3,
        "batches one larger than max_batch_size",
        old="len(members) < max_batch_size and",
        new="len(members) <= max_batch_size and",
    ),
    Wrong(
        3,
        "a full batch still waits for the timer",
        old="dispatch = arrivals[members[-1]] if len(members) == max_batch_size else deadline",
        new="dispatch = deadline",
    ),
    # 4: API-key dependency
    Wrong(
        4,
        "403 Forbidden instead of 401",
        old="raise HTTPException(\n            401,",
        new="raise HTTPException(\n            403,",
    ),
    Wrong(
        4,
        "no WWW-Authenticate header",
        old='headers={"WWW-Authenticate": "APIKey"}',
        new="headers=None",
    ),
    Wrong(
        4,
        "prefix match",
        old="ok |= hmac.compare_digest(api_key.encode(), key.encode())",
        new="ok |= key.startswith(api_key)",
    ),
    Wrong(
        4,
        "case-insensitive comparison",
        old="ok |= hmac.compare_digest(api_key.encode(), key.encode())",
        new="ok |= hmac.compare_digest(api_key.lower().encode(), key.lower().encode())",
    ),
    Wrong(
        4,
        "substring test: the presented key occurs inside a valid key",
        old="ok |= hmac.compare_digest(api_key.encode(), key.encode())",
        new="ok |= api_key in key",
    ),
    Wrong(
        4,
        "substring test: a valid key occurs inside the presented one",
        old="ok |= hmac.compare_digest(api_key.encode(), key.encode())",
        new="ok |= key in api_key",
    ),
    Wrong(
        4,
        "plain == comparison (leaks timing)",
        old="ok |= hmac.compare_digest(api_key.encode(), key.encode())",
        new="ok |= api_key == key",
    ),
    # 5: HPA step
    Wrong(
        5, "rounds instead of ceil", old="math.ceil(current * ratio)", new="round(current * ratio)"
    ),
    Wrong(
        5,
        "no tolerance band",
        old="if abs(ratio - 1.0) <= tolerance:",
        new="if ratio == 1.0:",
    ),
    Wrong(
        5,
        "tolerance band exclusive",
        old="if abs(ratio - 1.0) <= tolerance:",
        new="if abs(ratio - 1.0) < tolerance - 1e-9:",
    ),
    Wrong(
        5,
        "forgets to clamp to max_replicas",
        old="return max(min_replicas, min(max_replicas, math.ceil(current * ratio)))",
        new="return max(min_replicas, math.ceil(current * ratio))",
    ),
    Wrong(
        5,
        "ratio inverted (target / metric)",
        old="ratio = metric / target",
        new="ratio = target / metric",
    ),
    # 6: quantiles from buckets
    Wrong(
        6,
        "returns the bucket's upper bound without interpolating",
        old="return lower + (upper - lower) * (rank - below) / (count - below)",
        new="return upper",
    ),
    Wrong(
        6,
        "interpolates from 0 instead of the bucket's lower bound",
        old="return lower + (upper - lower) * (rank - below) / (count - below)",
        new="return upper * rank / count",
    ),
    Wrong(
        6,
        "treats bucket counts as per-bucket instead of cumulative",
        old="if count >= rank:",
        new="if count + below >= rank:",
    ),
    Wrong(
        6,
        "count > rank instead of count >= rank (skips the bucket whose count equals the rank)",
        old="if count >= rank:",
        new="if count > rank:",
    ),
    Wrong(
        6,
        "returns inf for the +Inf bucket",
        old="""if math.isinf(upper):
                return lower""",
        new="""if math.isinf(upper):
                return upper""",
    ),
    Wrong(6, "an empty histogram gives 0 instead of nan", old="return math.nan", new="return 0.0"),
    Wrong(
        6,
        "no guard for an empty histogram (rank 0 meets the first bucket: its upper bound)",
        old="if total == 0:\n        return math.nan\n    ",
        new="",
    ),
    # adversary; slipped at 347915e: the check searches the source text for 'compare_digest', a comment satisfies it
    Wrong(
        4,
        "plain == comparison: the source mentions compare_digest only in a comment",
        block="""
        # TODO: switch to hmac.compare_digest (constant time) later
        if api_key not in VALID_KEYS:
            raise HTTPException(
                401, detail="missing or invalid API key", headers={"WWW-Authenticate": "APIKey"}
            )
        return api_key
        """,
    ),
]
