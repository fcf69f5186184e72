"""The scheduler facade: events in, decisions out.

Drivers (the control plane's loop, the simulator, tests, benchmarks) call only
these methods. The work happens in ``state`` (incremental bookkeeping of events),
``cycle`` (one scheduling pass) and the modules they use.
"""

from __future__ import annotations

import gc
import itertools
from collections.abc import Callable, Iterable

from phalanx.errors import SpecError
from phalanx.scheduler.backfill import Backfill
from phalanx.scheduler.cycle import Cycle
from phalanx.scheduler.fairsharing import dominant_share
from phalanx.scheduler.flavorassigner.flavors import flavor_mismatch
from phalanx.scheduler.placement import PodGroup
from phalanx.scheduler.provisioning import (
    ProvisioningNeed,
    nodes_needed,
    provisioning_reason,
)
from phalanx.scheduler.state import State
from phalanx.scheduler.types import (
    Admission,
    ClusterQueueStatus,
    CycleResult,
    JobView,
    PendingReason,
    ResourceUsage,
    SchedulerSnapshot,
)
from phalanx.scheduler.workload import POD_MILLIS, PODS, pod_sets_of
from phalanx.spec.config import QueueConfig
from phalanx.spec.quantity import format_amount
from phalanx.spec.resources import JobSpec, Node


