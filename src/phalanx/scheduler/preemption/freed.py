"""Room for a gang if some admitted jobs were gone: what preemption asks, step by step.

``FreedRoom`` keeps, per node, what the jobs taken out hold there, and for each pod
group the pods that would fit node by node with that capacity freed (``room_bound``
plus each node's ``room_gain``). Jobs come and go one at a time (a preemption search)
or in batches (the check before it); only the nodes they touch are looked at again.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from phalanx.scheduler.placement import NodePool, PodGroup


class FreedRoom:
    __slots__ = ("base", "freed", "gains", "groups", "pool", "rooms", "sigs")

    def __init__(self, pool: NodePool, groups: Sequence[PodGroup]) -> None:
        self.pool = pool
        self.groups = groups
        self.sigs = [pool.signature(g) for g in groups]
        self.base = [pool.room_bound(g) for g in groups]
        self.rooms = list(self.base)  # per group: pods that fit node by node, freed included
        self.freed: dict[str, dict[str, int]] = {}  # node -> what the jobs out hold there
        self.gains: dict[str, list[int]] = {}  # node -> what its freed capacity adds per group

    def enough(self) -> bool:
        """Whether every group's minimum fits node by node (necessary for a placement)."""
        return all(room >= g.min_count for room, g in zip(self.rooms, self.groups, strict=True))

    def add(self, jobs: Iterable[str]) -> None:
        touched: set[str] = set()
        freed = self.freed
        for job in jobs:
            for name, held in self.pool.holdings(job).items():
                into = freed.setdefault(name, {})
                for res, amount in held.items():
                    into[res] = into.get(res, 0) + amount
                touched.add(name)
        for name in touched:
            self._regain(name)

    def remove(self, job: str) -> None:
        freed = self.freed
        for name, held in self.pool.holdings(job).items():
            into = freed[name]
            for res, amount in held.items():
                left = into[res] - amount
                if left:
                    into[res] = left
                else:
                    del into[res]
            if not into:
                del freed[name]
            self._regain(name)

    def reset(self) -> None:
        self.freed = {}
        self.gains = {}
        self.rooms = list(self.base)

    def _regain(self, name: str) -> None:
        extra = self.freed.get(name)
        rooms = self.rooms
        old = self.gains.pop(name, None)
        if old is not None:
            for i, gain in enumerate(old):
                rooms[i] -= gain
        if extra:
            pool = self.pool  # (a method called on it, not a bound method kept: a native call)
            new = self.gains[name] = [pool.room_gain(sig, name, extra) for sig in self.sigs]
            for i, gain in enumerate(new):
                rooms[i] += gain
