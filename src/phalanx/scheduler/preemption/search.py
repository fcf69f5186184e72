"""One preemption search: a what-if in which candidates leave the quota tree until the
preemptor fits, quota and nodes both, and are then put back while it still fits.

``Preemptor.find`` (preemptor.py) picks the candidates and the sources they come
from; a ``VictimSearch`` takes them in order. Classic mode follows Kueue's rules for
borrowing; fair-sharing mode takes from the queues of highest share first, under
LessThanOrEqualToFinalShare, then LessThanInitialShare.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterator

from phalanx.scheduler.admitted import AdmittedJobs
from phalanx.scheduler.cache import QueueInfo, QuotaCache, QuotaNode
from phalanx.scheduler.fairsharing import (
    dominant_share,
    less_than_initial_share,
    less_than_or_equal_to_final_share,
)
from phalanx.scheduler.flavorassigner.flavors import Assignment
from phalanx.scheduler.placement import NodePool, Placement
from phalanx.scheduler.preemption.freed import FreedRoom
from phalanx.scheduler.preemption.hierarchy import advantage, borrows_below, common_cohort
from phalanx.scheduler.types import PreemptionReason
from phalanx.scheduler.workload import FR, UsageKey, Workload

R = PreemptionReason
MAX_NODE_CHECKS = 48  # placements tried per preemption search (not counting hopeless ones)


class Target:
    __slots__ = ("reason", "wl")

    def __init__(self, wl: Workload, reason: PreemptionReason) -> None:
        self.wl = wl
        self.reason = reason


class Source:
    """A queue candidates may come from: its jobs under ``below`` (any priority for None),
    and, in the preemptor's own queue under LowerOrNewerEqualPriority, those of exactly
    the preemptor's priority submitted after ``newer_than``. (A plain class: many are made
    per cycle, and a dataclass's generated constructor is slow in the compiled core.)"""

    __slots__ = ("below", "jobs", "newer_than", "queue")

    def __init__(self, queue: str, jobs: AdmittedJobs, below: int | None,
                 newer_than: Workload | None) -> None:
        self.queue = queue
        self.jobs = jobs
        self.below = below
        self.newer_than = newer_than


