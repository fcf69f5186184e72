"""What jobs have reserved on nodes, per job and per node.

Reservations outlive their node: a removed node's pods are still the job's until the
job is released, and a node added again under the same name gets them back.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

from phalanx.scheduler.node_classes import POD_MILLIS, PODS
from phalanx.scheduler.node_index import NodeIndex
from phalanx.scheduler.pod_groups import Placement, PodGroup


class NodeReservations:
    def __init__(self, index: NodeIndex) -> None:
        self.index = index
        self.used: dict[str, dict[str, int]] = {}  # node -> resource -> amount
        self.jobs: dict[str, dict[str, dict[str, int]]] = {}  # job -> node -> resource

    def reserve(self, job: str, groups: Sequence[PodGroup], placement: Placement) -> None:
        """Charge ``placement`` to ``job`` (added to whatever the job already holds)."""
        if len(placement.nodes) != len(groups):
            raise ValueError(
                f"placement has {len(placement.nodes)} pod groups but {len(groups)} were given"
            )
        held = self.jobs.setdefault(job, {})
        for group, names in zip(groups, placement.nodes, strict=True):
            per_pod = {r: a for r, a in group.requests if a}
            per_pod[PODS] = POD_MILLIS
            for name, pods in Counter(names).items():
                delta = {r: a * pods for r, a in per_pod.items()}
                mine = held.setdefault(name, {})
                for resource, amount in delta.items():
                    mine[resource] = mine.get(resource, 0) + amount
                self._charge(name, delta, 1)

    def release(self, job: str) -> None:
        """Free everything ``job`` holds; releasing twice is harmless."""
        for name, delta in self.jobs.pop(job, {}).items():
            self._charge(name, delta, -1)

    def reserved(self, job: str) -> dict[str, dict[str, int]]:
        return {name: dict(res) for name, res in self.jobs.get(job, {}).items()}

    def holdings(self, job: str) -> Mapping[str, Mapping[str, int]]:
        """What ``job`` holds per node, as a live read-only view (no copy)."""
        return self.jobs.get(job, {})

    def usage(self) -> dict[str, dict[str, int]]:
        return {name: dict(res) for name, res in self.used.items() if res}

    def _charge(self, name: str, delta: Mapping[str, int], sign: int) -> None:
        index = self.index
        index.log.bump(name)
        used = self.used.setdefault(name, {})
        for resource, amount in delta.items():
            left = used.get(resource, 0) + sign * amount
            if left:
                used[resource] = left
            else:
                used.pop(resource, None)
        if not used:
            del self.used[name]
        index.refit(name, used)
