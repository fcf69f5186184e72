"""The pure scheduler core: quotas, cohorts, preemption, fair sharing and gang placement.

No database, HTTP or subprocesses here: drivers feed events in and act on the
decisions each ``Scheduler.cycle`` returns.
"""

from phalanx.scheduler.core import Scheduler
from phalanx.scheduler.types import (
    Admission,
    CycleResult,
    PendingCode,
    PendingReason,
    PodSetAssignment,
    ClusterQueueStatus,
    ResourceUsage,
    Preemption,
    PreemptionReason,
)

__all__ = [
    "Admission",
    "ClusterQueueStatus",
    "ResourceUsage",
    "Scheduler",
    "CycleResult",
    "PendingCode",
    "PendingReason",
    "PodSetAssignment",
    "Preemption",
    "PreemptionReason",
]
