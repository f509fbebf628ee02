"""Point-in-time correct joins, the core service of a feature store.

Training rows (an entity, a timestamp, a label) must be joined with the feature values that were
*known at that timestamp*. Joining on the latest value instead leaks the future into training:
the model learns from information it will not have when it serves. ``pandas.merge_asof`` does
the correct, backward-looking join; Feast's offline store does the same with its ``ttl``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

__all__ = ["point_in_time_join", "latest_value_join", "make_events", "leaked_rows"]


def point_in_time_join(
    rows: pd.DataFrame,
    features: pd.DataFrame,
    on: str,
    ts: str = "ts",
    ttl: pd.Timedelta | None = None,
) -> pd.DataFrame:
    """For each row, the newest feature value with ``features[ts] <= rows[ts]`` (same ``on``).

    Values older than ``ttl`` are treated as missing (NaN), as a feature store's TTL does.
    """
    left = rows.assign(_row=range(len(rows))).sort_values(ts)
    right = features.sort_values(ts).rename(columns={ts: f"{ts}_feature"})
    out = pd.merge_asof(
        left,
        right,
        left_on=ts,
        right_on=f"{ts}_feature",
        by=on,
        direction="backward",
        tolerance=ttl,
    )
    out = out.sort_values("_row").drop(columns="_row")  # back to the rows' order
    return out.set_index(rows.index)


def latest_value_join(rows: pd.DataFrame, features: pd.DataFrame, on: str, ts: str = "ts"):
    """The naive join: every row gets the entity's *latest* feature value (leaks the future)."""
    latest = features.sort_values(ts).groupby(on).tail(1).rename(columns={ts: f"{ts}_feature"})
    return rows.merge(latest, on=on, how="left")


def leaked_rows(joined: pd.DataFrame, ts: str = "ts") -> int:
    """How many rows use a feature value stamped after the row's own time."""
    return int((joined[f"{ts}_feature"] > joined[ts]).sum())


def make_events(n_users: int = 50, n_updates: int = 20, n_rows: int = 400, seed: int = 0):
    """A toy feature table (a user's running count of requests) and labelled rows to join."""
    rng = np.random.default_rng(seed)
    start = pd.Timestamp("2025-01-01")
    upd = pd.DataFrame(
        {
            "user": rng.integers(0, n_users, n_users * n_updates),
            "ts": start + pd.to_timedelta(rng.uniform(0, 30, n_users * n_updates), unit="D"),
        }
    ).sort_values("ts")
    upd["requests_so_far"] = upd.groupby("user").cumcount() + 1
    rows = pd.DataFrame(
        {
            "user": rng.integers(0, n_users, n_rows),
            "ts": start + pd.to_timedelta(rng.uniform(0, 30, n_rows), unit="D"),
        }
    )
    rows["label"] = rng.integers(0, 2, n_rows)
    return rows.reset_index(drop=True), upd.reset_index(drop=True)
