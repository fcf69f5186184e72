"""The scheduler facade: events in, decisions out.

CONTRACT (implementation in progress): drivers call only these methods.
"""

from __future__ import annotations

from collections.abc import Iterable

from phalanx.scheduler.types import (
    Admission,
    ClusterQueueStatus,
    CycleResult,
    PendingReason,
)
from phalanx.spec.config import QueueConfig
from phalanx.spec.resources import JobSpec, Node


class Scheduler:
    def __init__(self, config: QueueConfig, nodes: Iterable[Node] = ()) -> None:
        raise NotImplementedError

    # ---- configuration & nodes
    def set_config(self, config: QueueConfig) -> None:
        """Queue config changed (already validated). Pending jobs of removed queues stay pending
        with reason QueueStopped/NoMatchingFlavor; admitted jobs keep running."""
        raise NotImplementedError

    def upsert_node(self, node: Node) -> None:
        raise NotImplementedError

    def remove_node(self, name: str) -> None:
        raise NotImplementedError

    # ---- jobs
    def check_feasible(self, job: JobSpec) -> None:
        """Raise SpecError (naming the field) if ``job`` could never be admitted: unknown queue,
        unknown priority class, a pod larger than any node of any eligible flavor, or a gang larger
        than the most quota its ClusterQueue could ever reach (nominal + borrowing)."""
        raise NotImplementedError

    def submit(self, job: JobSpec, *, priority: int, submitted_at: float) -> None:
        raise NotImplementedError

    def restore(self, job: JobSpec, *, priority: int, submitted_at: float,
                admission: Admission) -> None:
        """Re-establish an already admitted job (control-plane restart): charge its quota and
        reserve its nodes exactly as ``admission`` says, without a new decision."""
        raise NotImplementedError

    def requeue(self, name: str, *, submitted_at: float | None = None) -> None:
        """An admitted (or preempted) job goes back to pending; its quota and nodes are freed."""
        raise NotImplementedError

    def remove(self, name: str) -> None:
        """A job finished or was cancelled: drop it wherever it is, freeing quota and nodes."""
        raise NotImplementedError

    # ---- the cycle
    def cycle(self, now: float) -> CycleResult:
        raise NotImplementedError

    # ---- read-only views
    def pending_reason(self, name: str) -> PendingReason | None:
        raise NotImplementedError

    def queue_status(self) -> list[ClusterQueueStatus]:
        raise NotImplementedError

    def node_usage(self) -> dict[str, dict[str, int]]:
        raise NotImplementedError