class VictimSearch:
    """One what-if: candidates are taken out of the quota tree and put back on restore()."""

    def __init__(self, cache: QuotaCache, pool: NodePool, share: Callable[[QuotaNode], float],
                 wl: Workload, cq: QueueInfo, a: Assignment, frs: list[FR],
                 quota_only: bool = False) -> None:
        self.cache = cache
        self.quota_only = quota_only  # nodes are not asked (the flavor assigner's what-if)
        self.pool = pool
        # A queue's dominant share as the search starts (the preemptor remembers them).
        self.share = share
        self.wl = wl
        self.cq = cq
        self.a = a
        self.frs = frs
        self.removed: list[Workload] = []
        self.tree = cq.node.tree
        self.stamp = self.tree.usage_version  # put back with the usage (see restore)
        # What the removed candidates free, node by node: no placement is tried while the
        # room it leaves is short.
        self.room = FreedRoom(pool, a.groups)
        self.placement: Placement | None = None
        self.node_checks = 0
        node = cq.node
        self.preemptor_borrows = any(
            self.cache.borrowing_with(node, fr, v) for fr, v in a.usage.items()
        )
        bw_limit: int | None = None
        if cq.borrow_within:
            bw_limit = wl.priority
            if cq.borrow_threshold is not None and cq.borrow_threshold < wl.priority:
                bw_limit = cq.borrow_threshold + 1
        self.borrow_below = bw_limit  # other queues' jobs below this may go while borrowing
        # Classic mode: per cohort above the preemptor's queue, whether it has the
        # hierarchical advantage there; and per queue, over that queue's jobs.
        self.advantage: dict[QuotaNode, bool] = {}
        self.advantaged: dict[str, bool] = {}
        # Fair sharing: (queue, usage) -> the queue's share once a job holding that usage left
        # it, at the usage the search starts from (the preemptor's memo of it, shared across
        # searches while usage stays). A queue's share depends on its own usage alone, so an
        # entry holds until something of that queue is taken (``taken``).
        self.after: dict[tuple[str, UsageKey], float] = {}
        self.taken: set[str] = set()

    # ---- what-if bookkeeping
    def take(self, c: Workload) -> None:
        self.taken.add(c.cluster_queue)
        self.cache.charge(c.cluster_queue, c.usage, -1, bump=False)
        self.removed.append(c)
        self.room.add((c.name,))

    def put_back(self, c: Workload) -> None:
        self.cache.charge(c.cluster_queue, c.usage, 1, bump=False)
        self.removed.remove(c)
        self.room.remove(c.name)

    def restore(self) -> None:
        for c in self.removed:
            self.cache.charge(c.cluster_queue, c.usage, 1, bump=False)
        self.removed = []
        # Usage is as it was, so what was remembered of it still holds: the tree gets its
        # stamp back (stamps are never reused, so nothing seen meanwhile can match it).
        self.tree.usage_version = self.stamp
        self.room.reset()

    def fits(self, allow_borrowing: bool) -> bool:
        cache, node = self.cache, self.cq.node
        for fr, v in self.a.usage.items():
            if v > cache.available(node, fr):
                return False
            if not allow_borrowing and cache.borrowing_with(node, fr, v):
                return False
        if self.quota_only:
            return True
        if not self.room.enough():
            return False  # what place() would say, without walking the nodes
        if self.node_checks >= MAX_NODE_CHECKS:
            return False
        self.node_checks += 1
        placed = self.pool.place(self.a.groups, self.wl.topology, freed=self.room.freed)
        if isinstance(placed, Placement):
            self.placement = placed
            return True
        return False

    def fill_back(self, targets: list[Target], allow_borrowing: bool) -> list[Target]:
        """Drop every target the preemptor does not need, last-but-one first."""
        placement = self.placement
        for i in range(len(targets) - 2, -1, -1):
            c = targets[i].wl
            self.put_back(c)
            if self.fits(allow_borrowing):
                placement = self.placement
                del targets[i]
            else:
                self.take(c)
        self.placement = placement
        return targets

    # ---- classic
    def classic(self, cands: list[Workload]) -> list[Target] | None:
        """Kueue's classic preemption. Jobs of other queues over which the preemptor has the
        hierarchical advantage (hierarchy.py) go first and may be taken while it borrows;
        the others only while it would not borrow once admitted, unless borrowWithinCohort
        lets it take those below its threshold."""
        node = self.cq.node
        own = [c for c in cands if c.cluster_queue == self.cq.name]
        if len(own) < len(cands):
            self.advantage = advantage(node, self.a.usage)
            if node.root().height > 1:
                # Candidates over which it has the advantage first (by their order otherwise).
                cands.sort(key=lambda c: (not c.terminating, c.cluster_queue == self.cq.name,
                                          not self._advantaged(c)))
        favoured = [c for c in cands if c.cluster_queue == self.cq.name or self._advantaged(c)]
        if self.borrow_below is not None:
            if not self._under_nominal():
                cands = [c for c in cands if c.priority < self.borrow_below
                         or c.cluster_queue == self.cq.name or self._advantaged(c)]
            return self.minimal(cands, True, self.borrow_below)
        if self._under_nominal():
            # Kueue tries borrowing first when it has the advantage over someone.
            if len(favoured) > len(own):
                found = self.minimal(favoured, True, None)
                if found:
                    return found
            found = self.minimal(cands, False, None)
            if found or len(favoured) > len(own):
                return found
        return self.minimal(favoured, True, None)

    def _advantaged(self, c: Workload) -> bool:
        """Whether the preemptor has the hierarchical advantage over ``c``'s queue."""
        found = self.advantaged.get(c.cluster_queue)
        if found is None:
            other = self.cache.cqs[c.cluster_queue]
            top = common_cohort(self.cq.node, other)
            found = self.advantaged[c.cluster_queue] = top is not None and self.advantage.get(
                top, False)
        return found

    def _under_nominal(self) -> bool:
        node = self.cq.node
        return all(node.usage.get(fr, 0) < node.nominal(fr) for fr in self.frs)

    def _reclaimable(self, c: Workload) -> bool:
        """Whether ``c``'s queue, and each cohort up to the one it shares with the
        preemptor, still borrows what is short (earlier victims may have ended that)."""
        other = self.cache.cqs[c.cluster_queue]
        node = self.cq.node
        if other.parent is node.parent:
            return self.cache.is_borrowing(other, self.frs)
        return borrows_below(self.cache, other, common_cohort(node, other), self.frs)

    def minimal(self, cands: list[Workload], allow_borrowing: bool,
                below: int | None) -> list[Target] | None:
        targets: list[Target] = []
        fits = False
        for c in cands:
            reason = R.IN_CLUSTER_QUEUE
            if c.cluster_queue != self.cq.name:
                reason = R.IN_COHORT_RECLAMATION
                if not self._reclaimable(c):
                    continue
                if below is not None and not self._advantaged(c):
                    if c.priority >= below:
                        allow_borrowing = False
                    else:
                        reason = R.IN_COHORT_RECLAIM_WHILE_BORROWING
            self.take(c)
            targets.append(Target(c, reason))
            if self.fits(allow_borrowing):
                fits = True
                break
        return self._conclude(targets if fits else None, allow_borrowing)

    # ---- fair sharing
    def fair(self, per_queue: dict[str, tuple[Source, Iterator[Workload]]]
             ) -> list[Target] | None:
        """Take from the queues of highest share first; ``per_queue`` (each queue's
        candidates, in candidate order, walked lazily) is consumed."""
        cache, cq, a = self.cache, self.cq, self.a
        node = cq.node
        cqs = cache.cqs
        share = self.share  # good until the first take
        heap = [(-share(cqs[name]), name) for name in per_queue]
        heapq.heapify(heap)
        new_share = dominant_share(node, a.usage)
        targets: list[Target] = []
        retry: list[Workload] = []
        fits = False
        strategy: Callable[[float, float, float], bool] = less_than_or_equal_to_final_share
        while heap and not fits:
            neg_share, name = heapq.heappop(heap)
            src, queue = per_queue[name]
            if name == cq.name:
                c = next(queue, None)
                if c is None:
                    continue
                self.take(c)
                targets.append(Target(c, R.IN_CLUSTER_QUEUE))
                if self.fits(True):
                    fits = True
                    break
                new_share = dominant_share(node, a.usage)
                heapq.heappush(heap, (-dominant_share(cqs[name]), name))
                continue
            other = cqs[name]
            # Candidates of one queue mostly share a handful of sizes, and nothing is taken
            # from ``other`` until this loop breaks: its share after each removal is memoised.
            after_by_usage = self.after if name not in self.taken else {}
            refused = False
            for c in queue:
                below = self.borrow_below is not None and c.priority < self.borrow_below
                after = after_by_usage.get((name, c.usage_key), -1.0)
                if after < 0:
                    after = after_by_usage[(name, c.usage_key)] = dominant_share(
                        other, minus=c.usage)
                if below or strategy(new_share, -neg_share, after):
                    self.take(c)
                    targets.append(Target(c, self._cohort_reason(below)))
                    if self.fits(True):
                        fits = True
                        break
                    if cache.is_borrowing(other, self.frs):
                        heapq.heappush(heap, (-dominant_share(other), name))
                    break
                retry.append(c)
                # After the first refusal, ask whether the queue offers anybody at all: its
                # jobs come in a handful of sizes, and the second strategy reads only the
                # first refused job of each queue, so the rest of the walk can be skipped.
                if not refused and self.borrow_below is None:
                    refused = True
                    if not self._offers_any(src, other, new_share, -neg_share, strategy,
                                            after_by_usage):
                        break
        if not fits and retry:
            by_queue: dict[str, list[Workload]] = {}
            for c in retry:
                if c not in self.removed:
                    by_queue.setdefault(c.cluster_queue, []).append(c)
            second = [(-dominant_share(cqs[name]), name) for name in by_queue]
            heapq.heapify(second)
            while second and not fits:
                neg_share, name = heapq.heappop(second)
                if less_than_initial_share(new_share, -neg_share, 0):
                    c = by_queue[name][0]
                    self.take(c)
                    targets.append(Target(c, self._cohort_reason(False)))
                    fits = self.fits(True)
        return self._conclude(targets if fits else None, True)

    def _conclude(self, targets: list[Target] | None, allow_borrowing: bool
                  ) -> list[Target] | None:
        """The minimal set of ``targets`` (None: the search failed), the tree put back."""
        found = self.fill_back(targets, allow_borrowing) if targets is not None else None
        self.restore()
        return found

    def _offers_any(self, src: Source, other: QuotaNode, new_share: float, share: float,
                    strategy: Callable[[float, float, float], bool],
                    after_by_usage: dict[tuple[str, UsageKey], float]) -> bool:
        """Whether ``strategy`` lets some job of ``src`` (any of its sizes) go;
        ``after_by_usage`` remembers ``other``'s shares after a removal, as ``fair`` does."""
        frs = self.frs
        name = other.name
        for u in src.jobs.counts(src.below):
            if not u.uses(frs):
                continue
            after = after_by_usage.get((name, u.key), -1.0)
            if after < 0:
                after = after_by_usage[(name, u.key)] = dominant_share(other, minus=u.usage)
            if strategy(new_share, share, after):
                return True
        return False

    def _cohort_reason(self, below_threshold: bool) -> PreemptionReason:
        if below_threshold:
            return R.IN_COHORT_RECLAIM_WHILE_BORROWING
        if not self.preemptor_borrows:
            return R.IN_COHORT_RECLAMATION
        return R.IN_COHORT_FAIR_SHARING
