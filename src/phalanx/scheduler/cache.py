"""Quota usage per ClusterQueue and per cohort tree: what each queue may still use.

The model is Kueue's hierarchical one. Every ClusterQueue and Cohort is a node
with a *subtree quota* per (flavor, resource): a ClusterQueue's is its nominal
quota; a cohort's is its own quota plus what each child puts in the pool (the
child's subtree quota minus its *guaranteed* part, ``subtree - lendingLimit``,
which it keeps for itself). A child's usage counts against its parent only
above its guaranteed part. Borrowing walks up the tree, capped at each level by
``borrowingLimit``. Usage is updated incrementally on admit/release and each tree
carries version counters so pending jobs that failed are only looked at again
once capacity could have changed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from phalanx.scheduler.workload import FR, PODS
from phalanx.spec.config import QueueConfig
from phalanx.spec.resources import ClusterQueue, ResourceFlavor, ResourceGroup

NEVER = "Never"


@dataclass(frozen=True, slots=True)
class Quota:
    nominal: int
    borrowing_limit: int | None
    lending_limit: int | None


class Tree:
    """Version counters of one cohort tree (or of a ClusterQueue without a cohort)."""

    __slots__ = ("any_version", "free_version", "name", "usage_version")

    def __init__(self, name: str) -> None:
        self.name = name
        self.free_version = 0  # bumped when capacity is released or quotas change
        self.any_version = 0  # bumped on every usage change (admissions create candidates)
        # Changed by every charge, what-ifs and holds included, to a stamp never used before
        # (so a what-if that puts usage back can put the stamp back too).
        self.usage_version = 0


class QuotaNode:
    __slots__ = (
        "children", "height", "is_cohort", "lendable", "name", "parent", "quotas", "subtree",
        "tree", "usage", "weight",
    )

    def __init__(self, name: str, is_cohort: bool, quotas: dict[FR, Quota],
                 weight: float) -> None:
        self.name = name
        self.is_cohort = is_cohort
        self.quotas = quotas
        self.parent: QuotaNode | None = None
        self.children: list[QuotaNode] = []
        self.subtree: dict[FR, int] = {}
        self.usage: dict[FR, int] = {}
        self.weight = float(weight)  # fair sharing's weight, as Kueue reads it (a float)
        # Per resource name: the subtree quota summed over flavors (fair sharing's denominator
        # for this node's children).
        self.lendable: dict[str, int] = {}
        self.tree = Tree(name)
        # 0 for a ClusterQueue; a cohort is one above its highest child cohort (and at least 1
        # with any child): how far up the tree a job borrows from, counted as Kueue does.
        self.height = 0

    def guaranteed(self, fr: FR) -> int:
        q = self.quotas.get(fr)
        if q is None or q.lending_limit is None:
            return 0
        return max(0, self.subtree.get(fr, 0) - q.lending_limit)

    def nominal(self, fr: FR) -> int:
        return self.subtree.get(fr, 0)

    def root(self) -> QuotaNode:
        node = self
        while node.parent is not None:
            node = node.parent
        return node


def quotas_of(groups: Iterable[ResourceGroup]) -> dict[FR, Quota]:
    return {
        (f.name, q.name): Quota(q.nominal_quota, q.borrowing_limit, q.lending_limit)
        for g in groups for f in g.flavors for q in f.resources
    }


class QuotaCache:
    """Usage and limits of every ClusterQueue and cohort; cheap available() look-ups."""

    def __init__(self, config: QueueConfig) -> None:
        self.cqs: dict[str, QuotaNode] = {}
        self.cohorts: dict[str, QuotaNode] = {}
        self._stamps = 0  # the last usage stamp handed out, in any tree
        for name in sorted(config.cohorts):
            co = config.cohorts[name]
            self.cohorts[name] = QuotaNode(name, True, quotas_of(co.resource_groups),
                                           co.fair_sharing.weight)
        for name in sorted(config.cluster_queues):
            cq = config.cluster_queues[name]
            self.cqs[name] = QuotaNode(name, False, quotas_of(cq.resource_groups),
                                       cq.fair_sharing.weight)
        for name, node in self.cohorts.items():
            parent = config.cohorts[name].parent
            if parent is not None:
                node.parent = self.cohorts[parent]
                node.parent.children.append(node)
        for name, node in self.cqs.items():
            cohort = config.cluster_queues[name].cohort
            if cohort is not None:
                node.parent = self.cohorts[cohort]
                node.parent.children.append(node)
        for node in [*self.cqs.values(), *self.cohorts.values()]:
            if node.parent is None:
                self._fill_subtree(node)
                tree = node.tree
                stack = [node]
                while stack:
                    current = stack.pop()
                    current.tree = tree
                    stack.extend(current.children)

    def _fill_subtree(self, node: QuotaNode) -> None:
        subtree = {fr: q.nominal for fr, q in node.quotas.items()}
        node.height = min(len(node.children), 1)
        for child in node.children:
            self._fill_subtree(child)
            if child.is_cohort:
                node.height = max(node.height, child.height + 1)
            for fr, amount in child.subtree.items():
                subtree[fr] = subtree.get(fr, 0) + amount - child.guaranteed(fr)
        node.subtree = subtree
        lendable: dict[str, int] = {}
        for (_, resource), amount in subtree.items():
            lendable[resource] = lendable.get(resource, 0) + amount
        node.lendable = lendable

    # ------------------------------------------------------------------ usage
    def charge(self, cq: str, usage: Mapping[FR, int], sign: int = 1, *,
               bump: bool = True) -> None:
        """Add (sign=1) or remove (sign=-1) usage of a ClusterQueue, up through its tree.

        A child's contribution to its parent is always ``max(0, usage - guaranteed)``.
        ``bump=False`` is for what-if simulations and cycle-local holds.
        """
        node = self.cqs.get(cq)
        if node is None:
            return
        tree = node.tree
        self._stamps += 1
        tree.usage_version = self._stamps
        for fr, amount in usage.items():
            delta = sign * amount
            current: QuotaNode | None = node
            while current is not None and delta:
                before = current.usage.get(fr, 0)
                after = before + delta
                current.usage[fr] = after
                g = current.guaranteed(fr)
                delta = max(0, after - g) - max(0, before - g)
                current = current.parent
        if bump:
            tree.any_version += 1
            if sign < 0:
                tree.free_version += 1

    # ------------------------------------------------------------------ queries
    def available(self, node: QuotaNode, fr: FR) -> int:
        """What ``node`` could still use of ``fr`` now, borrowing included."""
        used = node.usage.get(fr, 0)
        parent = node.parent
        if parent is None:
            return node.subtree.get(fr, 0) - used
        g = node.guaranteed(fr)
        local = g - used if g > used else 0
        from_parent = self.available(parent, fr)
        q = node.quotas.get(fr)
        if q is not None and q.borrowing_limit is not None:
            stored = node.subtree.get(fr, 0) - g
            in_parent = used - g if used > g else 0
            cap = stored - in_parent + q.borrowing_limit
            if cap < from_parent:
                from_parent = cap
        return local + from_parent

    def potential(self, node: QuotaNode, fr: FR) -> int:
        """The most ``node`` could ever use of ``fr`` (everything else idle)."""
        if node.parent is None:
            return node.subtree.get(fr, 0)
        most = node.guaranteed(fr) + self.potential(node.parent, fr)
        q = node.quotas.get(fr)
        if q is not None and q.borrowing_limit is not None:
            most = min(most, node.subtree.get(fr, 0) + q.borrowing_limit)
        return most

    def borrowing_with(self, node: QuotaNode, fr: FR, amount: int) -> bool:
        return node.parent is not None and node.usage.get(fr, 0) + amount > node.nominal(fr)

    def borrow_level(self, node: QuotaNode, fr: FR, amount: int) -> int:
        """How far up the tree ``amount`` more of ``fr`` would be borrowed from: 0 within the
        queue's own quota, else the height of the lowest cohort on its path whose subtree
        quota holds the rest (after what each level keeps for itself), or of the root when
        none does. Jobs borrowing from nearer go first (Kueue's order without fair sharing).
        """
        used = node.usage.get(fr, 0)
        if node.parent is None or used + amount <= node.nominal(fr):
            return 0
        remaining = amount - max(0, node.guaranteed(fr) - used)
        current: QuotaNode | None = node.parent
        while current is not None:
            here = current.usage.get(fr, 0)
            if here + remaining <= current.subtree.get(fr, 0):
                return current.height
            remaining -= max(0, current.guaranteed(fr) - here)
            current = current.parent
        return node.root().height

    def is_borrowing(self, node: QuotaNode, frs: Iterable[FR]) -> bool:
        usage, subtree = node.usage, node.subtree
        return any(usage.get(fr, 0) > subtree.get(fr, 0) for fr in frs)

    def cohort_lends(self, node: QuotaNode, fr: FR) -> int:
        """What the cohort could lend ``node`` beyond its own nominal right now."""
        if node.parent is None:
            return 0
        own_free = max(0, node.nominal(fr) - node.usage.get(fr, 0))
        return max(0, self.available(node, fr) - own_free)

    def own_limit(self, node: QuotaNode, fr: FR) -> int | None:
        """The queue's own cap on ``fr`` (nominal, plus borrowingLimit in a cohort)."""
        q = node.quotas.get(fr)
        nominal = node.nominal(fr)
        if node.parent is None:
            return nominal
        if q is not None and q.borrowing_limit is not None:
            return nominal + q.borrowing_limit
        return None

    def queues_in_tree(self, node: QuotaNode) -> list[QuotaNode]:
        root = node.root()
        out: list[QuotaNode] = []
        stack = [root]
        while stack:
            current = stack.pop()
            if current.is_cohort:
                stack.extend(current.children)
            else:
                out.append(current)
        out.sort(key=lambda n: n.name)
        return out


# --------------------------------------------------------------------------- static queue info
@dataclass(frozen=True, slots=True)
class FlavorRef:
    name: str
    node_labels: tuple[tuple[str, str], ...]
    flavor: ResourceFlavor


@dataclass(frozen=True, slots=True)
class GroupInfo:
    resources: frozenset[str]
    flavors: tuple[FlavorRef, ...]


class QueueInfo:
    """A ClusterQueue's static configuration in the shape the cycle needs."""

    __slots__ = (
        "avoid_degraded", "borrow_threshold", "borrow_within", "can_preempt", "covers_pods",
        "group_of", "groups", "hold_after", "hold_gpus", "name", "node", "reclaim", "spec",
        "stop_policy", "strict", "when_can_borrow", "when_can_preempt", "within",
    )

    def __init__(self, spec: ClusterQueue, config: QueueConfig, node: QuotaNode) -> None:
        self.name = spec.name
        self.spec = spec
        self.node = node
        self.groups = tuple(
            GroupInfo(
                frozenset(g.covered_resources),
                tuple(
                    FlavorRef(f.name, tuple(sorted(config.flavors[f.name].node_labels.items())),
                              config.flavors[f.name])
                    for f in g.flavors
                ),
            )
            for g in spec.resource_groups
        )
        self.group_of = {r: i for i, g in enumerate(self.groups) for r in g.resources}
        self.covers_pods = PODS in self.group_of
        self.strict = spec.queueing_strategy == "StrictFIFO"
        # holdForLargeGangs: a head of hold_gpus GPUs or more (0: never) that has waited
        # hold_after seconds makes a BestEffortFIFO queue strict while it waits.
        hold = spec.hold_for_large_gangs
        self.hold_gpus = 0 if hold is None or self.strict else hold.min_gpus
        self.hold_after = 0.0 if hold is None else hold.after
        self.within = spec.preemption.within_cluster_queue
        self.reclaim = spec.preemption.reclaim_within_cohort
        bwc = spec.preemption.borrow_within_cohort
        self.borrow_within = bwc is not None and bwc.policy != NEVER
        self.borrow_threshold = bwc.max_priority_threshold if bwc is not None else None
        self.when_can_borrow = spec.flavor_fungibility.when_can_borrow
        self.when_can_preempt = spec.flavor_fungibility.when_can_preempt
        self.stop_policy = spec.stop_policy
        self.avoid_degraded = spec.avoid_degraded_nodes
        in_cohort = node.parent is not None
        self.can_preempt = self.within != NEVER or (in_cohort and self.reclaim != NEVER)
