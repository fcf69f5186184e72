"""What goes into the scheduler core and what comes out of a cycle.

These frozen records are the whole contract between the pure core and its
drivers (the control plane's loop, the simulator, tests, benchmarks).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class PendingCode(StrEnum):
    QUOTA_EXHAUSTED = "QuotaExhausted"
    COHORT_EXHAUSTED = "CohortExhausted"
    NO_NODE_FITS = "NoNodeFits"
    TOPOLOGY_UNSATISFIABLE = "TopologyUnsatisfiable"
    PREEMPTION_DISABLED = "PreemptionDisabled"
    WAITING_FOR_PREEMPTED_PODS = "WaitingForPreemptedPods"
    STRICT_FIFO_BLOCKED = "StrictFIFOBlocked"
    QUEUE_STOPPED = "QueueStopped"
    NO_FLAVOR = "NoMatchingFlavor"
    NEVER_FITS = "NeverFits"
    QUEUED = "Queued"  # not yet looked at in a cycle
    # Holds its quota while a node pool is bought for it (scheduler/provisioning.py).
    PROVISIONING = "Provisioning"


@dataclass(frozen=True, slots=True)
class PendingReason:
    code: PendingCode
    message: str


@dataclass(frozen=True, slots=True)
class PodSetAssignment:
    name: str
    count: int  # may be below replicas under partial admission, never below minReplicas
    flavors: dict[str, str]  # resource -> flavor name
    nodes: tuple[str, ...]  # one node per pod, in pod-index order (len == count)


@dataclass(frozen=True, slots=True)
class Admission:
    job: str
    cluster_queue: str
    pod_sets: tuple[PodSetAssignment, ...]
    borrowing: bool = False

    def to_dict(self) -> dict[str, object]:
        return {
            "job": self.job,
            "clusterQueue": self.cluster_queue,
            "borrowing": self.borrowing,
            "podSets": [
                {"name": p.name, "count": p.count, "flavors": p.flavors, "nodes": list(p.nodes)}
                for p in self.pod_sets
            ],
        }

    @classmethod
    def from_dict(cls, data: dict[str, object]) -> Admission:
        pod_sets = data["podSets"]
        assert isinstance(pod_sets, list)
        return cls(
            job=str(data["job"]),
            cluster_queue=str(data["clusterQueue"]),
            borrowing=bool(data.get("borrowing", False)),
            pod_sets=tuple(
                PodSetAssignment(
                    name=p["name"], count=p["count"], flavors=dict(p["flavors"]),
                    nodes=tuple(p["nodes"]),
                )
                for p in pod_sets
            ),
        )


class PreemptionReason(StrEnum):
    IN_CLUSTER_QUEUE = "InClusterQueue"
    IN_COHORT_RECLAMATION = "InCohortReclamation"
    IN_COHORT_RECLAIM_WHILE_BORROWING = "InCohortReclaimWhileBorrowing"
    IN_COHORT_FAIR_SHARING = "InCohortFairSharing"
    QUEUE_STOPPED = "QueueStopped"  # evicted by stopPolicy HoldAndDrain; no preemptor
    # Evicted by capacityFollowsHealth: the queue's nodes went out; no preemptor.
    CAPACITY_WITHHELD = "CapacityWithheld"


@dataclass(frozen=True, slots=True)
class Preemption:
    victim: str
    preemptor: str
    reason: PreemptionReason
    message: str


@dataclass(slots=True)
class CycleResult:
    admissions: list[Admission] = field(default_factory=list)
    preemptions: list[Preemption] = field(default_factory=list)
    # Gangs that took a provisioning hold this cycle (ProvisioningNeed, scheduler/provisioning)
    provisioning: list[Any] = field(default_factory=list)
    # Pending jobs' reasons are read with Scheduler.pending_reason: a cycle gives them to
    # whole classes and queues at once, so listing every pending job would cost the most.


@dataclass(frozen=True, slots=True)
class JobView:
    """One job as the scheduler holds it, for a driver that copies the state (a forecast)."""

    spec: Any  # the JobSpec it was submitted with
    priority: int
    submitted_at: float
    cluster_queue: str
    admission: Admission | None  # None: pending
    started_at: float  # the driver's clock when admitted (0: not given)
    terminating: bool  # preempted or drained, still holding its capacity


@dataclass(frozen=True, slots=True)
class SchedulerSnapshot:
    """Enough of a scheduler's state to build another that decides the same: the
    configuration as given, the nodes, fair sharing, and every job in submission order."""

    config: Any  # QueueConfig
    nodes: tuple[Any, ...]  # Node
    fair_sharing: bool
    jobs: tuple[JobView, ...]


@dataclass(frozen=True, slots=True)
class ResourceUsage:
    flavor: str
    resource: str
    nominal: int  # milli-units
    used: int  # by admitted jobs of this queue (including borrowed)
    borrowed: int  # part of used above nominal
    lendable: int  # what this queue can lend its cohort right now
    withheld: int = 0  # taken from nominal by unhealthy or cordoned nodes (capacityFollowsHealth)


@dataclass(frozen=True, slots=True)
class ClusterQueueStatus:
    name: str
    cohort: str | None
    pending: int
    admitted: int
    usage: tuple[ResourceUsage, ...]
    weighted_share: float  # dominant resource share / weight (fair sharing), 0 when not borrowing
    stopped: bool = False
