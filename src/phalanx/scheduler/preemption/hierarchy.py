"""Preemption in cohort trees: where a preemptor has the advantage, as Kueue decides it.

A job that would borrow from its ClusterQueue may still fit within the quota of a
cohort above it (its *subtree*). Jobs of other queues that use that subtree's quota
from outside it (queues whose lowest common cohort with the preemptor lies above the
subtree) are reclaimable by it whatever ``borrowWithinCohort`` says: the preemptor
has a *hierarchical advantage* over them (Kueue's ``HierarchicalReclaim``; their
reason is ``InCohortReclamation``). Whether it has one is decided per common cohort,
walking up from the queue: the quota of the queue and of each cohort below the
common one is tried in turn, each level's guaranteed part (what its lendingLimit
keeps back) taken off what is left to place.

A job of another queue is a candidate only while that queue, and every cohort
between it and the common cohort, borrows one of the resources in short supply: a
subtree within its quota is not reclaimed from.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from phalanx.scheduler.cache import QuotaCache, QuotaNode
from phalanx.scheduler.workload import FR


def _fits(node: QuotaNode, requests: Mapping[FR, int]) -> tuple[bool, dict[FR, int]]:
    """Whether ``requests`` fit the subtree quota of ``node`` on top of its usage, and what
    is left of them beyond what ``node`` keeps for itself."""
    fits = True
    remaining: dict[FR, int] = {}
    for fr, amount in requests.items():
        used = node.usage.get(fr, 0)
        if used + amount > node.subtree.get(fr, 0):
            fits = False
        local = max(0, node.guaranteed(fr) - used)
        remaining[fr] = max(0, amount - local)
    return fits, remaining


def advantage(node: QuotaNode, requests: Mapping[FR, int]) -> dict[QuotaNode, bool]:
    """Per cohort above ``node``: whether a preemptor of ``node`` asking ``requests`` has the
    hierarchical advantage over jobs whose queues meet ``node``'s there."""
    out: dict[QuotaNode, bool] = {}
    fits, remaining = _fits(node, requests)
    current = node.parent
    while current is not None:
        out[current] = fits
        if not fits:
            fits, remaining = _fits(current, remaining)
        current = current.parent
    return out


def common_cohort(node: QuotaNode, other: QuotaNode) -> QuotaNode | None:
    """The lowest cohort that holds both ``node`` and ``other``."""
    if node.parent is other.parent:
        return node.parent
    ancestors: set[int] = set()
    current = node.parent
    while current is not None:
        ancestors.add(id(current))
        current = current.parent
    current = other.parent
    while current is not None and id(current) not in ancestors:
        current = current.parent
    return current


def borrows_below(cache: QuotaCache, other: QuotaNode, top: QuotaNode | None,
                  frs: Iterable[FR]) -> bool:
    """Whether ``other`` and every cohort between it and ``top`` borrow some of ``frs``."""
    frs = tuple(frs)
    current: QuotaNode | None = other
    while current is not None and current is not top:
        if not cache.is_borrowing(current, frs):
            return False
        current = current.parent
    return True


def fits_below_root(node: QuotaNode, fr: FR, amount: int) -> bool:
    """Whether ``amount`` of ``fr`` for ``node`` fits within some cohort's subtree below the
    root (the queue's own quota counts): preemption may then make room for it even where
    the queue would borrow (Kueue's ``mayReclaimInHierarchy``)."""
    if node.parent is None:
        return False
    used = node.usage.get(fr, 0)
    if used + amount <= node.nominal(fr):
        return True
    remaining = amount - max(0, node.guaranteed(fr) - used)
    current = node.parent
    while current.parent is not None:
        here = current.usage.get(fr, 0)
        if here + remaining <= current.subtree.get(fr, 0):
            return True
        remaining -= max(0, current.guaranteed(fr) - here)
        current = current.parent
    return False
