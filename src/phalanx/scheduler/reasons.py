"""Pending reasons: a machine-readable code and one human sentence with the numbers.

e.g. "needs 16 nvidia.com/gpu of h100; team-a has 8 free, cohort research lends 4".
"""

from __future__ import annotations

from phalanx.scheduler.cache import QueueInfo, QuotaCache
from phalanx.scheduler.flavorassigner.flavors import Assignment, Shortfall
from phalanx.scheduler.types import PendingCode, PendingReason
from phalanx.scheduler.workload import FR
from phalanx.spec.quantity import format_amount

C = PendingCode
QUEUED = PendingReason(C.QUEUED, "waiting for the next scheduling cycle")


def _amount(value: int, resource: str) -> str:
    return f"{format_amount(max(0, value), resource)} {resource}"


def _shortfall_text(s: Shortfall, cq: QueueInfo, cache: QuotaCache) -> tuple[PendingCode, str]:
    node = cq.node
    fr = (s.flavor, s.resource)
    used = node.usage.get(fr, 0)
    nominal = node.nominal(fr)
    text = f"needs {_amount(s.need, s.resource)} of {s.flavor}; "
    limit = cache.own_limit(node, fr)
    own_blocks = limit is not None and s.need > limit
    if s.never:
        ever = _amount(s.available, s.resource)
        text += f"{cq.name} can never get more than {ever} (nominal {_amount(nominal, s.resource)}"
        text += ", with borrowing)" if node.parent is not None else ")"
        code = C.COHORT_EXHAUSTED if node.parent is not None and not own_blocks else \
            C.QUOTA_EXHAUSTED
        return code, text
    own_free = max(0, nominal - used)
    text += f"{cq.name} has {format_amount(own_free, s.resource)} free"
    if node.parent is None:
        return C.QUOTA_EXHAUSTED, text + f" of {_amount(nominal, s.resource)}"
    lends = cache.cohort_lends(node, fr)
    text += f", cohort {node.parent.name} lends {format_amount(lends, s.resource)}"
    if limit is not None and used + s.need > limit:
        return C.QUOTA_EXHAUSTED, text + (
            f" (borrowingLimit caps {cq.name} at {_amount(limit, s.resource)})")
    return C.COHORT_EXHAUSTED, text


def quota_reason(cq: QueueInfo, cache: QuotaCache, a: Assignment, note: str = "",
                 disabled_by: str = "") -> PendingReason:
    """Why an assignment that needs more quota than is free cannot be admitted."""
    if a.no_flavor:
        return PendingReason(C.NO_FLAVOR, a.no_flavor)
    if not a.shortfalls:
        if a.node_failure is not None:
            return PendingReason(a.node_failure.code, a.node_failure.message)
        return PendingReason(C.QUOTA_EXHAUSTED, f"does not fit ClusterQueue {cq.name}")
    code, text = _shortfall_text(a.shortfalls[0], cq, cache)
    others = sorted({s.flavor for s in a.shortfalls[1:]} - {a.shortfalls[0].flavor})
    if others:
        text += f" (flavor{'s' if len(others) > 1 else ''} {', '.join(others)} tried too)"
    if disabled_by:
        code = C.PREEMPTION_DISABLED
        text += f"; preempting lower-priority jobs is disabled by {disabled_by}"
    elif note:
        text += f"; {note}"
    if a.node_failure is not None:
        text += f"; on nodes it {a.node_failure.message}"
    return PendingReason(code, text)


def node_reason(cq: QueueInfo, a: Assignment) -> PendingReason:
    assert a.node_failure is not None
    flavors = sorted({f for c in a.choices for f in c.flavors.values()})
    where = f" ({'/'.join(flavors)} nodes)" if flavors else ""
    return PendingReason(a.node_failure.code, a.node_failure.message + where)


def waiting_reason(victims: list[str]) -> PendingReason:
    shown = ", ".join(victims[:5]) + (f" and {len(victims) - 5} more" if len(victims) > 5 else "")
    return PendingReason(
        C.WAITING_FOR_PREEMPTED_PODS,
        f"waiting for {len(victims)} preempted job{'s' if len(victims) != 1 else ''} "
        f"({shown}) to release their capacity",
    )


def reserved_reason(holder: str, holder_cq: str, priority: int, cohort: str,
                    frs: list[FR]) -> PendingReason:
    what = ", ".join(f"{res} of {flavor}" for flavor, res in frs)
    return PendingReason(
        C.COHORT_EXHAUSTED,
        f"cohort {cohort} keeps its free {what} for {holder} (ClusterQueue {holder_cq}, "
        f"priority {priority}), which waits for enough of it to borrow; this job has a "
        "lower priority and would borrow it too",
    )


def strict_fifo_reason(cq: str, head: str, head_reason: PendingReason) -> PendingReason:
    return PendingReason(
        C.STRICT_FIFO_BLOCKED,
        f"behind {head} in StrictFIFO ClusterQueue {cq}, which waits ({head_reason.code})",
    )


def stopped_reason(kind: str, name: str, policy: str) -> PendingReason:
    return PendingReason(C.QUEUE_STOPPED, f"{kind} {name} is stopped (stopPolicy {policy})")


def orphan_reason(local_queue: str) -> PendingReason:
    return PendingReason(
        C.QUEUE_STOPPED,
        f"LocalQueue {local_queue} no longer exists or points at a missing ClusterQueue",
    )
