"""A ClusterQueue's admitted jobs, indexed the way preemption reads them.

Preemption asks three things of a queue many times per cycle: how many of its
jobs below some priority use the resources in short supply and how much they
hold (a sum), whether removing one of them would change a fair-sharing verdict
(which depends only on the job's usage), and, rarely, the jobs themselves in
candidate order (lowest priority first, most recently admitted first). Jobs are
kept per priority in admission order, which is that order read backwards, and
counted per distinct usage, of which a queue has a handful however many jobs
it runs; the first two questions then cost a few distinct usages, not a walk
over every admitted job.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator

from phalanx.scheduler.workload import FR, UsageKey, Workload


class UsageCount:
    """How many admitted jobs of one priority hold exactly ``usage`` (``key``, sorted)."""

    __slots__ = ("count", "key", "usage")

    def __init__(self, usage: dict[FR, int], key: UsageKey) -> None:
        self.count = 0
        self.usage = usage
        self.key = key

    def uses(self, frs: list[FR]) -> bool:
        usage = self.usage
        return any(fr in usage for fr in frs)


class AdmittedJobs:
    __slots__ = ("by_priority", "checkpointed", "jobs", "priorities", "sorted", "terminating",
                 "usages")

    def __init__(self) -> None:
        self.jobs: dict[str, Workload] = {}
        self.priorities: list[int] = []  # ascending; each has a non-empty bucket
        self.by_priority: dict[int, dict[str, Workload]] = {}  # in admission order
        self.usages: dict[int, dict[UsageKey, UsageCount]] = {}
        self.terminating: dict[str, Workload] = {}
        self.checkpointed = 0  # jobs that reported a checkpoint: their order is by work lost
        self.sorted: dict[int, list[Workload]] = {}  # per priority, by least work lost

    def __len__(self) -> int:
        return len(self.jobs)

    def __bool__(self) -> bool:
        return bool(self.jobs)

    def add(self, wl: Workload) -> None:
        """Index an admitted job; jobs must arrive in admission order."""
        self.jobs[wl.name] = wl
        p = wl.priority
        bucket = self.by_priority.get(p)
        if bucket is None:
            bucket = self.by_priority[p] = {}
            self.usages[p] = {}
            bisect.insort(self.priorities, p)
        bucket[wl.name] = wl
        self.sorted.pop(p, None)
        counts = self.usages[p]
        found = counts.get(wl.usage_key)
        if found is None:
            found = counts[wl.usage_key] = UsageCount(wl.usage, wl.usage_key)
        found.count += 1
        if wl.terminating:
            self.terminating[wl.name] = wl
        if wl.checkpoint_at:
            self.checkpointed += 1

    def discard(self, wl: Workload) -> None:
        if self.jobs.pop(wl.name, None) is None:
            return
        self.terminating.pop(wl.name, None)
        if wl.checkpoint_at:
            self.checkpointed -= 1
        p = wl.priority
        bucket = self.by_priority[p]
        del bucket[wl.name]
        self.sorted.pop(p, None)
        counts = self.usages[p]
        found = counts[wl.usage_key]
        found.count -= 1
        if not found.count:
            del counts[wl.usage_key]
        if not bucket:
            del self.by_priority[p]
            del self.usages[p]
            self.priorities.remove(p)

    def note_checkpoint(self, wl: Workload, at: float) -> None:
        """An admitted job of this queue saved its work at ``at``."""
        if wl.name in self.jobs and not wl.checkpoint_at:
            self.checkpointed += 1
        wl.checkpoint_at = at
        self.sorted.pop(wl.priority, None)

    def mark_terminating(self, wl: Workload) -> None:
        wl.terminating = True
        if wl.name in self.jobs:
            self.terminating[wl.name] = wl

    # ------------------------------------------------------------------ reads
    def below(self, priority: int | None) -> list[int]:
        """The priorities under ``priority`` (all of them for None), ascending."""
        if priority is None:
            return self.priorities
        return self.priorities[:bisect.bisect_left(self.priorities, priority)]

    def counts(self, priority: int | None) -> Iterator[UsageCount]:
        """Every distinct usage of the jobs under ``priority`` (all for None)."""
        usages = self.usages
        for p in self.below(priority):
            yield from usages[p].values()

    def in_order(self, priority: int | None, newer_than: Workload | None = None,
                 admitted_by: int | None = None) -> Iterator[Workload]:
        """The jobs under ``priority`` in candidate order: terminating ones first, then lowest
        priority, least work lost first (``least_work_lost``). ``newer_than`` adds the jobs
        of exactly ``priority`` submitted after that job. ``admitted_by`` leaves out the jobs
        admitted after that admission sequence number (this cycle's: a job is never preempted
        in the cycle that admitted it)."""
        # (A terminating job was admitted in an earlier cycle: nothing preempts this cycle's.)
        if self.terminating:
            gone = sorted(
                (c for c in self.terminating.values()
                 if _qualifies(c, priority, newer_than)),
                key=lambda c: (c.priority, -c.admitted_seq),
            )
            yield from gone
        last = (1 << 62) if admitted_by is None else admitted_by
        for p in self.below(priority):
            for c in self._least_work_lost(p):
                if not c.terminating and c.admitted_seq <= last:
                    yield c
        if newer_than is not None and priority is not None:
            for c in self._least_work_lost(priority):
                if not c.terminating and c.admitted_seq <= last and c.newer_than(newer_than):
                    yield c

    def _least_work_lost(self, priority: int) -> Iterator[Workload]:
        """One priority's jobs, least work lost first. Without checkpoints the work at risk
        is the time since start, which admission order already gives (read backwards);
        with them the order is sorted once until that priority's jobs change."""
        bucket = self.by_priority.get(priority)
        if not bucket:
            return iter(())
        if not self.checkpointed:
            return reversed(bucket.values())
        found = self.sorted.get(priority)
        if found is None:
            found = self.sorted[priority] = sorted(bucket.values(), key=least_work_lost)
        return iter(found)


def least_work_lost(c: Workload) -> tuple[float, int]:
    """Equal candidates' order: the one whose last checkpoint (or start) is latest first,
    then the most recently admitted."""
    return (-c.work_since, -c.admitted_seq)


def _qualifies(c: Workload, priority: int | None, newer_than: Workload | None) -> bool:
    if priority is None or c.priority < priority:
        return True
    return newer_than is not None and c.priority == priority and c.newer_than(newer_than)
