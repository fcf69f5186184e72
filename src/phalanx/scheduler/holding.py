"""holdForLargeGangs: a ClusterQueue whose first head is a big gang that has waited long
enough admits nothing behind it while it waits.

Under BestEffortFIFO smaller jobs pass a head that does not fit, and on a busy cluster
they can keep passing it for weeks: the big gang is starved. With ``holdForLargeGangs:
{minGPUs: N, after: T}`` the queue's first head (its first class in order) that asks for
N GPUs or more (``spec.resources.gpus_requested``) and has waited T makes the queue
StrictFIFO for that cycle: the capacity it frees is kept for the head. Other queues are
not held; a queue that is StrictFIFO already is unchanged. Without a clock (``State.now``
unset) nothing is held.

A job held behind the head is told so; the head is named only to jobs of its own
LocalQueue, whose viewers may see it: another team learns nothing of it.
"""

from __future__ import annotations

from phalanx.scheduler.cache import QueueInfo
from phalanx.scheduler.queue import PendingClass
from phalanx.scheduler.types import PendingCode, PendingReason
from phalanx.scheduler.workload import Workload
from phalanx.spec.quantity import format_duration
from phalanx.spec.resources import gpus_requested


def holding_head(info: QueueInfo, first: PendingClass, now: float | None) -> Workload | None:
    """The head of ``first`` (the queue's first class) if it holds the queue this cycle."""
    if not info.hold_gpus or now is None or not first.wls:
        return None
    head = first.wls[0]
    if now - head.submitted_at < info.hold_after:
        return None
    return head if gpus_requested(head.spec) >= info.hold_gpus else None


def _rule(info: QueueInfo) -> str:
    return (f"holdForLargeGangs: a head of {info.hold_gpus}+ GPUs that has waited "
            f"{format_duration(info.hold_after)}")


def hold_reasons(info: QueueInfo, head: Workload, head_reason: PendingReason
                 ) -> tuple[PendingReason, PendingReason]:
    """Why a job behind ``head`` waits: as told to a job of the head's LocalQueue (naming
    it), and to any other (naming no job)."""
    named = PendingReason(
        PendingCode.STRICT_FIFO_BLOCKED,
        f"behind {head.name} in ClusterQueue {info.name}, which admits nothing past it "
        f"while it waits ({head_reason.code}; {_rule(info)})",
    )
    unnamed = PendingReason(
        PendingCode.STRICT_FIFO_BLOCKED,
        f"behind a job of another LocalQueue in ClusterQueue {info.name}, which admits "
        f"nothing past it while it waits ({_rule(info)})",
    )
    return named, unnamed
