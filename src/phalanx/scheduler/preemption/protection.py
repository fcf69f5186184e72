"""Preemption protection: a job that has run less than its ``minRuntime`` is no victim of
another queue's reclaim or fair-sharing preemption (KAI's preemption protection).

A ClusterQueue's ``minRuntime`` protects its jobs, a PriorityClass's the jobs of that
class; the longer of the two counts. Time comes from the driver: each cycle is given the
driver's clock (``Scheduler.cycle(now=...)``), and an admission starts its run at the
clock of the cycle that made it. A cycle given no clock protects nobody, so replays that
pass none decide as before. The guards against thrashing (``thrashing.py``) are judged
here too, against every preemptor.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

from phalanx.scheduler.thrashing import PreemptionHistory, ThrashGuard
from phalanx.scheduler.workload import Workload
from phalanx.spec.config import QueueConfig


class Protection:
    __slots__ = ("by_class", "by_queue", "guard", "next_expiry", "now")

    def __init__(self, by_queue: dict[str, float], by_class: dict[str, float],
                 guard: ThrashGuard | None = None) -> None:
        self.guard = guard
        self.by_queue = by_queue  # ClusterQueue -> minRuntime (seconds), where set
        self.by_class = by_class  # PriorityClass -> minRuntime (seconds), where set
        self.now: float | None = None
        # When the first protection a search ran into ends: jobs that failed for want of
        # those candidates are blocked on capacity versions, which time does not change, so
        # the scheduler bumps them then (``State.expire_protection``).
        self.next_expiry: float | None = None

    @classmethod
    def of(cls, config: QueueConfig, history: PreemptionHistory | None = None) -> Protection:
        return cls(
            {name: cq.min_runtime for name, cq in config.cluster_queues.items()
             if cq.min_runtime},
            {name: pc.min_runtime for name, pc in config.priority_classes.items()
             if pc.min_runtime},
            ThrashGuard.of(config, history) if history is not None else None,
        )

    @property
    def active(self) -> bool:
        return self.now is not None and bool(self.by_queue or self.by_class)

    def min_runtime(self, wl: Workload) -> float:
        by_class = self.by_class.get(wl.spec.priority) if isinstance(wl.spec.priority, str) \
            else None
        return max(self.by_queue.get(wl.cluster_queue, 0.0), by_class or 0.0)

    def protects(self, wl: Workload) -> bool:
        """Whether ``wl`` is still within its minRuntime at the running cycle."""
        now = self.now
        if now is None:
            return False
        least = self.min_runtime(wl)
        if least <= 0 or now - wl.started_at >= least:
            return False
        self._ends(wl.started_at + least)
        return True

    def _ends(self, at: float) -> None:
        if self.next_expiry is None or at < self.next_expiry:
            self.next_expiry = at

    def guarded(self, wl: Workload) -> bool:
        """Whether a guard against thrashing keeps ``wl`` from being a victim now."""
        guard, now = self.guard, self.now
        if guard is None or now is None:
            return False
        until = guard.protected_until(wl, now)
        if until is None:
            return False
        if until != math.inf:
            self._ends(until)
        return True

    def expired(self, now: float | None) -> bool:
        """Whether a protection some search ran into has ended by ``now`` (and forget it)."""
        if now is None or self.next_expiry is None or now < self.next_expiry:
            return False
        self.next_expiry = None
        return True

    def unprotected(self, jobs: Iterator[Workload], preemptor_queue: str) -> Iterator[Workload]:
        """``jobs`` without the protected ones of queues other than ``preemptor_queue``
        (within its own queue a job yields to higher priorities as before)."""
        if self.guard is not None and self.now is not None:
            jobs = (c for c in jobs if c.terminating or not self.guarded(c))
        if not self.active:
            return jobs
        return (c for c in jobs
                if c.terminating or c.cluster_queue == preemptor_queue or not self.protects(c))
