"""Fair-sharing preemption in a cohort tree, as Kueue runs it.

In a flat cohort, ``VictimSearch.fair`` compares ClusterQueues' shares. In a tree, a
preemptor and a target queue are compared through the two nodes just below their
lowest common cohort (their *almost-LCAs*): the preemptor's subtree, with the
incoming job counted, against the target's subtree before and after a candidate
leaves. Target queues are chosen by walking down from the root, at each cohort into
the child of highest share (a cohort wins a tie with a queue), skipping subtrees
that do not borrow unless they hold the preemptor. A preemptor that stays within
its own quota on what is short reclaims without comparing shares. The second
strategy (LessThanInitialShare) then takes at most the first refused candidate of
each queue, in the same walk.
"""

from __future__ import annotations

from collections.abc import Iterator

from phalanx.scheduler.admitted import least_work_lost
from phalanx.scheduler.cache import QuotaNode
from phalanx.scheduler.fairsharing import dominant_share
from phalanx.scheduler.preemption.hierarchy import common_cohort
from phalanx.scheduler.preemption.search import Source, Target, VictimSearch
from phalanx.scheduler.types import PreemptionReason
from phalanx.scheduler.workload import Workload

R = PreemptionReason
NEGATIVE = -1.0  # below every share: what a cohort without candidates compares as


def in_tree(node: QuotaNode) -> bool:
    """Whether ``node``'s cohort tree has cohorts below its root."""
    return node.root().height > 1


def _borrows(node: QuotaNode) -> bool:
    usage = node.usage
    return any(usage.get(fr, 0) > quota for fr, quota in node.subtree.items())


def _almost(node: QuotaNode, top: QuotaNode | None) -> QuotaNode:
    """The node on the path from ``node`` whose parent is ``top``."""
    while node.parent is not None and node.parent is not top:
        node = node.parent
    return node


def _infinite(node: QuotaNode, share: float) -> bool:
    """A zero-weight node that borrows: its share is above every finite one."""
    return node.weight <= 0.0 and share > 0.0


class _Walk:
    """Kueue's order of target queues over one set of candidates."""

    def __init__(self, preemptor: QuotaNode, cands: dict[str, list[Workload]],
                 queues: dict[str, QuotaNode]) -> None:
        self.preemptor = preemptor
        self.cands = cands
        self.queues = queues
        self.pruned: set[int] = set()
        self.on_path: set[int] = set()
        current = preemptor.parent
        while current is not None:
            self.on_path.add(id(current))
            current = current.parent

    def targets(self) -> Iterator[QuotaNode]:
        root = self.preemptor.root()
        while id(root) not in self.pruned:
            found = self._next(root)
            if found is not None:
                yield found

    def drop(self, queue: QuotaNode) -> None:
        self.pruned.add(id(queue))

    def _next(self, cohort: QuotaNode) -> QuotaNode | None:
        best_queue: QuotaNode | None = None
        queue_share = NEGATIVE
        best_cohort: QuotaNode | None = None
        cohort_share = NEGATIVE
        for child in cohort.children:
            if id(child) in self.pruned:
                continue
            share = dominant_share(child)
            if child.is_cohort:
                if not _borrows(child) and id(child) not in self.on_path:
                    self.pruned.add(id(child))
                elif share >= cohort_share:
                    best_cohort, cohort_share = child, share
                continue
            if (not _borrows(child) and child is not self.preemptor) or not self.cands.get(
                    child.name):
                self.pruned.add(id(child))
            elif best_queue is not None and share == queue_share:
                if _order(self.cands[child.name][0]) < _order(self.cands[best_queue.name][0]):
                    best_queue = child
            elif share > queue_share:
                best_queue, queue_share = child, share
        if best_queue is None and best_cohort is None:
            self.pruned.add(id(cohort))
            return None
        if best_cohort is not None and cohort_share >= queue_share:
            return self._next(best_cohort)
        return best_queue


def _order(c: Workload) -> tuple[bool, int, float, int, str]:
    return (not c.terminating, c.priority, *least_work_lost(c), c.name)


class TreeFairSearch(VictimSearch):
    """``VictimSearch`` whose fair-sharing mode compares subtrees below the common cohort."""

    def fair(self, per_queue: dict[str, tuple[Source, Iterator[Workload]]]
             ) -> list[Target] | None:
        node = self.cq.node
        cands = {name: list(queue) for name, (_, queue) in per_queue.items()}
        # Shares count the incoming job, as Kueue's do; fits() is asked without it.
        self.cache.charge(node.name, self.a.usage, 1, bump=False)
        try:
            targets, fits = self._first(cands)
        finally:
            self.cache.charge(node.name, self.a.usage, -1, bump=False)
        return self._conclude(targets if fits else None, True)

    def _fits_without_incoming(self) -> bool:
        node = self.cq.node
        self.cache.charge(node.name, self.a.usage, -1, bump=False)
        try:
            return self.fits(True)
        finally:
            self.cache.charge(node.name, self.a.usage, 1, bump=False)

    def _shares(self, target: QuotaNode) -> tuple[QuotaNode, QuotaNode, float, float]:
        """The almost-LCAs of the preemptor and of the target, the preemptor's new share and
        the target's old share."""
        node = self.cq.node
        top = common_cohort(node, target)
        mine, theirs = _almost(node, top), _almost(target, top)
        return mine, theirs, dominant_share(mine), dominant_share(theirs)

    def _first(self, cands: dict[str, list[Workload]]) -> tuple[list[Target], bool]:
        node = self.cq.node
        queues = self.cache.cqs
        targets: list[Target] = []
        retry: dict[str, list[Workload]] = {}
        within = not any(self.cache.borrowing_with(node, fr, 0) for fr in self.frs)
        walk = _Walk(node, cands, queues)
        for target in walk.targets():
            if target is node or within:
                c = cands[target.name].pop(0)
                self.take(c)
                targets.append(Target(c, R.IN_CLUSTER_QUEUE if target is node
                                      else R.IN_COHORT_RECLAMATION))
                if self._fits_without_incoming():
                    return targets, True
                continue
            mine, theirs, new_share, old_share = self._shares(target)
            queue = cands[target.name]
            if _infinite(mine, new_share) and not _infinite(theirs, old_share):
                # No candidate of this queue can pass either strategy: kept for the second,
                # which judges on the shares as they will be then.
                retry.setdefault(target.name, []).extend(queue)
                queue.clear()
                continue
            while queue:
                c = queue.pop(0)
                self.cache.charge(c.cluster_queue, c.usage, -1, bump=False)
                after = dominant_share(theirs)
                self.cache.charge(c.cluster_queue, c.usage, 1, bump=False)
                if new_share <= after:
                    self.take(c)
                    targets.append(Target(c, R.IN_COHORT_FAIR_SHARING))
                    if self._fits_without_incoming():
                        return targets, True
                    break
                retry.setdefault(target.name, []).append(c)
        if not retry:
            return targets, False
        return self._second(retry, targets)

    def _second(self, retry: dict[str, list[Workload]], targets: list[Target]
                ) -> tuple[list[Target], bool]:
        """LessThanInitialShare: at most the first refused candidate of each queue."""
        walk = _Walk(self.cq.node, retry, self.cache.cqs)
        for target in walk.targets():
            _, _, new_share, old_share = self._shares(target)
            c = retry[target.name].pop(0)
            if new_share < old_share:
                self.take(c)
                targets.append(Target(c, R.IN_COHORT_FAIR_SHARING))
                if self._fits_without_incoming():
                    return targets, True
            walk.drop(target)
        return targets, False
