"""Flavor assignment: which ResourceFlavor each pod set uses, then whether its pods fit on nodes.

Per pod set and resource group, flavors are tried in the ClusterQueue's list
order. A flavor is eligible when the pod set's nodeSelector does not contradict
its nodeLabels and the pods (with the flavor's tolerations) tolerate its
nodeTaints. Each flavor gets a mode (fits, fits by borrowing, needs preemption,
never fits) and flavor fungibility (whenCanBorrow / whenCanPreempt) decides
whether to stop there or try the next one, keeping the best seen
(BorrowingOverPreemption: fit > fit while borrowing > preempt > preempt while
borrowing). Finally the gang must fit on nodes of the chosen flavors
(``NodePool.place``); if it does not, the next flavor is tried. Pod sets with
minReplicas shrink only once the full size can neither fit nor preempt
(``Assigner.reduce``, driven by the cycle, which knows about preemption).
"""

from __future__ import annotations

from collections.abc import Callable

from phalanx.scheduler.cache import FlavorRef, QueueInfo, QuotaCache, QuotaNode
from phalanx.scheduler.placement import NodePool, Placement, PlacementFailure, PodGroup
from phalanx.scheduler.preemption.hierarchy import fits_below_root
from phalanx.scheduler.workload import FR, POD_MILLIS, PODS, PodSetDemand, Workload
from phalanx.spec.resources import (
    HEALTH_LABEL,
    HEALTH_LABEL_VALUES,
    NodeHealth,
    Toleration,
    tolerates_all,
)

NOFIT, PREEMPT, FIT = 0, 1, 2
# How preemption would make room on a flavor (Kueue's preemption modes, worst first): nobody
# to take; jobs of the preemptor's own queue needed; jobs of other queues alone (reclaim).
NO_CANDIDATES, PREEMPT_IN_QUEUE, RECLAIM = 0, 1, 2
MAX_NODE_RETRIES = 8


# Plain classes rather than dataclasses: several are made per job looked at, and a
# dataclass's generated constructor runs as Python even in the compiled core.
class Shortfall:
    """Why a flavor did not simply fit: ``need`` of ``resource`` vs what was ``available``."""

    __slots__ = ("available", "flavor", "need", "never", "resource")

    def __init__(self, flavor: str, resource: str, need: int, available: int,
                 never: bool) -> None:
        self.flavor = flavor
        self.resource = resource
        self.need = need
        self.available = available
        self.never = never  # more than the queue could ever get


class Choice:
    __slots__ = ("count", "flavors", "pod_set")

    def __init__(self, pod_set: PodSetDemand, count: int, flavors: dict[str, str]) -> None:
        self.pod_set = pod_set
        self.count = count
        self.flavors = flavors  # resource -> flavor (requested resources, plus pods if covered)


class Assignment:
    __slots__ = ("borrowing", "choices", "groups", "mode", "no_flavor", "node_failure",
                 "placement", "shortfalls", "usage")

    def __init__(self, mode: int) -> None:
        self.mode = mode
        self.choices: list[Choice] = []
        self.usage: dict[FR, int] = {}
        self.borrowing = False
        self.shortfalls: list[Shortfall] = []
        self.no_flavor = ""  # set when no flavor can ever serve a pod set, with the reason
        self.groups: tuple[PodGroup, ...] = ()
        self.placement: Placement | None = None
        self.node_failure: PlacementFailure | None = None

    @property
    def counts(self) -> tuple[int, ...]:
        return tuple(c.count for c in self.choices)


def _score(mode: int, borrow: bool, how: int = PREEMPT_IN_QUEUE) -> int:
    """A flavor's rank (higher is better; 0 never): fit, then reclaim in the cohort, then
    preemption in the queue itself (``how``), each without borrowing before with it
    (Kueue's BorrowingOverPreemption)."""
    if mode == NOFIT:
        return 0
    rank = 4 if mode == FIT else 1 + how
    return 2 * rank + (0 if borrow else 1)


