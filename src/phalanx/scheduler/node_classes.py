"""Equivalence classes of nodes and their free-capacity buckets, the index behind placement.

Nodes with the same labels, taints, allocatable and schedulability are
interchangeable for placement except for how much of them is free. A class
keeps its nodes in buckets keyed by the free-capacity vector, each bucket a
name-sorted list, so a placement walks a handful of buckets per class instead
of every node.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from enum import IntEnum

from phalanx.spec.resources import GPU, Node, NodeHealth, Taint, Toleration, tolerates_all

PODS = "pods"
POD_MILLIS = 1000  # one pod takes one unit of the "pods" resource
MAX_TRACKED_SHAPES = 16  # pod shapes per class whose room is kept up to date

FreeVector = tuple[int, ...]  # free milli-units, in the class's resource order
Pairs = tuple[tuple[int, int], ...]  # (resource position, per-pod request) a pod needs
ClassKey = tuple[
    tuple[tuple[str, str], ...], tuple[tuple[str, str, str], ...], tuple[tuple[str, int], ...], int
]


class Status(IntEnum):
    """Schedulability of a node; the first two take pods, degraded ones last."""

    READY = 0
    DEGRADED = 1
    CORDONED = 2
    UNHEALTHY = 3


def node_status(node: Node) -> Status:
    if node.health == NodeHealth.UNHEALTHY:
        return Status.UNHEALTHY
    if node.unschedulable:
        return Status.CORDONED
    if node.health == NodeHealth.DEGRADED:
        return Status.DEGRADED
    return Status.READY


def resource_order(name: str) -> tuple[int, str]:
    """GPUs are the scarce resource packing cares about most, so they sort first."""
    return (0 if name == GPU else 2 if name == PODS else 1, name)


def class_key(node: Node, *, labels: bool = True) -> ClassKey:
    """The equivalence class of a node; without labels, its shape (classes merged for
    placements that ignore topology)."""
    return (
        tuple(sorted(node.labels.items())) if labels else (),
        tuple((t.key, t.value, t.effect) for t in node.taints),
        tuple(sorted(node.allocatable.items())),
        int(node_status(node)),
    )


def fit_count(free: FreeVector, pairs: Pairs, cap: int) -> int:
    """How many pods with these requests fit in ``free``, at most ``cap``."""
    best = cap
    for i, amount in pairs:
        n = free[i] // amount
        if n < best:
            best = n
    return best if best > 0 else 0


def take(free: FreeVector, pairs: Pairs, pods: int) -> FreeVector:
    out = list(free)
    for i, amount in pairs:
        out[i] -= amount * pods
    return tuple(out)


class NodeClass:
    """Interchangeable nodes, bucketed by free capacity."""

    __slots__ = (
        "_pairs",
        "_rooms",
        "_sorted",
        "allocatable",
        "buckets",
        "index",
        "key",
        "labels",
        "resources",
        "size",
        "status",
        "taints",
        "total_free",
        "version",
    )

    def __init__(self, key: ClassKey, node: Node) -> None:
        self.key = key
        self.labels: dict[str, str] = dict(key[0])
        self.taints: list[Taint] = list(node.taints)
        self.status = node_status(node)
        self.resources: tuple[str, ...] = tuple(sorted(node.allocatable, key=resource_order))
        self.index: dict[str, int] = {r: i for i, r in enumerate(self.resources)}
        self.allocatable: FreeVector = tuple(node.allocatable[r] for r in self.resources)
        self.buckets: dict[FreeVector, list[str]] = {}
        # Sum of the non-negative free amounts, for quick "can this domain hold it" checks.
        self.total_free = [0] * len(self.resources)
        self.size = 0
        self.version = 0  # bumped on every change, so per-class figures can be cached
        # Bucket order per ranking of requested resources; dropped when buckets appear or vanish.
        self._sorted: dict[tuple[int, ...], list[tuple[FreeVector, FreeVector]]] = {}
        self._pairs: dict[tuple[tuple[str, int], ...], Pairs | None] = {}
        # Per pod shape asked about: [pods that fit node by node, nodes with room for one],
        # kept up to date by add/discard so room questions cost nothing per call.
        self._rooms: dict[Pairs, list[int]] = {}

    @property
    def usable(self) -> bool:
        return self.status <= Status.DEGRADED

    def matches(self, selector: tuple[tuple[str, str], ...],
                tolerations: tuple[Toleration, ...]) -> tuple[bool, bool]:
        """(labels match the selector, and also every blocking taint is tolerated)."""
        labels = self.labels
        if any(labels.get(k) != v for k, v in selector):
            return False, False
        return True, tolerates_all(list(tolerations), self.taints)

    def free_of(self, used: dict[str, int] | None) -> FreeVector:
        if not used:
            return self.allocatable
        pairs = zip(self.resources, self.allocatable, strict=True)
        return tuple(a - used.get(r, 0) for r, a in pairs)

    def add(self, name: str, free: FreeVector) -> None:
        bucket = self.buckets.get(free)
        if bucket is None:
            self.buckets[free] = [name]
            self._sorted.clear()
        else:
            insort(bucket, name)
        self.version += 1
        totals = self.total_free
        for i, f in enumerate(free):
            if f > 0:
                totals[i] += f
        self.size += 1
        for pairs, room in self._rooms.items():
            n = fit_count(free, pairs, 1 << 30)
            if n:
                room[0] += n
                room[1] += 1

    def discard(self, name: str, free: FreeVector) -> None:
        bucket = self.buckets[free]
        del bucket[bisect_left(bucket, name)]
        if not bucket:
            del self.buckets[free]
            self._sorted.clear()
        self.version += 1
        totals = self.total_free
        for i, f in enumerate(free):
            if f > 0:
                totals[i] -= f
        self.size -= 1
        for pairs, room in self._rooms.items():
            n = fit_count(free, pairs, 1 << 30)
            if n:
                room[0] -= n
                room[1] -= 1

    def pairs(self, requests: tuple[tuple[str, int], ...]) -> Pairs | None:
        """A pod's needs in this class's positions; None if it asks for something absent."""
        try:
            return self._pairs[requests]
        except KeyError:
            pass
        out: list[tuple[int, int]] = []
        result: Pairs | None = None
        for resource, amount in requests:
            i = self.index.get(resource)
            if i is None:
                break
            out.append((i, amount))
        else:
            pods = self.index.get(PODS)
            if pods is not None:
                out.append((pods, POD_MILLIS))
            result = tuple(out)
        self._pairs[requests] = result
        return result

    def room(self, pairs: Pairs) -> int:
        """Pods of this shape that fit, node by node, in the free capacity."""
        return self.room_nodes(pairs)[0]

    def room_nodes(self, pairs: Pairs) -> tuple[int, int]:
        """(pods of this shape that fit node by node, nodes with room for one of them)."""
        room = self._rooms.get(pairs)
        if room is None:
            if len(self._rooms) >= MAX_TRACKED_SHAPES:  # bounded: pod shapes are few
                self._rooms.clear()
            pods = nodes = 0
            for free, names in self.buckets.items():
                n = fit_count(free, pairs, 1 << 30)
                if n:
                    pods += n * len(names)
                    nodes += len(names)
            room = self._rooms[pairs] = [pods, nodes]
        return room[0], room[1]

    def sorted_buckets(self, rank: tuple[int, ...]) -> list[tuple[FreeVector, FreeVector]]:
        """(free amounts of the ranked resources, bucket key), least free first."""
        order = self._sorted.get(rank)
        if order is None:
            order = sorted((tuple(f[i] for i in rank), f) for f in self.buckets)
            self._sorted[rank] = order
        return order
