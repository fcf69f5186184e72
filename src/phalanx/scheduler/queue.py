"""Pending workloads per ClusterQueue, grouped into equivalence classes.

Jobs of one ClusterQueue with the same LocalQueue, priority, pod-set shape and
topology are interchangeable for admission: if the first of them does not fit,
none of the others does either until capacity changes. A ``PendingClass`` holds
such jobs sorted by (priority, submission time); a cycle looks at a class's head
and, when it fails, records the capacity versions it failed at so the whole class
is skipped until one of them moves. Order inside a ClusterQueue is priority, then
submission time (Kueue's BestEffortFIFO and StrictFIFO order).
"""

from __future__ import annotations

from bisect import bisect_left, insort

from phalanx.scheduler.types import PendingReason
from phalanx.scheduler.workload import OrderKey, Workload

# The capacity versions a class head failed at: (tree version or None, node version or None).
BlockStamp = tuple[int | None, int | None]


class PendingClass:
    __slots__ = (
        "blocked", "by_key", "cluster_queue", "fresh", "key", "keys", "reason", "serial",
        "uniform",
    )

    def __init__(self, key: tuple[object, ...], cluster_queue: str, serial: int) -> None:
        self.key = key
        self.cluster_queue = cluster_queue
        self.serial = serial  # creation order, the deterministic tie-break between classes
        self.keys: list[OrderKey] = []
        self.by_key: dict[OrderKey, Workload] = {}
        self.blocked: BlockStamp | None = None
        self.reason: PendingReason | None = None  # the class's latest reason
        self.uniform = False  # every member not in a special state carries ``reason``
        # Members added while ``uniform``: the only ones that still need ``reason`` set, so a
        # deep class costs one assignment per new member, not a walk per cycle.
        self.fresh: list[Workload] = []

    def add(self, wl: Workload) -> bool:
        """Insert; True when ``wl`` became the head (the class must be looked at again)."""
        key = wl.order_key
        insort(self.keys, key)
        self.by_key[key] = wl
        wl.cls = self
        if self.uniform:
            self.fresh.append(wl)
        if self.keys[0] == key:
            self.blocked = None
            return True
        return False

    def discard(self, wl: Workload) -> None:
        key = wl.order_key
        i = bisect_left(self.keys, key)
        if i < len(self.keys) and self.keys[i] == key:
            del self.keys[i]
            del self.by_key[key]
        wl.cls = None

    def head(self, start: int = 0) -> Workload | None:
        return self.by_key[self.keys[start]] if start < len(self.keys) else None

    def members(self) -> list[Workload]:
        return [self.by_key[k] for k in self.keys]

    def __len__(self) -> int:
        return len(self.keys)


class QueuePending:
    """The pending jobs of one ClusterQueue."""

    __slots__ = ("changes", "classes", "count", "epoch", "name", "settled", "strict_cycle",
                 "strict_seen")

    def __init__(self, name: str) -> None:
        self.name = name
        self.classes: dict[tuple[object, ...], PendingClass] = {}
        self.count = 0
        self.epoch = 0  # bumped when something needs a fresh look (new class, new head)
        # The epoch and capacity versions at which every class here was found blocked.
        self.settled: tuple[object, ...] | None = None
        self.changes = 0  # bumped whenever a job joins or leaves
        # StrictFIFO: what the last cycle blocked the queue behind, and that cycle's number.
        self.strict_seen: tuple[object, ...] | None = None
        self.strict_cycle = -1

    def ordered_classes(self) -> list[PendingClass]:
        return sorted(self.classes.values(), key=lambda c: (c.keys[0], c.serial))


class QueueManager:
    """Every pending workload, by ClusterQueue and class."""

    def __init__(self) -> None:
        self.queues: dict[str, QueuePending] = {}
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
            q.epoch += 1
        if cls.add(wl):
            q.epoch += 1
        q.count += 1
        q.changes += 1

    def discard(self, wl: Workload) -> None:
        cls = wl.cls
        if cls is None:
            return
        q = self.queues[cls.cluster_queue]
        cls.discard(wl)
        q.count -= 1
        q.changes += 1
        if not cls.keys:
            del q.classes[cls.key]

    def pending_count(self, cq: str) -> int:
        q = self.queues.get(cq)
        return q.count if q is not None else 0