def _toleration_key(tolerations: tuple[Toleration, ...]) -> tuple[object, ...]:
    return tuple((t.key, t.operator, t.value, t.effect) for t in tolerations)


def flavor_mismatch(ps: PodSetDemand, flavor: FlavorRef) -> str:
    """Why ``flavor`` can never serve ``ps`` ("" when it can)."""
    labels = dict(flavor.node_labels)
    for key, value in ps.selector:
        if key in labels and labels[key] != value:
            return (f"its nodeSelector {key}={value} contradicts flavor {flavor.name}'s "
                    f"label {key}={labels[key]}")
    f = flavor.flavor
    if f.node_taints and not tolerates_all([*ps.tolerations, *f.tolerations], f.node_taints):
        taint = f.node_taints[0]
        return (f"it does not tolerate flavor {flavor.name}'s taint "
                f"{taint.key}={taint.value}:{taint.effect}")
    return ""


class Assigner:
    """Flavor assignment for one configuration; caches flavor eligibility per pod shape."""

    def __init__(self, cache: QuotaCache, pool: NodePool) -> None:
        self.cache = cache
        self.pool = pool
        self.fair_sharing = True
        # Whether preemption could make room for the given shortfalls (Kueue's preemption
        # oracle): a flavor with nobody to preempt counts as not fitting, so the next is tried.
        self.oracle: Callable[[Workload, QueueInfo, dict[FR, int]], bool] | None = None
        # How preemption would make room for an amount of a flavor-resource, and whether the
        # queue still borrows after (Preemptor.simulate): asked only when a group has
        # several flavors to choose from.
        self.simulate: Callable[[Workload, QueueInfo, FR, int], tuple[int, bool]] | None = None
        self._eligible: dict[tuple[object, ...], str] = {}

    def mismatch(self, ps: PodSetDemand, flavor: FlavorRef) -> str:
        key = (ps.selector, _toleration_key(ps.tolerations), flavor.name)
        found = self._eligible.get(key)
        if found is None:
            found = self._eligible[key] = flavor_mismatch(ps, flavor)
        return found

    # ------------------------------------------------------------------ quota
    def assign_quota(self, wl: Workload, cq: QueueInfo, counts: tuple[int, ...],
                     excluded: frozenset[tuple[int, int, str]] = frozenset()) -> Assignment:
        cache, node = self.cache, cq.node
        preempt_borrowing = cq.borrow_within or (self.fair_sharing and node.parent is not None)
        out = Assignment(FIT)
        usage = out.usage
        for i, (ps, n) in enumerate(zip(wl.pod_sets, counts, strict=True)):
            needed: dict[int, dict[str, int]] = {}
            for res, per_pod in ps.requests:
                g = cq.group_of.get(res)
                if g is None:
                    out.mode = NOFIT
                    out.no_flavor = (f"pod set {ps.name} requests {res}, which ClusterQueue "
                                     f"{cq.name} does not cover")
                    return out
                needed.setdefault(g, {})[res] = per_pod * n
            if cq.covers_pods:
                needed.setdefault(cq.group_of[PODS], {})[PODS] = POD_MILLIS * n
            flavors: dict[str, str] = {}
            for g in sorted(needed):
                demand = needed[g]
                best: tuple[int, FlavorRef, bool, int] | None = None
                reasons: list[str] = []
                for flavor in cq.groups[g].flavors:
                    if (i, g, flavor.name) in excluded:
                        continue
                    why = self.mismatch(ps, flavor)
                    if why:
                        reasons.append(why)
                        continue
                    mode, borrow = FIT, False
                    short: dict[FR, int] = {}
                    wanted: dict[FR, int] = {}
                    for res, amount in demand.items():
                        fr = (flavor.name, res)
                        val = amount + usage.get(fr, 0)
                        wanted[fr] = val
                        if val > cache.potential(node, fr):
                            out.shortfalls.append(
                                Shortfall(flavor.name, res, val, cache.potential(node, fr), True))
                            mode = NOFIT
                            break
                        if cache.borrowing_with(node, fr, val):
                            borrow = True
                        avail = cache.available(node, fr)
                        if val > avail:
                            out.shortfalls.append(Shortfall(flavor.name, res, val, avail, False))
                            if val <= node.nominal(fr) or preempt_borrowing or (
                                    node.parent is not None and node.parent.parent is not None
                                    and fits_below_root(node, fr, val)):
                                mode = PREEMPT
                                short[fr] = val - max(0, avail)
                            else:
                                mode = NOFIT
                                break
                    if mode == PREEMPT and self.oracle is not None and not self.oracle(
                        wl, cq, short
                    ):
                        mode = NOFIT
                    how = PREEMPT_IN_QUEUE
                    rank_borrow = borrow
                    if mode == PREEMPT and self.simulate is not None and len(
                            cq.groups[g].flavors) > 1:
                        how, rank_borrow = self._how_to_preempt(wl, cq, node, wanted, short)
                        if how == NO_CANDIDATES:
                            mode = NOFIT
                    score = _score(mode, rank_borrow, how)
                    if score and (best is None or score > best[3]):
                        best = (mode, flavor, borrow, score)
                    if not score:
                        continue
                    if not _try_next(mode, rank_borrow, cq):
                        break
                if best is None:
                    out.mode = NOFIT
                    if not out.shortfalls and reasons:
                        out.no_flavor = (f"no flavor of ClusterQueue {cq.name} suits pod set "
                                         f"{ps.name}: " + "; ".join(reasons))
                    elif not out.shortfalls:
                        out.no_flavor = (f"every flavor of ClusterQueue {cq.name} for pod set "
                                         f"{ps.name} was ruled out by node placement")
                    return out
                mode, flavor, borrow, _ = best
                out.mode = min(out.mode, mode)
                out.borrowing = out.borrowing or borrow
                for res, amount in demand.items():
                    fr = (flavor.name, res)
                    usage[fr] = usage.get(fr, 0) + amount
                    flavors[res] = flavor.name
            out.choices.append(Choice(ps, n, flavors))
        return out

    def _how_to_preempt(self, wl: Workload, cq: QueueInfo, node: QuotaNode,
                        wanted: dict[FR, int], short: dict[FR, int]) -> tuple[int, bool]:
        """The worst preemption mode over the flavor's short resources, and whether the
        queue borrows any of ``wanted`` once the victims are gone."""
        assert self.simulate is not None
        how = RECLAIM
        borrow = False
        for fr, val in wanted.items():
            if fr not in short:
                borrow = borrow or self.cache.borrowing_with(node, fr, val)
                continue
            mode, borrows = self.simulate(wl, cq, fr, val)
            how = min(how, mode)
            borrow = borrow or borrows
        return how, borrow

    def reduce(self, wl: Workload, cq: QueueInfo,
               admissible: Callable[[Assignment], bool]) -> Assignment | None:
        """Partial admission, once the full size is neither free nor made room for by
        preemption: the largest sizes down to minReplicas that ``admissible`` accepts (it
        fits, or preemption can make it fit), every pod set shrunk in proportion. A binary
        search over the reduction, as Kueue's: a smaller job is taken to be no harder."""
        full = tuple(ps.count for ps in wl.pod_sets)
        deltas = [ps.count - ps.min_count for ps in wl.pod_sets]
        total = sum(deltas)
        if not total:
            return None

        def counts_for(d: int) -> tuple[int, ...]:
            return tuple(c - (delta * d) // total for c, delta in zip(full, deltas, strict=True))

        lo, hi = 1, total + 1  # the full size (0) was judged already; total + 1: none
        best: Assignment | None = None
        while lo < hi:
            mid = (lo + hi) // 2
            trial = self.assign(wl, cq, counts_for(mid))
            if admissible(trial):
                best, hi = trial, mid
            else:
                lo = mid + 1
        return best

    # ------------------------------------------------------------------ nodes
    def groups_for(self, cq: QueueInfo, a: Assignment) -> tuple[PodGroup, ...]:
        refs = {f.name: f for g in cq.groups for f in g.flavors}
        groups = []
        for choice in a.choices:
            ps = choice.pod_set
            selector = dict(ps.selector)
            tolerations = list(ps.tolerations)
            for name in sorted(set(choice.flavors.values())):
                ref = refs[name]
                selector.update(ref.node_labels)
                tolerations.extend(ref.flavor.tolerations)
            if cq.avoid_degraded:  # healthy nodes only (State labels each node's health)
                selector[HEALTH_LABEL] = HEALTH_LABEL_VALUES[NodeHealth.HEALTHY]
            groups.append(PodGroup(
                ps.name, choice.count, min(ps.min_count, choice.count), ps.requests,
                tuple(sorted(selector.items())), tuple(tolerations),
            ))
        return tuple(groups)

    def assign(self, wl: Workload, cq: QueueInfo,
               counts: tuple[int, ...] | None = None) -> Assignment:
        """Quota then nodes for ``counts`` pods per pod set (the full size by default); a
        flavor whose nodes cannot take the gang gives way to the next."""
        if counts is None:
            counts = tuple(ps.count for ps in wl.pod_sets)
        excluded: frozenset[tuple[int, int, str]] = frozenset()
        node_failure: PlacementFailure | None = None
        last_fit: Assignment | None = None
        for _ in range(MAX_NODE_RETRIES):
            a = self.assign_quota(wl, cq, counts, excluded)
            if a.mode != FIT:
                if node_failure is not None and last_fit is not None and a.mode == NOFIT:
                    # Nodes, not quota, are what stopped the flavors that fit.
                    return last_fit
                a.node_failure = node_failure
                if a.mode == PREEMPT:
                    a.groups = self.groups_for(cq, a)
                return a
            a.groups = self.groups_for(cq, a)
            placed = self.pool.place(a.groups, wl.topology)
            if isinstance(placed, Placement):
                a.placement = placed
                if placed.counts != a.counts:
                    shrink(a, cq, placed.counts)
                return a
            node_failure = a.node_failure = placed
            last_fit = a
            more = excluded | {
                (i, cq.group_of[res], flavor)
                for i, choice in enumerate(a.choices) for res, flavor in choice.flavors.items()
            }
            if more == excluded:
                break
            excluded = frozenset(more)
            if any(all((i, g, f.name) in excluded for f in cq.groups[g].flavors)
                   for i, choice in enumerate(a.choices)
                   for g in {cq.group_of[res] for res in choice.flavors}):
                break  # a pod set has no flavor left to try: the next round could only fail
        assert last_fit is not None
        return last_fit


def _try_next(mode: int, borrow: bool, cq: QueueInfo) -> bool:
    if mode == PREEMPT and cq.when_can_preempt == "Preempt" and (
        not borrow or cq.when_can_borrow == "Borrow"
    ):
        return False
    if mode == FIT and borrow and cq.when_can_borrow == "Borrow":
        return False
    return not (mode == FIT and not borrow)


def usage_of(choices: list[Choice], cq: QueueInfo) -> dict[FR, int]:
    usage: dict[FR, int] = {}
    for choice in choices:
        n = choice.count
        for res, per_pod in choice.pod_set.requests:
            fr = (choice.flavors[res], res)
            usage[fr] = usage.get(fr, 0) + per_pod * n
        if cq.covers_pods:
            fr = (choice.flavors[PODS], PODS)
            usage[fr] = usage.get(fr, 0) + POD_MILLIS * n
    return usage


def shrink(a: Assignment, cq: QueueInfo, counts: tuple[int, ...]) -> None:
    """Placement found room for fewer pods than quota allowed (partial admission)."""
    for choice, n in zip(a.choices, counts, strict=True):
        choice.count = n
    a.usage = usage_of(a.choices, cq)
    a.groups = tuple(
        PodGroup(g.name, n, min(g.min_count, n), g.requests, g.node_selector, g.tolerations)
        for g, n in zip(a.groups, counts, strict=True)
    )
