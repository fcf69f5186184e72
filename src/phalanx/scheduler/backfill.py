"""Reservations and backfill: a job that has waited long keeps room at its earliest start.

Without more, the room a big gang needs frees bit by bit and every bit goes to whatever
smaller job fits it first, so the gang may wait for ever. Slurm's backfill gives the job at
the head of the queue a reservation at its earliest start, computed from the expected ends
of running jobs, and lets later jobs start only where they cannot delay it. Here, for a
ClusterQueue with ``reserveAfter``:

* The holder: the head of such a queue (priority, then submission) once it has waited
  ``reserveAfter``; one holder per cohort tree at a time (the highest priority, then the
  longest waiting), as Slurm's "EASY" backfill reserves for the first job only.
* Its earliest start ``at``: running jobs of its tree end, in order of their expected ends
  (the driver's estimator: ``maxRuntime`` by default, the simulator and the control plane
  use the history of similar runs), until its pods fit on nodes of its flavors (gangs whole:
  pods of a pod set per node as they fit) and its quota is available. A running job whose
  end is unknown never ends in this count; when the holder fits no time, it has no
  reservation. A job with a required topology gets none either.
* What is kept now: on each node the holder would use at ``at``, what it needs there less
  what running jobs free there by then (at most what is free now); of quota, likewise. The
  kept room is charged for the cycle (the quota to the holder's queue, the nodes as a
  phantom reservation), so no other job takes it; it is lifted for the holder itself and for
  a job expected to end before ``at`` (backfill proper). A job of unknown run time is never
  expected to end before.

Borrowing limits, lending limits and preemption keep their meaning: the holder is judged as
any job, and what is kept is within what its queue could use. The reservation is recomputed
every cycle (estimates change as runs outlive them); when what is kept changes, jobs blocked
on capacity are looked at again. No queue with ``reserveAfter``, no holder, no change: the
cycle decides exactly as without this module.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from phalanx.scheduler.cache import QueueInfo
from phalanx.scheduler.flavorassigner.flavors import FIT, Assignment, Choice, usage_of
from phalanx.scheduler.pod_groups import Placement, PodGroup
from phalanx.scheduler.workload import FR, POD_MILLIS, PODS, Workload
from phalanx.spec.config import QueueConfig
from phalanx.spec.resources import NodeHealth

if TYPE_CHECKING:  # (the Scheduler holds a Backfill and hands it to each Cycle)
    from phalanx.scheduler.state import State

PHANTOM = "backfill/"  # node reservations kept for a holder during a cycle

# (a job, seconds it has run) -> its whole run in seconds; None: unknown.
RunEstimator = Callable[[Workload, float], float | None]


def max_runtime_only(wl: Workload, elapsed: float) -> float | None:
    """The default estimator: a job's maxRuntime (a run that outlives it ends now)."""
    limit = wl.spec.max_runtime
    return None if limit is None else max(limit, elapsed)


@dataclass(slots=True)
class Plan:
    """One holder's reservation during a cycle."""

    holder: Workload
    at: float  # its earliest start
    cluster_queue: str
    quota: dict[FR, int]  # kept now, charged to its queue
    nodes: dict[str, dict[str, int]]  # node -> resource -> kept now
    applied: bool = False


