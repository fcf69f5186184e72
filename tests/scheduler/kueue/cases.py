"""A compact language for Kueue's scheduler test cases, and the one way they are run.

A case is the state Kueue's test starts from (flavors, cohorts, ClusterQueues,
already-admitted workloads, pending workloads) and the state it expects after
one scheduling cycle. Here the admitted workloads are re-established with
``Scheduler.restore``, the pending ones submitted, and ONE cycle is run. Only
quota decides: flavors carry no node labels and a single node is larger than
any quota, so placement never limits an outcome.

Quotas are written ``{flavor: {resource: quota}}`` where a quota is a nominal
amount or ``(nominal, borrowingLimit, lendingLimit)`` (``None`` for unset), the
same shape Kueue's ``Resource(name, nominal, borrowingLimit, lendingLimit)``
takes. Each LocalQueue is named like its ClusterQueue, so a workload names the
ClusterQueue it is queued in.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import pytest

from phalanx.scheduler import Admission, PodSetAssignment, PreemptionReason, Scheduler
from phalanx.spec import (
    ClusterQueue,
    Cohort,
    JobSpec,
    Node,
    PodSet,
    QueueConfig,
    ResourceFlavor,
)

from ..strategies import QuotaSpec, make_config
from ..strategies import cluster_queue as _cluster_queue
from ..strategies import cohort as _cohort

GPU = "example.com/gpu"
# Kueue's default pod set name.
MAIN = "main"
# The one node, larger than any quota in any case.
NODE_NAME = "big"

R = PreemptionReason


# --------------------------------------------------------------------------- configuration
def flavors(*names: str) -> list[ResourceFlavor]:
    """Label-less flavors: quota alone tells them apart."""
    return [ResourceFlavor(name=n) for n in names]


def cq(
    name: str,
    quotas: dict[str, dict[str, QuotaSpec]],
    *,
    cohort: str | None = None,
    within: str = "Never",
    reclaim: str = "Never",
    borrow: tuple[str, int | None] | None = None,
    can_borrow: str = "Borrow",
    can_preempt: str = "TryNextFlavor",
    weight: float = 1.0,
    strategy: str = "BestEffortFIFO",
) -> ClusterQueue:
    """A ClusterQueue; flavors covering the same resources form one resource group."""
    return _cluster_queue(
        name, quotas, cohort=cohort, within=within, reclaim=reclaim, borrow_within=borrow,
        when_can_borrow=can_borrow, when_can_preempt=can_preempt, weight=weight,
        strategy=strategy,
    )


def cohort(
    name: str,
    *,
    parent: str | None = None,
    quotas: dict[str, dict[str, QuotaSpec]] | None = None,
    weight: float = 1.0,
) -> Cohort:
    return _cohort(name, parent=parent, flavors=quotas, weight=weight)


def config(*objects: ResourceFlavor | Cohort | ClusterQueue) -> QueueConfig:
    return make_config(*objects)


# --------------------------------------------------------------------------- workloads
@dataclass(frozen=True)
class Wl:
    """A Kueue workload: pending, or admitted when ``admission`` is set."""

    name: str
    queue: str
    pod_sets: tuple[PodSet, ...]
    priority: int = 0
    # Creation time for pending workloads; for admitted ones also the order of admission
    # (Kueue's quota-reservation time), which preemption reads as "most recently admitted".
    at: float = 0.0
    admission: Admission | None = None

    def spec(self) -> JobSpec:
        return JobSpec(name=self.name, queue=self.queue, pod_sets=list(self.pod_sets))

    def admitted(
        self,
        cluster_queue: str | None = None,
        flavors: Mapping[str, str] | Mapping[str, Mapping[str, str]] | None = None,
        *,
        counts: Mapping[str, int] | None = None,
    ) -> Wl:
        """This workload already admitted with ``flavors`` (resource -> flavor for every pod
        set, or pod set -> resource -> flavor); ``counts`` for a partial admission."""
        queue = cluster_queue or self.queue
        assignments = []
        for ps in self.pod_sets:
            chosen = _flavors_of(ps.name, flavors or {})
            count = (counts or {}).get(ps.name, ps.replicas)
            assignments.append(PodSetAssignment(
                name=ps.name, count=count,
                flavors={r: chosen[r] for r in ps.resources if r in chosen},
                nodes=(NODE_NAME,) * count,
            ))
        return replace(self, admission=Admission(self.name, queue, tuple(assignments)))


def _flavors_of(
    pod_set: str, flavors: Mapping[str, str] | Mapping[str, Mapping[str, str]]
) -> dict[str, str]:
    if pod_set in flavors:
        chosen = flavors[pod_set]
        assert not isinstance(chosen, str)
        return dict(chosen)
    return {r: f for r, f in flavors.items() if isinstance(f, str)}


def ps(name: str, count: int, min_count: int | None = None, **requests: Any) -> PodSet:
    """A pod set of ``count`` pods, each requesting ``requests`` (``gpu`` is example.com/gpu)."""
    resources = {(GPU if r == "gpu" else r): v for r, v in requests.items()}
    return PodSet(name=name, replicas=count, min_replicas=min_count, resources=resources)


def wl(
    name: str,
    queue: str,
    *,
    priority: int = 0,
    at: float = 0.0,
    count: int = 1,
    min_count: int | None = None,
    pod_sets: Sequence[PodSet] | None = None,
    **requests: Any,
) -> Wl:
    """A one-pod-set workload (pod set ``main``) unless ``pod_sets`` is given."""
    sets = tuple(pod_sets) if pod_sets else (ps(MAIN, count, min_count, **requests),)
    return Wl(name, queue, sets, priority, at)


# --------------------------------------------------------------------------- outcomes
@dataclass(frozen=True)
class Admit:
    """An admission expected after the cycle: ClusterQueue, flavor per resource per pod set
    (a plain resource -> flavor mapping applies to every pod set) and pod counts."""

    job: str
    cluster_queue: str
    flavors: Mapping[str, str] | Mapping[str, Mapping[str, str]]
    counts: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Case:
    source: str  # Kueue file the case comes from
    name: str  # Kueue's name for the case
    config: QueueConfig
    workloads: Sequence[Wl]
    admit: Sequence[Admit] = ()
    # Victims of the cycle; a dict also fixes each one's reason.
    preempt: Iterable[str] | Mapping[str, PreemptionReason] = ()
    fair_sharing: bool = False
    note: str = ""  # how Phalanx's reading differs from Kueue's, when it does
    marks: Sequence[Any] = ()

    def param(self) -> Any:
        return pytest.param(self, id=self.name, marks=list(self.marks))


def param(
    source: str,
    name: str,
    cfg: QueueConfig,
    workloads: Sequence[Wl],
    admit: Sequence[Admit] = (),
    preempt: Iterable[str] | Mapping[str, PreemptionReason] = (),
    *,
    fair_sharing: bool = False,
    note: str = "",
    marks: Sequence[Any] = (),
) -> Any:
    """A pytest parameter for one Kueue case, its id being Kueue's name for it."""
    return Case(source, name, cfg, workloads, admit, preempt, fair_sharing, note, marks).param()


