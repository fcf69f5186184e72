"""The compact internal form of a job, built once at submit so cycles never touch pydantic.

A ``Workload`` holds what the scheduler needs about a job (its pod sets as plain
tuples, priority, queue, order key) and its scheduling state (pending class,
admission, charged usage, preemption bookkeeping).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from phalanx.scheduler.placement import Placement, PodGroup
from phalanx.scheduler.types import Admission, PendingReason
from phalanx.spec.resources import JobSpec, Toleration, TopologyConstraint

if TYPE_CHECKING:
    from phalanx.scheduler.dominance import Demand
    from phalanx.scheduler.queue import PendingClass

# Those modules import this one, so their classes are imported for the type checker only.
# Compiled, the dataclass below still looks its field types up by name as the module loads
# (its fields are checked against the real classes all the same).
for _name in ("Demand", "PendingClass"):
    globals().setdefault(_name, object)

FR = tuple[str, str]  # (flavor, resource)
OrderKey = tuple[int, float, int]  # (-priority, submitted_at, sequence): smaller goes first
UsageKey = tuple[tuple[FR, int], ...]  # an admitted job's usage, sorted: equal usages, equal keys
PODS = "pods"
POD_MILLIS = 1000


@dataclass(frozen=True, slots=True)
class PodSetDemand:
    """One pod set: per-pod requests (zeros dropped, sorted by resource) and constraints."""

    name: str
    count: int
    min_count: int
    requests: tuple[tuple[str, int], ...]
    selector: tuple[tuple[str, str], ...]
    tolerations: tuple[Toleration, ...]

    @property
    def shape(self) -> tuple[object, ...]:
        tolerations = tuple((t.key, t.operator, t.value, t.effect) for t in self.tolerations)
        return (self.name, self.count, self.min_count, self.requests, self.selector, tolerations)


def pod_sets_of(spec: JobSpec) -> tuple[PodSetDemand, ...]:
    return tuple(
        PodSetDemand(
            name=p.name,
            count=p.replicas,
            min_count=p.min_replicas if p.min_replicas is not None else p.replicas,
            requests=tuple(sorted((r, v) for r, v in p.resources.items() if v > 0)),
            selector=tuple(sorted(p.node_selector.items())),
            tolerations=tuple(p.tolerations),
        )
        for p in spec.pod_sets
    )


@dataclass(slots=True)
class Hold:
    """What a preemptor keeps for itself while its victims terminate (re-applied each cycle),
    and the flavors it preempted for, on which it is admitted once they are gone."""

    cluster_queue: str
    usage: dict[FR, int]
    groups: tuple[PodGroup, ...]
    placement: Placement
    flavors: tuple[dict[str, str], ...]  # per pod set: resource -> flavor
    # The configuration it was made under: flavors' labels, the queue's quotas and covered
    # resources may differ in another, so it is no assignment to admit on there.
    config_generation: int


@dataclass(slots=True, eq=False)
class Workload:
    name: str
    spec: JobSpec
    local_queue: str
    cluster_queue: str  # "" when its LocalQueue no longer exists
    priority: int
    submitted_at: float
    seq: int
    pod_sets: tuple[PodSetDemand, ...]
    topology: TopologyConstraint | None
    shape: tuple[object, ...]
    # Pending state.
    cls: PendingClass | None = None
    reason: PendingReason | None = None  # its own latest reason (its class may have a later one)
    reason_serial: int = 0  # when ``reason`` was given, on the scheduler's reason clock
    waiting_for: tuple[str, ...] = ()  # victims it preempted that still hold capacity
    hold: Hold | None = None
    estimate: dict[FR, int] | None = None  # usage in first flavors, for ordering across queues
    demand: Demand | None = None  # what dominance compares, built on first use
    # Admitted state.
    admission: Admission | None = None
    usage: dict[FR, int] = field(default_factory=dict)
    usage_key: UsageKey = ()
    admitted_seq: int = 0
    terminating: bool = False  # preempted; holds its capacity until requeue/remove
    preempted_by: str = ""

    @property
    def order_key(self) -> OrderKey:
        return (-self.priority, self.submitted_at, self.seq)

    @property
    def admitted(self) -> bool:
        return self.admission is not None

    def newer_than(self, other: Workload) -> bool:
        return (self.submitted_at, self.seq) > (other.submitted_at, other.seq)


def make_workload(
    spec: JobSpec, *, local_queue: str, cluster_queue: str, priority: int, submitted_at: float,
    seq: int,
) -> Workload:
    pod_sets = pod_sets_of(spec)
    topology = spec.topology
    topo_key = (topology.required, topology.preferred) if topology else None
    shape = (tuple(p.shape for p in pod_sets), topo_key)
    return Workload(
        name=spec.name, spec=spec, local_queue=local_queue, cluster_queue=cluster_queue,
        priority=priority, submitted_at=submitted_at, seq=seq, pod_sets=pod_sets,
        topology=topology if topology and (topology.required or topology.preferred) else None,
        shape=shape,
    )
