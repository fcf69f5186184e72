"""The order in which one cycle looks at the ClusterQueues' heads, as Kueue orders them.

Without fair sharing, jobs that do not borrow go first, then those borrowing from
nearer in the cohort tree (``QuotaCache.borrow_level``), then priority and time.

With fair sharing, Kueue runs a tournament at every cohort, from the leaves up: among
a cohort's children, a head whose child subtree would not borrow on the flavors and
resources the head asks for goes before one whose subtree would
(``FairSharingPrioritizeNonBorrowing``, on by default), then the lower dominant
resource share, then priority and time. One global heap stands for the tournament
here: a head's key starts with whether the nodes on its path borrow once it is
added, the topmost first (so a head whose top-level subtree stays within its quota
beats one whose subtree borrows, whatever happens further down), then its queue's
share. A queue that borrows on another flavor only is not held back.
"""

from __future__ import annotations

from phalanx.scheduler.cache import QueueInfo, QuotaCache, QuotaNode
from phalanx.scheduler.fairsharing import dominant_share
from phalanx.scheduler.workload import FR, Workload

# (whether and how it borrows, share, -priority, submission time, sequence number)
GlobalKey = tuple[int, float, int, float, int]


def estimate(wl: Workload, info: QueueInfo) -> dict[FR, int]:
    """The job's usage if it got the first flavor of each group: for ordering only."""
    if wl.estimate is None:
        est: dict[FR, int] = {}
        for ps in wl.pod_sets:
            for res, per_pod in ps.requests:
                g = info.group_of.get(res)
                if g is not None:
                    fr = (info.groups[g].flavors[0].name, res)
                    est[fr] = est.get(fr, 0) + per_pod * ps.count
        wl.estimate = est
    return wl.estimate


def borrowing_path(node: QuotaNode, est: dict[FR, int]) -> int:
    """Which nodes on the path from ``node`` up to the root's children would borrow on the
    flavor-resources of ``est`` once it is added: one bit per level, the topmost the most
    significant (0: none borrows). Usage reaches a parent only above what each level
    keeps for itself (its lendingLimit), as ``QuotaCache.charge`` adds it."""
    parent = node.parent
    if parent is not None and parent.parent is None:  # a flat cohort: the queue alone
        usage, subtree = node.usage, node.subtree
        for fr, amount in est.items():
            if amount > 0 and usage.get(fr, 0) + amount > subtree.get(fr, 0):
                return 1
        return 0
    path: list[QuotaNode] = []
    current: QuotaNode | None = node
    while current is not None and current.parent is not None:
        path.append(current)
        current = current.parent
    # The topmost level weighs most, whatever the depth of the queue: the root's height
    # is at least the length of any path below it.
    shift = node.root().height - len(path)
    bits = 0
    for fr, amount in est.items():
        if amount <= 0:
            continue
        delta = amount
        for level, here in enumerate(path):
            before = here.usage.get(fr, 0)
            after = before + delta
            if after > here.subtree.get(fr, 0):
                bits |= 1 << (shift + level)
            g = here.guaranteed(fr)
            delta = max(0, after - g) - max(0, before - g)
    return bits


def global_key(wl: Workload, info: QueueInfo, cache: QuotaCache, fair_sharing: bool
               ) -> GlobalKey:
    est = estimate(wl, info)
    node = info.node
    if fair_sharing:
        if node.parent is None:
            return (0, 0.0, -wl.priority, wl.submitted_at, wl.seq)
        return (borrowing_path(node, est), dominant_share(node, est), -wl.priority,
                wl.submitted_at, wl.seq)
    # Jobs that do not borrow first, then those borrowing from nearer in the tree.
    level = 0
    for fr, v in est.items():
        level = max(level, cache.borrow_level(node, fr, v))
    return (level, 0.0, -wl.priority, wl.submitted_at, wl.seq)
