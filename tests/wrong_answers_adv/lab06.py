"""Adversarial wrong answers for lab 6 (rate limits, batching, auth, HPA, histogram quantiles)."""

from labs.course.wrong_answers import Wrong

WRONG = [
    Wrong(
        1,
        "Retry-After is always one token's refill time, ignoring the fraction already there",
        old="return False, (1.0 - self.tokens) / self.rate",
        new="return False, 1.0 / self.rate",
    ),
    Wrong(
        1,
        "refill never capped at capacity",
        old="self.tokens = min(self.capacity, self.tokens + (now - self.last) * self.rate)",
        new="self.tokens = self.tokens + (now - self.last) * self.rate",
    ),
    Wrong(
        1,
        "needs more than one token (> instead of >=)",
        old="if self.tokens >= 1.0:",
        new="if self.tokens > 1.0:",
    ),
    Wrong(
        1,
        "updates the refill time only when a request is admitted (refill counted twice)",
        block="""
        now = self.clock()
        self.tokens = min(self.capacity, self.tokens + (now - self.last) * self.rate)
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            self.last = now
            return True, 0.0
        return False, (1.0 - self.tokens) / self.rate
        """,
    ),
    Wrong(
        1,
        "whole tokens only: refills floor(elapsed * rate) and drops the fraction",
        old="self.tokens = min(self.capacity, self.tokens + (now - self.last) * self.rate)",
        new="self.tokens = min(self.capacity, self.tokens + math.floor((now - self.last) * self.rate))",
    ),
    Wrong(
        2,
        "an entry stamped exactly now - window is still inside (< instead of <=)",
        old="while self.log and self.log[0] <= now - self.window:",
        new="while self.log and self.log[0] < now - self.window:",
    ),
    Wrong(
        2,
        "logs refused requests too",
        block="""
        now = self.clock()
        while self.log and self.log[0] <= now - self.window:
            self.log.popleft()
        self.log.append(now)
        if len(self.log) <= self.limit:
            return True, 0.0
        return False, self.log[0] + self.window - now
        """,
    ),
    Wrong(
        2,
        "wait computed from the newest entry instead of the oldest",
        old="return False, self.log[0] + self.window - now",
        new="return False, self.log[-1] + self.window - now",
    ),
    Wrong(
        2,
        "a fixed window (counter reset at multiples of the window) instead of a sliding log",
        block="""
        now = self.clock()
        start = math.floor(now / self.window) * self.window
        self.log = deque(t for t in self.log if t >= start)
        if len(self.log) < self.limit:
            self.log.append(now)
            return True, 0.0
        return False, start + self.window - now
        """,
    ),
    Wrong(
        3,
        "a request arriving exactly at the deadline misses the batch (< instead of <=)",
        old="arrivals[j] <= deadline",
        new="arrivals[j] < deadline",
    ),
    Wrong(
        3,
        "a full batch is dispatched at its deadline, not at its last arrival",
        old="dispatch = arrivals[members[-1]] if len(members) == max_batch_size else deadline",
        new="dispatch = deadline",
    ),
    Wrong(
        3,
        "the timer restarts at every arrival (deadline from the latest request)",
        old="while j < len(arrivals) and len(members) < max_batch_size and arrivals[j] <= deadline:",
        new=(
            "while j < len(arrivals) and len(members) < max_batch_size and arrivals[j] <= deadline:\n"
            "            deadline = arrivals[j] + max_wait"
        ),
    ),
    Wrong(
        3,
        "lets a batch grow to max_batch_size + 1 (<= on the size)",
        old="len(members) < max_batch_size",
        new="len(members) <= max_batch_size",
    ),
    # SLIPS the checks (at 347915e): the check searches the source text for 'compare_digest', a comment satisfies it
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
    Wrong(
        4,
        "case-insensitive comparison",
        old="ok |= hmac.compare_digest(api_key.encode(), key.encode())",
        new="ok |= hmac.compare_digest(api_key.lower().encode(), key.lower().encode())",
    ),
    Wrong(
        4,
        "compares only the first len(key) characters of the header",
        old="ok |= hmac.compare_digest(api_key.encode(), key.encode())",
        new="ok |= hmac.compare_digest(api_key[: len(key)].encode(), key.encode())",
    ),
    Wrong(
        4,
        "403 instead of 401, no WWW-Authenticate header",
        old='raise HTTPException(\n            401, detail="missing or invalid API key", headers={"WWW-Authenticate": "APIKey"}\n        )',
        new='raise HTTPException(403, detail="missing or invalid API key")',
    ),
    Wrong(
        5,
        "tolerance exclusive (< instead of <=)",
        old="if abs(ratio - 1.0) <= tolerance:",
        new="if abs(ratio - 1.0) < tolerance:",
    ),
    Wrong(
        5,
        "rounds to nearest instead of up",
        old="math.ceil(current * ratio)",
        new="round(current * ratio)",
    ),
    Wrong(
        5,
        "applies the tolerance to the replica change instead of the metric ratio",
        block="""
        ratio = metric / target
        desired = math.ceil(current * ratio)
        if abs(desired - current) / current <= tolerance:
            return current
        return max(min_replicas, min(max_replicas, desired))
        """,
    ),
    Wrong(
        6,
        "first bucket whose count exceeds the rank (> instead of >=)",
        old="if count >= rank:",
        new="if count > rank:",
    ),
    Wrong(
        6,
        "returns inf when the quantile falls in the +Inf bucket",
        old="""            if math.isinf(upper):
                return lower""",
        new="""            if math.isinf(upper):
                return upper""",
    ),
    Wrong(
        6,
        "an empty histogram gives 0.0 instead of nan",
        old="return math.nan",
        new="return 0.0",
    ),
    Wrong(
        6,
        "treats the cumulative counts as per-bucket counts",
        block="""
        total = sum(c for _, c in buckets)
        if total == 0:
            return math.nan
        rank = q * total
        lower, below = 0.0, 0.0
        for upper, count in buckets:
            if below + count >= rank:
                if math.isinf(upper):
                    return lower
                if count == 0:
                    return upper
                return lower + (upper - lower) * (rank - below) / count
            lower, below = upper, below + count
        return lower
        """,
    ),
]