def divergence(number: int, what: str) -> Any:
    """A known divergence from Kueue that the scheduler is to be fixed for: strict, so the
    fix shows up as an unexpected pass."""
    return pytest.mark.xfail(strict=True, reason=f"divergence {number}: {what}")


def new_divergence(what: str) -> Any:
    return pytest.mark.xfail(strict=True, reason=f"new divergence: {what}")


def big_node(case: Case) -> Node:
    """A node with plenty of every resource the case's queues or workloads name."""
    resources = {"pods"}
    for queue in case.config.cluster_queues.values():
        for group in queue.resource_groups:
            resources.update(group.covered_resources)
    for w in case.workloads:
        for pod_set in w.pod_sets:
            resources.update(pod_set.resources)
    return Node(name=NODE_NAME,
                allocatable={r: ("1Pi" if r == "memory" else 10**6) for r in resources})


def run(case: Case) -> None:
    """Restore the admitted workloads, submit the pending ones, run one cycle, compare."""
    scheduler = Scheduler(case.config, [big_node(case)])
    scheduler.set_fair_sharing(case.fair_sharing)
    # Restored in admission order, so the latest admitted is the latest restored.
    admitted = sorted((w for w in case.workloads if w.admission), key=lambda w: w.at)
    for w in admitted:
        assert w.admission is not None
        scheduler.restore(w.spec(), priority=w.priority, submitted_at=w.at,
                          admission=w.admission)
    for w in case.workloads:
        if w.admission is None:
            scheduler.submit(w.spec(), priority=w.priority, submitted_at=w.at)
    result = scheduler.cycle()

    got = {a.job: a for a in result.admissions}
    victims = {p.victim: p.reason for p in result.preemptions}
    pending = {w.name: scheduler.pending_reason(w.name) for w in case.workloads
               if w.admission is None and w.name not in got}
    outcome = (f"admitted {sorted(got)}, victims {victims}, pending "
               + "; ".join(f"{n}: {r.code} {r.message}" for n, r in pending.items() if r))
    assert sorted(got) == sorted(a.job for a in case.admit), outcome
    by_name = {w.name: w for w in case.workloads}
    for want in case.admit:
        adm = got[want.job]
        assert adm.cluster_queue == want.cluster_queue, want.job
        for assigned in adm.pod_sets:
            wanted_flavors = _flavors_of(assigned.name, want.flavors)
            requested = next(p for p in by_name[want.job].pod_sets if p.name == assigned.name)
            got_flavors = {r: f for r, f in assigned.flavors.items() if r in requested.resources}
            assert got_flavors == wanted_flavors, f"{want.job}/{assigned.name} flavors: {adm}"
            count = want.counts.get(assigned.name, requested.replicas)
            assert assigned.count == count, f"{want.job}/{assigned.name} pod count: {adm}"

    assert sorted(victims) == sorted(case.preempt), outcome
    if isinstance(case.preempt, Mapping):
        assert victims == dict(case.preempt), "preemption reasons"
