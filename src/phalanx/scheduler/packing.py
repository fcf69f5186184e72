"""The packing step of placement: pods onto the least-free fitting nodes of some classes.

``NodePool`` decides which classes a pod group may use (selector, taints,
topology domain); ``fill`` then walks their free-capacity buckets in packing
order. ``Signature`` caches what every pod group of the same shape shares.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable
from dataclasses import dataclass, field
from heapq import heapify, heappop, heappush

from phalanx.scheduler.node_classes import FreeVector, NodeClass, Pairs, fit_count, take

# A usable class as seen by one kind of pod: (class, per-pod needs, ranked resource positions).
Entry = tuple[NodeClass, Pairs, tuple[int, ...]]
Overlay = dict[str, FreeVector]  # node -> free capacity as changed within one call
BucketOrder = list[tuple[FreeVector, FreeVector]]
# (status, ranked free, first node, tie, class, needs, class's bucket order or None for a
# single touched node, position in that order); the tie number keeps comparisons off classes.
_HeapItem = tuple[int, FreeVector, str, int, NodeClass, Pairs, BucketOrder | None, int]
NO_DOMAIN = ""  # stands for "node lacks the topology label" in per-domain tables


@dataclass(slots=True)
class Signature:
    """What every pod group with the same requests, selector and tolerations shares."""

    requests: tuple[tuple[str, int], ...]  # non-zero, GPU first
    first_request: int  # per-pod amount of the top-ranked resource (0 if none)
    entries: list[Entry]  # usable classes that match, in class-key order
    # The same nodes with whole shapes in place of their classes where every class of the
    # shape matches: what a placement that ignores topology walks.
    flat: list[Entry]
    blocked: list[NodeClass]  # matching classes that are cordoned or unhealthy
    lacking: list[NodeClass]  # usable matching classes without a requested resource
    untolerated: list[NodeClass]  # label-matching classes whose taints are not tolerated
    by_domain: dict[str, dict[str, list[Entry]]] = field(default_factory=dict)
    # (pool membership version, node counts a failure message quotes: matching, untolerated,
    # cordoned, unhealthy, lacking a resource), reused until nodes come, go or change class.
    sizes: tuple[int, tuple[int, int, int, int, int]] | None = None
    # Cached room (pods that fit node by node) per label key and domain, checked against
    # the pool's version.
    domain_room: dict[str, tuple[int, dict[str, int], list[tuple[int, str]]]] = field(
        default_factory=dict)

    # Per (label key, count, min_count, prune): the values with room for the whole group by
    # name, and the others roomiest first, checked against the pool's version.
    domain_lists: dict[tuple[str, int, int, bool],
                       tuple[int, list[tuple[str, int]], list[tuple[str, int]]]] = field(
        default_factory=dict)

    flat_by_class: dict[int, Entry] | None = None

    def flat_index(self) -> dict[int, Entry]:
        """``flat`` by the id of each entry's class or shape."""
        if self.flat_by_class is None:
            self.flat_by_class = {id(e[0]): e for e in self.flat}
        return self.flat_by_class

    def domains(self, key: str) -> dict[str, list[Entry]]:
        table = self.by_domain.get(key)
        if table is None:
            table = {}
            for entry in self.entries:
                table.setdefault(entry[0].labels.get(key, NO_DOMAIN), []).append(entry)
            self.by_domain[key] = table
        return table


def fill(sig: Signature, entries: list[Entry], work: Overlay, need: int, out: list[str],
         entry_of: Callable[[str, dict[int, Entry]], Entry | None]) -> int:
    """Put up to ``need`` pods on the least-free fitting nodes of ``entries``.

    A heap holds, per class, its next fitting bucket (nodes with equal free capacity)
    plus every node whose capacity this call already changed; a node taken from a
    bucket gets as many pods as fit, which is what pod-by-pod packing would do too.
    """
    heap: list[_HeapItem] = []
    probe = ((sig.first_request,),)
    for seq, (cls, pairs, rank) in enumerate(entries):
        order = cls.sorted_buckets(rank)
        pos = next_fitting(order, bisect_left(order, probe) if rank else 0, pairs)
        if pos < len(order):
            key, free = order[pos]
            heap.append((cls.status, key, cls.buckets[free][0], seq, cls, pairs, order, pos))
    if work:
        by_class = {id(e[0]): e for e in entries}
        seq = len(entries)
        for name, free in work.items():
            entry = entry_of(name, by_class)
            if entry is not None and fit_count(free, entry[1], 1):
                cls, pairs, rank = entry
                key = tuple(free[i] for i in rank)
                heap.append((cls.status, key, name, seq, cls, pairs, None, 0))
                seq += 1
    heapify(heap)
    placed = 0
    while heap and placed < need:
        _, _, first, seq, cls, pairs, bucket_order, pos = heappop(heap)
        if bucket_order is None:  # a node already touched in this call
            free = work[first]
            n = fit_count(free, pairs, need - placed)
            out.extend([first] * n)
            work[first] = take(free, pairs, n)
            placed += n
            continue
        free = bucket_order[pos][1]
        per_node = fit_count(free, pairs, need)
        for name in cls.buckets[free]:
            if name in work:
                continue
            n = min(per_node, need - placed)
            out.extend([name] * n)
            work[name] = take(free, pairs, n)
            placed += n
            if placed >= need:
                break
        pos = next_fitting(bucket_order, pos + 1, pairs)
        if pos < len(bucket_order):
            key, free = bucket_order[pos]
            heappush(heap, (cls.status, key, cls.buckets[free][0], seq, cls, pairs,
                            bucket_order, pos))
    return placed


def next_fitting(order: BucketOrder, pos: int, pairs: Pairs) -> int:
    while pos < len(order) and not fit_count(order[pos][1], pairs, 1):
        pos += 1
    return pos
