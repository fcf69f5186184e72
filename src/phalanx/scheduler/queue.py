"""Pending workloads per ClusterQueue, grouped into equivalence classes.

Jobs of one ClusterQueue with the same LocalQueue, priority, pod-set shape and
topology are interchangeable for admission: if the first of them does not fit,
none of the others does either until capacity changes. A ``PendingClass`` holds
such jobs sorted by (priority, submission time); a cycle looks at a class's head
and, when it fails, records the capacity versions it failed at so the whole class
is skipped until one of them moves. Order inside a ClusterQueue is priority, then
submission time (Kueue's BestEffortFIFO and StrictFIFO order).

Each ClusterQueue keeps its classes sorted by head (``QueuePending.ordered``), updated as
jobs arrive and leave, as Kueue's queue manager keeps a heap per ClusterQueue: a cycle
walks that order instead of sorting every pending class again.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right, insort

from phalanx.scheduler.preemption.dominance import BlockStamp, Failure, settled_reason
from phalanx.scheduler.types import PendingReason
from phalanx.scheduler.workload import OrderKey, Workload


class PendingClass:
    __slots__ = (
        "blocked", "cluster_queue", "cursor", "key", "keys", "reason", "reason_serial", "serial",
        "settled", "wls",
    )

    def __init__(self, key: tuple[object, ...], cluster_queue: str, serial: int) -> None:
        self.key = key
        self.cluster_queue = cluster_queue
        self.serial = serial  # creation order, the deterministic tie-break between classes
        self.cursor = 0  # members a cycle's turn skipped (preemptors waiting): cycle.QueueTurn
        self.keys: list[OrderKey] = []
        self.wls: list[Workload] = []  # the members, in the order of ``keys``
        self.blocked: BlockStamp | None = None
        # The class's latest reason: every member's, unless the member has a later one.
        self.reason: PendingReason | None = None
        self.reason_serial = 0
        # Or, instead of ``reason``: the head and the smaller job whose failure settled the
        # class. Most classes a cycle reaches are settled and few reasons are ever read, so
        # the sentence is written when it is (``latest_reason``).
        self.settled: tuple[Workload, Failure] | None = None

    def add(self, wl: Workload) -> bool:
        """Insert; a new head unblocks the class (it must be looked at again). True when
        ``wl`` is the new head."""
        key = wl.order_key
        i = bisect_right(self.keys, key)
        self.keys.insert(i, key)
        self.wls.insert(i, wl)
        if not i:
            self.blocked = None
        return not i

    def discard(self, wl: Workload) -> bool:
        """Remove; True when ``wl`` was the head."""
        key = wl.order_key
        i = bisect_left(self.keys, key)
        if i < len(self.keys) and self.keys[i] == key:
            del self.keys[i]
            del self.wls[i]
            return not i
        return False

    def latest_reason(self) -> PendingReason | None:
        """The class's latest reason, its sentence written now if it was settled."""
        if self.reason is None and self.settled is not None:
            self.reason = settled_reason(*self.settled)
            self.settled = None
        return self.reason

    def head(self, start: int = 0) -> Workload | None:
        return self.wls[start] if start < len(self.wls) else None

    def members(self) -> list[Workload]:
        return list(self.wls)

    def __len__(self) -> int:
        return len(self.keys)


# A class in its queue's order: (its head's order key, its serial, the class).
OrderedClass = tuple[OrderKey, int, PendingClass]


class QueuePending:
    """The pending jobs of one ClusterQueue."""

    __slots__ = ("classes", "count", "name", "ordered", "strict_head", "strict_local_queue",
                 "strict_reason", "strict_serial", "strict_unnamed")

    def __init__(self, name: str) -> None:
        self.name = name
        self.classes: dict[tuple[object, ...], PendingClass] = {}
        # The classes by head, then serial (keys never tie: a job is in one class).
        self.ordered: list[OrderedClass] = []
        self.count = 0
        # StrictFIFO: the reason of everyone behind a head that cannot go, and that head.
        self.strict_reason: PendingReason | None = None
        self.strict_head = ""
        # holdForLargeGangs: the reason told to jobs of other LocalQueues than the head's
        # (``strict_local_queue``), naming no job; None: ``strict_reason`` for everyone.
        self.strict_unnamed: PendingReason | None = None
        self.strict_local_queue = ""
        self.strict_serial = 0

    def place(self, cls: PendingClass) -> None:
        """Put ``cls`` (not in the order) where its head goes."""
        insort(self.ordered, (cls.keys[0], cls.serial, cls))

    def unplace(self, head: OrderKey, cls: PendingClass) -> None:
        """Take ``cls``, whose head was ``head``, out of the order."""
        ordered = self.ordered
        i = bisect_left(ordered, (head, cls.serial))
        assert ordered[i][2] is cls
        del ordered[i]


class QueueManager:
    """Every pending workload, by ClusterQueue and class."""

    def __init__(self) -> None:
        self.queues: dict[str, QueuePending] = {}
        self._class_of: dict[str, PendingClass] = {}  # job name -> its class
        self._serial = 0

    def queue(self, name: str) -> QueuePending:
        q = self.queues.get(name)
        if q is None:
            q = self.queues[name] = QueuePending(name)
        return q

    def push(self, wl: Workload) -> None:
        q = self.queue(wl.cluster_queue)
        key = (wl.local_queue, wl.priority, wl.shape)
        cls = q.classes.get(key)
        if cls is None:
            self._serial += 1
            cls = q.classes[key] = PendingClass(key, q.name, self._serial)
        old_head = cls.keys[0] if cls.keys else None
        if cls.add(wl):
            if old_head is not None:
                q.unplace(old_head, cls)
            q.place(cls)
        self._class_of[wl.name] = cls
        q.count += 1

    def class_of(self, wl: Workload) -> PendingClass | None:
        """The class ``wl`` waits in (None: it is not queued here)."""
        return self._class_of.get(wl.name)

    def discard(self, wl: Workload) -> None:
        cls = self._class_of.pop(wl.name, None)
        if cls is None:
            return
        q = self.queues[cls.cluster_queue]
        head = cls.keys[0] if cls.keys else None
        if cls.discard(wl) and head is not None:
            q.unplace(head, cls)
            if cls.keys:
                q.place(cls)
        q.count -= 1
        if not cls.keys:
            del q.classes[cls.key]

    def pending_count(self, cq: str) -> int:
        q = self.queues.get(cq)
        return q.count if q is not None else 0
