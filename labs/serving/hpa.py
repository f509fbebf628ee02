"""The Kubernetes Horizontal Pod Autoscaler's rule, simulated on a traffic trace.

Every sync period (15 s by default in Kubernetes) the HPA computes
``desired = ceil(current * metric / target)``, does nothing while ``metric / target`` is within
``tolerance`` (0.1) of 1, clamps to ``[min_replicas, max_replicas]``, and, when scaling *down*,
takes the largest recommendation of the last ``stabilization_s`` seconds (300 s by default) so
that a short dip does not remove pods that the next spike needs. New pods serve only after a
start-up delay (an LLM must load its weights), which is what makes flapping expensive.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

__all__ = ["hpa_desired", "HPAResult", "simulate_hpa"]


def hpa_desired(
    current: int,
    metric: float,
    target: float,
    min_replicas: int = 1,
    max_replicas: int = 100,
    tolerance: float = 0.1,
) -> int:
    """One HPA step: replicas wanted for a per-pod ``metric`` (averaged) against ``target``."""
    if current < 1 or target <= 0:
        raise ValueError(f"hpa_desired: need current >= 1 and target > 0, got {current}, {target}")
    ratio = metric / target
    if abs(ratio - 1.0) <= tolerance:
        desired = current
    else:
        desired = math.ceil(current * ratio)
    return max(min_replicas, min(max_replicas, desired))


@dataclass
class HPAResult:
    """Per step of the trace: replicas ready, replicas asked for, load per ready replica."""

    ready: list[int]
    desired: list[int]
    utilization: list[float]
    scale_events: int


def simulate_hpa(
    load: list[float],
    capacity_per_pod: float,
    target_utilization: float = 0.6,
    period_s: float = 15.0,
    startup_s: float = 60.0,
    stabilization_s: float = 0.0,
    min_replicas: int = 1,
    max_replicas: int = 50,
    initial: int = 1,
) -> HPAResult:
    """Run the HPA over ``load`` (requests/s, one value per ``period_s``).

    Utilization of a pod is ``load / (ready * capacity_per_pod)``; pods asked for become ready
    ``startup_s`` later; removals are immediate. ``scale_events`` counts changes of direction
    plus steps, a simple measure of flapping.
    """
    ready, pending = initial, deque()  # pending: (ready_at_step, count)
    history: deque[tuple[int, int]] = deque()
    delay = math.ceil(startup_s / period_s)
    window = int(stabilization_s / period_s)
    out = HPAResult([], [], [], 0)
    target_total = initial
    for step, rps in enumerate(load):
        while pending and pending[0][0] <= step:
            ready += pending.popleft()[1]
        util = rps / (ready * capacity_per_pod)  # what each ready pod carries
        # Pods still starting count as idle, as the HPA assumes for unready pods when scaling
        # up, so the average over all replicas is load / (replicas * capacity).
        avg = rps / (target_total * capacity_per_pod)
        rec = hpa_desired(target_total, avg, target_utilization, min_replicas, max_replicas)
        history.append((step, rec))
        while history and history[0][0] < step - window:
            history.popleft()
        # scale down only to the highest recommendation of the stabilization window
        desired = rec if rec >= target_total else min(target_total, max(r for _, r in history))
        if desired != target_total:
            out.scale_events += 1
        if desired > target_total:
            pending.append((step + delay, desired - target_total))
        elif desired < target_total:
            drop = target_total - desired
            while drop and pending:  # cancel pods that are still starting first
                n = min(drop, pending[-1][1])
                pending[-1] = (pending[-1][0], pending[-1][1] - n)
                drop -= n
                if pending[-1][1] == 0:
                    pending.pop()
            ready -= drop
        target_total = desired
        out.ready.append(ready)
        out.desired.append(desired)
        out.utilization.append(util)
    return out
