"""Adversarial wrong answers for lab 6 (rate limits, batching, auth, HPA, histogram quantiles)."""

from labs.course.wrong_answers import Wrong

WRONG = [
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
        "returns inf when the quantile falls in the +Inf bucket",
        old="""            if math.isinf(upper):
                return lower""",
        new="""            if math.isinf(upper):
                return upper""",
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
