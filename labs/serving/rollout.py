"""A Kubernetes rolling update, simulated: ``maxSurge`` and ``maxUnavailable`` at work.

The Deployment controller replaces ``replicas`` old pods with new ones. At every moment it may
run at most ``replicas + max_surge`` pods and must keep at least ``replicas - max_unavailable``
of them *ready*. New pods take ``startup_steps`` to become ready (readiness probe); old pods are
taken out of the load balancer before they stop, so no request is sent to a dying pod. Requests
that arrive while no pod is ready are dropped, which the simulation counts.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["RolloutStep", "simulate_rollout"]


@dataclass
class RolloutStep:
    old_ready: int
    new_ready: int
    new_starting: int


def simulate_rollout(
    replicas: int,
    max_surge: int,
    max_unavailable: int,
    startup_steps: int = 3,
    requests_per_step: int = 10,
    capacity_per_pod: int = 5,
    max_steps: int = 1000,
) -> tuple[list[RolloutStep], int]:
    """Replace every old pod; return the timeline and the number of dropped requests.

    A request is dropped when the ready pods' total capacity is below ``requests_per_step``.
    """
    if max_surge < 0 or max_unavailable < 0 or max_surge + max_unavailable == 0:
        raise ValueError(
            "simulate_rollout: maxSurge and maxUnavailable cannot both be 0 (the rollout could "
            f"never make progress); got {max_surge}, {max_unavailable}"
        )
    old, new_ready, starting = replicas, 0, []  # starting: steps left for each new pod
    timeline, dropped = [], 0
    for _ in range(max_steps):
        starting = [s - 1 for s in starting]
        new_ready += sum(1 for s in starting if s <= 0)
        starting = [s for s in starting if s > 0]
        # scale down old pods while enough pods stay ready
        min_ready = replicas - max_unavailable
        can_remove = max(0, old + new_ready - min_ready)
        old -= min(old, can_remove)
        # start new pods within the surge budget
        total = old + new_ready + len(starting)
        room = min(replicas + max_surge - total, replicas - new_ready - len(starting))
        starting += [startup_steps] * max(0, room)
        dropped += max(0, requests_per_step - (old + new_ready) * capacity_per_pod)
        timeline.append(RolloutStep(old, new_ready, len(starting)))
        if old == 0 and new_ready == replicas:
            return timeline, dropped
    raise RuntimeError(f"simulate_rollout: not finished after {max_steps} steps")
