"""The pure scheduler core: quotas, cohorts, preemption, fair sharing and gang placement.

No database, HTTP or subprocesses here: drivers feed events in and act on the
decisions each ``Scheduler.cycle`` returns.
"""

from phalanx.scheduler.core import Scheduler
from phalanx.scheduler.types import (
    Admission,
    ClusterQueueStatus,
    CycleResult,
    PendingCode,
    PendingReason,
    PodSetAssignment,
    Preemption,
    PreemptionReason,
    ResourceUsage,
)

__all__ = [
    "Admission",
    "ClusterQueueStatus",
    "CycleResult",
    "PendingCode",
    "PendingReason",
    "PodSetAssignment",
    "Preemption",
    "PreemptionReason",
    "ResourceUsage",
    "Scheduler",
]