class Backfill:
    """The reservations of one scheduler (``Scheduler._backfill``, given to each ``Cycle``)."""

    def __init__(self) -> None:
        self.reserve_after: dict[str, float] = {}  # ClusterQueue -> seconds, where set
        self.estimator: RunEstimator = max_runtime_only
        self.plans: list[Plan] = []
        self.last_holders: frozenset[str] = frozenset()
        self.now = 0.0
        # Per job: (the start of the run it was asked for, that run's expected length). A
        # run's estimate is asked again only once the run outlives it.
        self.runs: dict[str, tuple[float, float | None]] = {}

    def configure(self, config: QueueConfig) -> None:
        self.reserve_after = {name: cq.reserve_after for name, cq in
                              config.cluster_queues.items() if cq.reserve_after is not None}

    @property
    def active(self) -> bool:
        return bool(self.reserve_after)

    # ------------------------------------------------------------------ a cycle
    def begin(self, st: State, now: float | None) -> None:
        """Work out this cycle's reservations and keep their room (before the admissions)."""
        self.plans = []
        if now is None or not self.reserve_after:
            return
        self.now = now
        for holder, info in self._holders(st, now):
            plan = self._plan(st, holder, info, now)
            if plan is not None:
                self.plans.append(plan)
                self._apply(st, plan)
        holders = frozenset(p.holder.name for p in self.plans)
        if holders != self.last_holders:  # room kept anew or given back: blocked jobs look
            self.last_holders = holders   # again (ends and starts bump versions themselves)
            st.expire_protection()
            st.node_free_version += 1
        if len(self.runs) > 2 * len(st.jobs) + 64:  # forget jobs that are gone
            self.runs = {n: r for n, r in self.runs.items() if n in st.jobs}

    def end(self, st: State) -> None:
        for plan in self.plans:
            self._release(st, plan)
        self.plans = []

    def lift(self, st: State, wl: Workload) -> Plan | None:
        """Lift the reservation ``wl`` may use (it holds it, or ends before it), if any."""
        for plan in self.plans:
            if not plan.applied:
                continue
            if plan.holder is wl or self._ends_before(wl, plan.at):
                self._release(st, plan)
                return plan
        return None

    def restore(self, st: State, plan: Plan, wl: Workload) -> None:
        """Keep ``plan``'s room again after ``wl`` was judged (not once its holder got in)."""
        if plan.holder is wl and (wl.admitted or wl.name in st.waiting):
            self.plans.remove(plan)
            return
        self._apply(st, plan)

    # ------------------------------------------------------------------ the plan
    def _ends_before(self, wl: Workload, at: float) -> bool:
        run = self._run(wl, self.now, 0.0)
        return run is not None and self.now + run <= at

    def _run(self, wl: Workload, start: float, elapsed: float) -> float | None:
        """The expected length of ``wl``'s run that started at ``start`` (cached)."""
        known = self.runs.get(wl.name)
        if known is not None and known[0] == start and (known[1] is None
                                                          or elapsed <= known[1]):
            return known[1]
        run = self.estimator(wl, elapsed)
        self.runs[wl.name] = (start, run)
        return run

    def _holders(self, st: State, now: float) -> list[tuple[Workload, QueueInfo]]:
        """Per cohort tree, the head that has waited past its queue's reserveAfter and
        ranks first (priority, then submission)."""
        best: dict[object, tuple[Workload, QueueInfo]] = {}
        for name, after in sorted(self.reserve_after.items()):
            pending = st.queues.queues.get(name)
            info = st.infos.get(name)
            if pending is None or not pending.count or info is None:
                continue
            head = min((cls.wls[0] for cls in pending.classes.values() if cls.wls),
                       key=lambda w: w.order_key, default=None)
            if head is None or now - head.submitted_at < after or head.name in st.waiting:
                continue
            if head.topology is not None and head.topology.required:
                continue
            tree = info.node.tree
            found = best.get(tree)
            if found is None or head.order_key < found[0].order_key:
                best[tree] = (head, info)
        return [best[t] for t in sorted(best, key=lambda t: best[t][0].order_key)]

    def _plan(self, st: State, holder: Workload, info: QueueInfo, now: float) -> Plan | None:
        a = eventual_assignment(st, holder, info)
        if a is None:
            return None
        groups = a.groups
        need = {fr: v for fr, v in a.usage.items() if v > 0}
        cache = st.cache
        avail = {fr: cache.available(info.node, fr) for fr in need}
        free = _free_nodes(st, groups)
        if not free:
            return None
        ends: list[tuple[float, str, Workload]] = []
        tree = info.node.tree
        for cq, jobs in st.admitted.items():
            other = st.infos.get(cq)
            if other is None or other.node.tree is not tree:
                continue
            for wl in jobs.jobs.values():
                if wl.terminating:
                    ends.append((now, wl.name, wl))
                    continue
                run = self._run(wl, wl.started_at, max(0.0, now - wl.started_at))
                if run is not None:
                    ends.append((max(now, wl.started_at + run), wl.name, wl))
        ends.sort(key=lambda e: (e[0], e[1]))
        released_nodes: dict[str, dict[str, int]] = {}
        released_quota: dict[FR, int] = {}
        at = now
        i = 0
        while True:
            later = _free_at(free, released_nodes)
            quota_ok = all(avail[fr] + released_quota.get(fr, 0) >= v for fr, v in need.items())
            placed = _place(groups, later) if quota_ok else None
            if placed is not None:
                break
            if i == len(ends):
                return None
            at = ends[i][0]
            while i < len(ends) and ends[i][0] == at:
                wl = ends[i][2]
                i += 1
                for node, res in st.pool.holdings(wl.name).items():
                    if node in free:
                        mine = released_nodes.setdefault(node, {})
                        for r, v in res.items():
                            mine[r] = mine.get(r, 0) + v
                for fr, v in wl.usage.items():
                    if fr in need:
                        released_quota[fr] = released_quota.get(fr, 0) + v
        kept_nodes: dict[str, dict[str, int]] = {}
        for node, res in placed.items():
            now_free = free[node]
            back = released_nodes.get(node, {})
            kept = {r: min(now_free.get(r, 0), v - back.get(r, 0)) for r, v in res.items()}
            kept = {r: v for r, v in kept.items() if v > 0}
            if kept:
                kept_nodes[node] = kept
        kept_quota = {fr: min(avail[fr], v - released_quota.get(fr, 0))
                      for fr, v in need.items()}
        kept_quota = {fr: v for fr, v in kept_quota.items() if v > 0}
        return Plan(holder, at, info.name, kept_quota, kept_nodes)

    # ------------------------------------------------------------------ keeping room
    def _apply(self, st: State, plan: Plan) -> None:
        if plan.applied:
            return
        st.cache.charge(plan.cluster_queue, plan.quota, 1, bump=False)
        if plan.nodes:
            groups, placement = _phantom(plan.nodes)
            st.pool.reserve(PHANTOM + plan.holder.name, groups, placement)
        plan.applied = True

    def _release(self, st: State, plan: Plan) -> None:
        if not plan.applied:
            return
        st.cache.charge(plan.cluster_queue, plan.quota, -1, bump=False)
        st.pool.release(PHANTOM + plan.holder.name)
        plan.applied = False


