"""Capacity a cohort keeps for a job that waits to borrow it.

A job short of its cohort's free capacity fails; without more, every unit the
cohort frees next goes to whichever lower-priority job borrows next, and a big
job never sees enough of it at once: a stream of small jobs starves it. So a job
that fails for that reason, within its queue's own limits, holds the flavor-
resources it is short of, and lower-priority jobs of its cohort that would
borrow them are held back until it is admitted or gone.

Kueue keeps capacity the same way unless reclaimWithinCohort is Any, which only
helps what a queue lends within its nominal quota; a job that has to borrow
reclaims nothing, so Phalanx keeps it in that case too. Not held back: jobs
within their own nominal quota (that capacity is theirs) and jobs of the same or
higher priority (fair sharing or submission order already ranks those, so small
jobs keep flowing past a big one among equals), nor jobs that rank before it
(under fair sharing, a queue with a lower share goes first whatever it waits for).

A hold lasts across cycles while its job is pending: a cycle that does not look
at the job again (nothing it waits for changed) keeps the hold it had.
"""

from __future__ import annotations

from phalanx.scheduler.cache import QueueInfo, QuotaCache
from phalanx.scheduler.flavorassigner.flavors import Assignment
from phalanx.scheduler.reasons import reserved_reason
from phalanx.scheduler.types import PendingReason
from phalanx.scheduler.workload import FR, Workload


class CohortReservation:
    """Flavor-resources of a cohort kept for a job that waits to borrow them."""

    __slots__ = ("cohort", "frs", "holder")

    def __init__(self, holder: Workload, cohort: str, frs: frozenset[FR]) -> None:
        self.holder = holder
        self.cohort = cohort
        self.frs = frs


class Reservations:
    """The holds of one scheduler, keyed by the cohort whose capacity is kept."""

    def __init__(self) -> None:
        self.holds: dict[str, CohortReservation] = {}
        self.by_holder: dict[str, str] = {}  # holder's name -> cohort

    def __bool__(self) -> bool:
        return bool(self.holds)

    def offer(self, wl: Workload, info: QueueInfo, a: Assignment, cache: QuotaCache) -> None:
        """``wl`` failed on quota: let it hold what it is short of, if that is the cohort's."""
        parent = info.node.parent
        if parent is None:
            return
        held = self.holds.get(parent.name)
        if held is not None and held.holder is not wl and held.holder.priority >= wl.priority:
            return  # a job of at least this priority holds it already
        # A flavor the job could never get enough of (a "never" shortfall) is no reason
        # to keep anything of it.
        never = {s.flavor for s in a.shortfalls if s.never}
        node = info.node
        frs = frozenset(
            fr for s in a.shortfalls if s.flavor not in never
            if (cache.borrowing_with(node, fr := (s.flavor, s.resource), s.need)
                or info.reclaim != "Any")
            and within_borrowing_limits(info, fr, s.need)
        )
        if frs:
            if held is not None:
                self.release(held.holder)
            self.holds[parent.name] = CohortReservation(wl, parent.name, frs)
            self.by_holder[wl.name] = parent.name

    def release(self, wl: Workload) -> None:
        """Whatever ``wl`` held is free (it is looked at again, admitted, or gone)."""
        cohort = self.by_holder.pop(wl.name, None)
        if cohort is not None:
            held = self.holds.get(cohort)
            if held is not None and held.holder is wl:
                del self.holds[cohort]

    def keep_pending(self, jobs: dict[str, Workload]) -> None:
        """Drop the holds of jobs no longer pending (admitted, removed, submitted anew)."""
        for cohort, held in list(self.holds.items()):
            wl = held.holder
            if jobs.get(wl.name) is not wl or wl.admitted:
                del self.holds[cohort]
                self.by_holder.pop(wl.name, None)

    def hold_on(self, wl: Workload, info: QueueInfo, usage: dict[FR, int],
                cache: QuotaCache) -> tuple[CohortReservation, list[FR]] | None:
        """The hold that keeps ``wl`` from borrowing what ``usage`` would, if any,
        with the flavor-resources at stake; whether ``wl`` ranks before the holder (fair
        sharing) is for the caller to judge."""
        parent = info.node.parent
        if parent is None:
            return None
        held = self.holds.get(parent.name)
        if held is None or held.holder.priority <= wl.priority:
            return None
        node = info.node
        hit = sorted(fr for fr, v in usage.items()
                     if fr in held.frs and cache.borrowing_with(node, fr, v))
        return (held, hit) if hit else None


def held_reason(hold: CohortReservation, frs: list[FR]) -> PendingReason:
    holder = hold.holder
    return reserved_reason(holder.name, holder.cluster_queue, holder.priority, hold.cohort, frs)


def within_borrowing_limits(info: QueueInfo, fr: FR, need: int) -> bool:
    """Whether ``need`` more of ``fr`` is within every borrowing limit on the queue's path."""
    node = info.node
    while node.parent is not None:
        q = node.quotas.get(fr)
        if (q is not None and q.borrowing_limit is not None
                and node.usage.get(fr, 0) + need > node.subtree.get(fr, 0) + q.borrowing_limit):
            return False
        node = node.parent
    return True
