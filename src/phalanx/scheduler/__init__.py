"""The pure scheduler core: quotas, cohorts, preemption, fair sharing and gang placement.

No database, HTTP or subprocesses here: drivers feed events in and act on the
decisions each ``Scheduler.cycle`` returns. Wheels carry it compiled with mypyc
(``COMPILED``); an editable install runs the same modules as Python.
"""

from phalanx.scheduler import core as _core
from phalanx.scheduler.core import Scheduler
from phalanx.scheduler.types import (
    Admission,
    ClusterQueueStatus,
    CycleResult,
    JobView,
    PendingCode,
    PendingReason,
    PodSetAssignment,
    Preemption,
    PreemptionReason,
    ResourceUsage,
    SchedulerSnapshot,
)

COMPILED: bool = not (_core.__file__ or "").endswith(".py")

__all__ = [
    "COMPILED",
    "Admission",
    "ClusterQueueStatus",
    "CycleResult",
    "JobView",
    "PendingCode",
    "PendingReason",
    "PodSetAssignment",
    "Preemption",
    "PreemptionReason",
    "ResourceUsage",
    "Scheduler",
    "SchedulerSnapshot",
]
