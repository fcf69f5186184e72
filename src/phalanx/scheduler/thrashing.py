"""No thrashing: a job stopped again and again is protected from more preemptions.

Two guards, set in a ClusterQueue's ``preemption`` and holding for its jobs against every
preemptor (their own queue's higher priorities, reclaim, fair sharing):

* ``protectAfterStart``: after each start a job is no victim for this long. Unset, it is
  the job's checkpoint interval once the job has reported one (the time from a run's
  start or last save to its next save), so a restarted job keeps at least one save of
  every run; a job that never saved has no default protection. 0 turns it off.
* ``maxPreemptions`` in ``maxPreemptionsWindow``: a job preempted that many times within
  the window is no victim until it ends (0 turns the cap off). Each run counts once,
  however many cycles name it a victim before it stops.

Time is the driver's, as for minRuntime (``protection.py``): preemptions are counted and
protections judged only in cycles given a clock. A job's history lives as long as the
scheduler knows the job (``forget`` when it is removed); a configuration change keeps it.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from dataclasses import dataclass

from phalanx.scheduler.workload import Workload
from phalanx.spec.config import QueueConfig


@dataclass(frozen=True, slots=True)
class Guard:
    """One ClusterQueue's settings (seconds; None: from the checkpoint interval)."""

    protect_after_start: float | None
    max_preemptions: int
    window: float


class PreemptionHistory:
    """Per job: when its runs were preempted, and its checkpoint interval."""

    __slots__ = ("capped", "counted", "interval", "times")

    def __init__(self) -> None:
        self.times: dict[str, list[float]] = {}  # job -> its preemptions' clock, ascending
        self.counted: dict[str, float] = {}  # job -> start of the last run counted
        self.interval: dict[str, float] = {}  # job -> seconds between its saves, as seen
        self.capped: set[str] = set()  # jobs no victim until they end

    def checkpoint(self, wl: Workload, at: float) -> None:
        """``wl`` saved at ``at``: the time since its run's start or last save is its
        interval."""
        if wl.admitted and at > wl.work_since:
            self.interval[wl.name] = at - wl.work_since

    def forget(self, name: str) -> None:
        self.times.pop(name, None)
        self.counted.pop(name, None)
        self.interval.pop(name, None)
        self.capped.discard(name)

    def count(self, name: str, now: float, window: float) -> int:
        times = self.times.get(name)
        if not times:
            return 0
        return len(times) - bisect_left(times, now - window)


class ThrashGuard:
    """The guards of one configuration over the scheduler's preemption history."""

    __slots__ = ("by_queue", "history")

    def __init__(self, by_queue: dict[str, Guard], history: PreemptionHistory) -> None:
        self.by_queue = by_queue
        self.history = history

    @classmethod
    def of(cls, config: QueueConfig, history: PreemptionHistory) -> ThrashGuard:
        by_queue = {}
        for name, cq in config.cluster_queues.items():
            p = cq.preemption
            by_queue[name] = Guard(p.protect_after_start, *p.preemption_cap)
        return cls(by_queue, history)

    def preempted(self, wl: Workload, now: float) -> None:
        """``wl``'s current run is stopped by a preemption decided at ``now``; at its
        queue's cap it is no victim from then on."""
        history = self.history
        name = wl.name
        if history.counted.get(name) == wl.started_at:
            return  # named a victim again before it stopped: one run, one preemption
        history.counted[name] = wl.started_at
        history.times.setdefault(name, []).append(now)
        guard = self.by_queue.get(wl.cluster_queue)
        if guard is not None and guard.max_preemptions \
                and history.count(name, now, guard.window) >= guard.max_preemptions:
            history.capped.add(name)

    def protected_until(self, wl: Workload, now: float) -> float | None:
        """Until when ``wl`` is no victim at ``now`` (inf: until it ends), or None."""
        history = self.history
        name = wl.name
        if name in history.capped:
            return math.inf
        guard = self.by_queue.get(wl.cluster_queue)
        if guard is None:
            return None
        after = guard.protect_after_start
        if after is None:
            after = history.interval.get(name)
        if after and now < wl.started_at + after:
            return wl.started_at + after
        return None
