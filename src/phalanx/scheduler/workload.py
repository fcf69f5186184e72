"""The compact internal form of a job, built once at submit so cycles never touch pydantic.

A ``Workload`` holds what the scheduler needs about a job (its pod sets as plain
tuples, priority, queue, order key), its latest pending reason and, once admitted,
its admission and charged usage. What other parts keep about a job lives with them:
its pending class in the queue manager (``queue``), its demand in ``dominance``, a
preemptor's wait for its victims in ``waiting``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from phalanx.scheduler.types import Admission, PendingReason
from phalanx.spec.resources import JobSpec, Toleration, TopologyConstraint

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
    reason: PendingReason | None = None  # its own latest reason (its class may have a later one)
    reason_serial: int = 0  # when ``reason`` was given, on the scheduler's reason clock
    estimate: dict[FR, int] | None = None  # usage in first flavors, for ordering across queues
    # Admitted state.
    admission: Admission | None = None
    usage: dict[FR, int] = field(default_factory=dict)
    usage_key: UsageKey = ()
    admitted_seq: int = 0
    terminating: bool = False  # preempted; holds its capacity until requeue/remove
    preempted_by: str = ""
    # Recovery: when the driver saw this admission start (its clock, passed to the cycle;
    # 0 when it passes none) and the job's last reported checkpoint (0: none).
    started_at: float = 0.0
    checkpoint_at: float = 0.0

    @property
    def work_since(self) -> float:
        """Since when the job's work would be lost if it stopped now."""
        return max(self.started_at, self.checkpoint_at)

    @property
    def order_key(self) -> OrderKey:
        return (-self.priority, self.submitted_at, self.seq)

    @property
    def admitted(self) -> bool:
        return self.admission is not None

    @property
    def shrinkable(self) -> bool:
        """Whether some pod set may run with fewer pods than it asks for (minReplicas)."""
        return any(ps.min_count < ps.count for ps in self.pod_sets)

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