def eventual_assignment(st: State, wl: Workload, info: QueueInfo) -> Assignment | None:
    """The flavors ``wl`` would get: as judged now when quota or preemption allows one,
    else, per pod set and resource group, the first flavor that suits it and whose quota
    could ever hold it (None: none could)."""
    a = st.assigner.assign(wl, info)
    if a.no_flavor:
        return None
    if a.groups and a.usage:
        return a
    out = Assignment(FIT)
    cache, node = st.cache, info.node
    for ps in wl.pod_sets:
        demand: dict[int, dict[str, int]] = {}
        for res, per_pod in ps.requests:
            g = info.group_of.get(res)
            if g is None:
                return None
            demand.setdefault(g, {})[res] = per_pod * ps.count
        if info.covers_pods:
            demand.setdefault(info.group_of[PODS], {})[PODS] = POD_MILLIS * ps.count
        flavors: dict[str, str] = {}
        for g in sorted(demand):
            for flavor in info.groups[g].flavors:
                if st.assigner.mismatch(ps, flavor) or any(
                        v > cache.potential(node, (flavor.name, res))
                        for res, v in demand[g].items()):
                    continue
                flavors.update((res, flavor.name) for res in demand[g])
                break
            else:
                return None
        out.choices.append(Choice(ps, ps.count, flavors))
    out.usage = usage_of(out.choices, info)
    out.groups = st.assigner.groups_for(info, out)
    return out


def _free_nodes(st: State, groups: tuple[PodGroup, ...]) -> dict[str, dict[str, int]]:
    """Free resources now of the schedulable nodes some group's selector matches."""
    used = st.pool.reservations.used
    out: dict[str, dict[str, int]] = {}
    for name, node in st.pool.index.nodes.items():
        if node.unschedulable or node.health is NodeHealth.UNHEALTHY:
            continue
        if not any(all(node.labels.get(k) == v for k, v in g.node_selector) for g in groups):
            continue
        taken = used.get(name, {})
        out[name] = {r: v - taken.get(r, 0) for r, v in node.allocatable.items()}
    return out


def _free_at(free: Mapping[str, Mapping[str, int]],
             released: Mapping[str, Mapping[str, int]]) -> dict[str, dict[str, int]]:
    out = {}
    for node, res in free.items():
        back = released.get(node)
        out[node] = dict(res) if back is None else {
            r: v + back.get(r, 0) for r, v in res.items()}
    return out


def _place(groups: tuple[PodGroup, ...], free: dict[str, dict[str, int]]
           ) -> dict[str, dict[str, int]] | None:
    """Every group's pods on the nodes with room for most of them first (whole gangs);
    per node, the resources they take. None: they do not all fit."""
    taken: dict[str, dict[str, int]] = {}
    for g in groups:
        left = g.count
        eligible = [n for n in free
                    if all(free[n].get(k) is not None for k, _ in g.requests)]
        fits = sorted(((_fit(free[n], g.requests), n) for n in eligible),
                      key=lambda f: (-f[0], f[1]))
        for count, node in fits:
            if left <= 0 or count <= 0:
                break
            pods = min(count, left)
            left -= pods
            mine = taken.setdefault(node, {})
            for r, v in g.requests:
                free[node][r] -= v * pods
                mine[r] = mine.get(r, 0) + v * pods
        if left > 0:
            return None
    return taken


def _fit(free: Mapping[str, int], requests: tuple[tuple[str, int], ...]) -> int:
    best = 1 << 30
    for r, v in requests:
        best = min(best, free.get(r, 0) // v)
    return max(best, 0)


def _phantom(nodes: dict[str, dict[str, int]]) -> tuple[tuple[PodGroup, ...], Placement]:
    """One pseudo pod per node holding what is kept there."""
    names = sorted(nodes)
    groups = tuple(PodGroup(f"kept-{i}", 1, 1, tuple(sorted(nodes[n].items())))
                   for i, n in enumerate(names))
    return groups, Placement(tuple(1 for _ in names), tuple((n,) for n in names))