class Scheduler:
    def __init__(self, config: QueueConfig, nodes: Iterable[Node] = ()) -> None:
        self._state = State(config, nodes)
        # Reservations (backfill.py): their run-time estimator outlives configurations.
        self._backfill = Backfill()
        self._backfill.configure(config)

    # ---- configuration & nodes
    def set_config(self, config: QueueConfig) -> None:
        """Queue config changed (already validated). Pending jobs of removed queues stay pending
        with reason QueueStopped/NoMatchingFlavor; admitted jobs keep running."""
        self._state.set_config(config)
        self._backfill.configure(config)

    def set_fair_sharing(self, enabled: bool) -> None:
        """Fair sharing (on by default) orders admission across the queues of a cohort by
        weighted share and lets borrowing queues preempt by share; off gives Kueue's classic
        preemption (in-cohort preemption only to reclaim nominal quota or via
        borrowWithinCohort)."""
        self._state.set_fair_sharing(enabled)

    def set_run_estimator(self, estimate: Callable[[JobSpec, float], float | None]) -> None:
        """How long a job runs in all, given its spec and the seconds it has run (None:
        unknown), for reservations (a ClusterQueue's reserveAfter). Without one, a job's
        maxRuntime is its run time and a job without one has none known."""
        self._backfill.estimator = lambda wl, elapsed: estimate(wl.spec, elapsed)

    def upsert_node(self, node: Node) -> None:
        self._state.upsert_node(node)

    def remove_node(self, name: str) -> None:
        self._state.remove_node(name)

    # ---- jobs
    def check_feasible(self, job: JobSpec) -> None:
        """Raise SpecError (naming the field) if ``job`` could never be admitted: unknown queue,
        unknown priority class, a pod larger than any node of any eligible flavor, or a gang larger
        than the most quota its ClusterQueue could ever reach (nominal + borrowing)."""
        st = self._state
        cq_spec = st.config.cluster_queue_for(job.queue)
        st.config.priority_value(job.priority)
        info = st.infos[cq_spec.name]
        has_nodes = bool(st.pool.nodes())
        for i, ps in enumerate(pod_sets_of(job)):
            where = f"podSets[{i}]"
            groups: dict[int, list[str]] = {}
            for res, _ in ps.requests:
                g = info.group_of.get(res)
                if g is None:
                    raise SpecError(
                        f"requests {res}, which ClusterQueue {info.name} does not cover",
                        field=f"{where}.resources.{res}",
                        fix=f"drop it or ask for it to be added to ClusterQueue {info.name}",
                    )
                groups.setdefault(g, []).append(res)
            if info.covers_pods:
                groups.setdefault(info.group_of[PODS], []).append(PODS)
            options: list[list[str]] = []
            for g in sorted(groups):
                eligible = [f for f in info.groups[g].flavors if not flavor_mismatch(ps, f)]
                if not eligible:
                    why = flavor_mismatch(ps, info.groups[g].flavors[0])
                    raise SpecError(
                        f"no flavor of ClusterQueue {info.name} can run it: {why}",
                        field=f"{where}.nodeSelector",
                        fix="change the nodeSelector/tolerations or use another queue",
                    )
                fitting = []
                for f in eligible:
                    demand = {r: a * ps.min_count for r, a in ps.requests if r in groups[g]}
                    if PODS in groups[g]:
                        demand[PODS] = POD_MILLIS * ps.min_count
                    over = [r for r, v in demand.items()
                            if v > st.potential(info.name, (f.name, r))]
                    if not over:
                        fitting.append(f.name)
                    elif len(eligible) == 1:
                        r = over[0]
                        most = st.potential(info.name, (f.name, r))
                        raise SpecError(
                            f"needs {format_amount(demand[r], r)} {r} of {f.name} but "
                            f"ClusterQueue {info.name} can never get more than "
                            f"{format_amount(most, r)}, borrowing included",
                            field=f"{where}.resources.{r}" if r != PODS else f"{where}.replicas",
                            fix="make the gang smaller or ask for more quota",
                        )
                if not fitting:
                    raise SpecError(
                        f"is larger than any flavor of ClusterQueue {info.name} could ever hold",
                        field=f"{where}.resources",
                        fix="make the gang smaller or ask for more quota",
                    )
                options.append(fitting)
            if has_nodes:
                self._check_node_fit(info.name, i, ps, options)
        self._check_whole_job(info.name, job)

    def _check_whole_job(self, cq: str, job: JobSpec) -> None:
        """The pod sets together: no more of a resource than the ClusterQueue could ever get
        in all the flavors that cover it (borrowing included), and no more pods than the
        nodes could ever hold. Each pod set alone passed already; a job whose sets only fit
        one at a time would otherwise be accepted and wait for ever."""
        st = self._state
        info = st.infos[cq]
        pod_sets = pod_sets_of(job)
        total: dict[str, int] = {}
        for ps in pod_sets:
            for res, amount in ps.requests:
                total[res] = total.get(res, 0) + amount * ps.min_count
        pods = sum(ps.min_count for ps in pod_sets)
        if info.covers_pods:
            total[PODS] = POD_MILLIS * pods
        for res, amount in sorted(total.items()):
            group = info.groups[info.group_of[res]]
            # Pod sets may take different flavors: the sum over all of them bounds the job.
            most = sum(st.potential(info.name, (f.name, res)) for f in group.flavors)
            if amount > most:
                raise SpecError(
                    f"together its pod sets need {format_amount(amount, res)} {res} but "
                    f"ClusterQueue {info.name} can never get more than "
                    f"{format_amount(most, res)}, borrowing included",
                    field="podSets",
                    fix="make the job smaller (fewer replicas or smaller requests) or ask for "
                        "more quota",
                )
        nodes = st.pool.nodes()
        if nodes and all(PODS in n.allocatable for n in nodes) and not st.provisioning.flavors:
            slots = sum(n.allocatable[PODS] for n in nodes) // POD_MILLIS
            if pods > slots:
                raise SpecError(
                    f"needs {pods} pods but the cluster's nodes hold at most {slots} pods",
                    field="podSets",
                    fix="use fewer replicas (or split the work into several jobs), or add "
                        "nodes",
                )

    def _check_node_fit(self, cq: str, index: int, ps: object, options: list[list[str]]) -> None:
        st = self._state
        info = st.infos[cq]
        refs = {f.name: f for g in info.groups for f in g.flavors}
        from phalanx.scheduler.workload import PodSetDemand

        assert isinstance(ps, PodSetDemand)

        def group(requests: tuple[tuple[str, int], ...], combo: tuple[str, ...]) -> PodGroup:
            selector = dict(ps.selector)
            tolerations = list(ps.tolerations)
            for name in sorted(set(combo)):
                selector.update(refs[name].node_labels)
                tolerations.extend(refs[name].flavor.tolerations)
            return PodGroup(ps.name, 1, 1, requests, tuple(sorted(selector.items())),
                            tuple(tolerations))

        combos = list(itertools.islice(itertools.product(*options), 64))
        if any(st.pool.fits_ever(group(ps.requests, c)) for c in combos):
            return
        bought = st.provisioning.flavors
        if any(len(set(c)) == 1 and c[0] in bought
               and nodes_needed(bought[c[0]].node, dict(ps.requests), 1, None) for c in combos):
            return  # a pool of that flavor would hold it
        for res, amount in ps.requests:
            if not any(st.pool.fits_ever(group(((res, amount),), c)) for c in combos):
                raise SpecError(
                    f"one pod needs {format_amount(amount, res)} {res}, more than any node of "
                    f"its eligible flavors ({', '.join(sorted({f for c in combos for f in c}))}) "
                    "has",
                    field=f"podSets[{index}].resources.{res}",
                    fix="request less per pod (use more replicas) or add bigger nodes",
                )
        raise SpecError(
            "no node of its eligible flavors has room for one pod with all its requests",
            field=f"podSets[{index}].resources",
            fix="request less per pod or add bigger nodes",
        )

    def submit(self, job: JobSpec, *, priority: int, submitted_at: float) -> None:
        self._state.submit(job, priority, submitted_at)

    def restore(self, job: JobSpec, *, priority: int, submitted_at: float,
                admission: Admission, started_at: float | None = None) -> None:
        """Re-establish an already admitted job (control-plane restart): charge its quota and
        reserve its nodes exactly as ``admission`` says, without a new decision.
        ``started_at``: when it was admitted, on the clock later cycles are given."""
        self._state.restore(job, priority, submitted_at, admission)
        if started_at is not None:
            self._state.jobs[job.name].started_at = started_at

    def report_checkpoint(self, name: str, at: float) -> None:
        """An admitted job saved its work at ``at`` (the clock cycles are given): among equal
        preemption candidates, the one that would lose least work goes first."""
        self._state.report_checkpoint(name, at)

    def requeue(self, name: str, *, submitted_at: float | None = None) -> None:
        """An admitted (or preempted) job goes back to pending; its quota and nodes are freed."""
        self._state.requeue(name, submitted_at)

    def remove(self, name: str) -> None:
        """A job finished or was cancelled: drop it wherever it is, freeing quota and nodes."""
        self._state.remove(name)

    # ---- the cycle
    def cycle(self, now: float | None = None) -> CycleResult:
        """Admit, preempt and give reasons. Decisions depend on the events fed in so far
        (their times included) and on nothing else, the clock least of all: that is what lets
        a restart, a simulation or a test replay them. ``now`` is the driver's own clock, an
        event like the others: it dates admissions, and minRuntime protection counts from
        those dates (no ``now``, no protection)."""
        st = self._state
        st.now = now
        st.preemptor.protection.now = now
        if st.preemptor.protection.expired(now):
            st.expire_protection()
        if st.provisioning.expire(now):  # a flavor may be provisioned again: look again
            st.expire_protection()
            st.node_free_version += 1
        # A cycle allocates many short-lived objects next to a large, long-lived state (every
        # pending job); the collector's full passes over that state would cost about a third
        # of a busy cycle. Nothing a cycle builds needs collecting before it ends, so the
        # collector waits until then.
        enabled = gc.isenabled()
        gc.disable()
        try:
            withheld = st.refresh_withheld()
            result = Cycle(st, self._backfill).run()
            result.preemptions[:0] = withheld
            guard = st.preemptor.protection.guard
            if now is not None and guard is not None:  # (thrashing.py counts preemptions)
                for p in result.preemptions:
                    victim = st.jobs.get(p.victim)
                    if victim is not None:
                        guard.preempted(victim, now)
            return result
        finally:
            if enabled:
                gc.enable()

    # ---- provisioning (scheduler/provisioning.py)
    def provisioning_ready(self, name: str, nodes: Iterable[str]) -> bool:
        """The pool bought for held job ``name`` has every node Ready (and upserted): the
        next cycle places the gang on those nodes. False when the job holds nothing."""
        hold = self._state.provisioning.holds.get(name)
        if hold is None:
            return False
        hold.ready_nodes = tuple(nodes)
        return True

    def set_provisioning_message(self, name: str, message: str) -> None:
        """What a held job's pending reason says about its pool (its request's state)."""
        hold = self._state.provisioning.holds.get(name)
        if hold is not None and hold.message != message:
            hold.message = message
            wl = hold.wl
            wl.reason = provisioning_reason(message)
            wl.reason_serial = self._state.tick_reason()

    def release_provisioning(self, name: str, *, flavor: str = "", until: float = 0.0,
                             reason: str = "", every_job: bool = False) -> bool:
        """Give back held job ``name``'s quota and queue it again; with ``flavor``, that
        flavor is not provisioned for it (``every_job``: for any job) before ``until``, and
        its pending reason says ``reason``. False when it held nothing."""
        st = self._state
        wl = st.jobs.get(name)
        if flavor:
            st.provisioning.block("" if every_job else name, flavor, until, reason)
        if wl is None or not st.release_hold(name):
            return False
        st.requeue(name)
        return True

    def block_provisioning(self, flavor: str, *, until: float, reason: str,
                           job: str = "") -> None:
        """No pool of ``flavor`` for ``job`` (every job when "") before ``until``."""
        self._state.provisioning.block(job, flavor, until, reason)

    def provisioning_holds(self) -> dict[str, ProvisioningNeed]:
        """The jobs that hold quota while their pools are bought, with what they need."""
        return {n: h.need for n, h in self._state.provisioning.holds.items()}

    # ---- read-only views
    def pending_reason(self, name: str) -> PendingReason | None:
        wl = self._state.jobs.get(name)
        if wl is None or wl.admitted:
            return None
        hold = self._state.provisioning.holds.get(name)
        if hold is not None:
            return provisioning_reason(hold.message)
        return self._state.reason_of(wl)

    def queue_status(self) -> list[ClusterQueueStatus]:
        st = self._state
        out = []
        for name, info in st.infos.items():
            node = info.node
            seen = set()
            usage = []
            keys = [(f.name, r) for g in info.groups for f in g.flavors
                    for r in sorted(g.resources)]
            keys += sorted(fr for fr in node.usage if fr not in set(keys) and node.usage[fr])
            for fr in keys:
                if fr in seen:
                    continue
                seen.add(fr)
                used = node.usage.get(fr, 0)
                nominal = node.nominal(fr)
                g = node.guaranteed(fr)
                lendable = 0
                if node.parent is not None:
                    lendable = max(0, (nominal - g) - max(0, used - g))
                usage.append(ResourceUsage(fr[0], fr[1], nominal, used, max(0, used - nominal),
                                           lendable, st.withheld.get(fr, 0)
                                           if info.spec.capacity_follows_health else 0))
            share = dominant_share(node)
            out.append(ClusterQueueStatus(
                name=name,
                cohort=info.spec.cohort,
                pending=st.queues.pending_count(name),
                admitted=len(st.admitted[name]) if name in st.admitted else 0,
                usage=tuple(usage),
                # Kueue reports a zero-weight borrower's share as infinite.
                weighted_share=float("inf") if share and node.weight <= 0 else share / 1000,
                stopped=info.stop_policy != "None",
            ))
        return out

    def snapshot(self) -> SchedulerSnapshot:
        """A copy of what decides the next cycles (read-only; references to the immutable
        specs, nodes and configuration, so it is cheap): a forecast builds a scheduler of its
        own from it and runs that forward, leaving this one untouched."""
        st = self._state
        jobs = sorted(st.jobs.values(), key=lambda wl: wl.seq)
        return SchedulerSnapshot(
            config=st.base_config, nodes=tuple(st.pool.nodes()), fair_sharing=st.fair_sharing,
            jobs=tuple(JobView(wl.spec, wl.priority, wl.submitted_at, wl.cluster_queue,
                               wl.admission, wl.started_at, wl.terminating) for wl in jobs),
        )

    def protection_ends(self) -> float | None:
        """When the first minRuntime protection the last cycles ran into ends (a driver
        whose cycles follow events should run one then; None: none is pending)."""
        return self._state.preemptor.protection.next_expiry

    def pending_count(self, cluster_queue: str) -> int:
        """How many jobs wait in ``cluster_queue``'s queue."""
        return self._state.queues.pending_count(cluster_queue)

    def admitted_jobs(self) -> set[str]:
        """The names of the jobs the scheduler holds as admitted."""
        return {name for jobs in self._state.admitted.values() for name in jobs.jobs}

    def node_usage(self) -> dict[str, dict[str, int]]:
        return self._state.pool.usage()
