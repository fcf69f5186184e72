"""What node placement is asked and what it answers: pod groups, a placement, a failure."""

from __future__ import annotations

from dataclasses import dataclass

from phalanx.scheduler.types import PendingCode
from phalanx.spec.resources import Toleration


@dataclass(frozen=True, slots=True)
class PodGroup:
    """One pod set after flavor assignment."""

    name: str
    count: int  # replicas wanted
    min_count: int  # minReplicas (== count when the pod set has none)
    requests: tuple[tuple[str, int], ...]  # per-pod resource -> milli-units (zeros omitted)
    node_selector: tuple[tuple[str, str], ...] = ()  # pod set selector + flavors' nodeLabels
    tolerations: tuple[Toleration, ...] = ()  # pod set tolerations + flavors' tolerations

    def __post_init__(self) -> None:
        if not 0 <= self.min_count <= self.count:
            raise ValueError(
                f"pod group {self.name}: min_count {self.min_count} must be between 0 and "
                f"count {self.count}"
            )


@dataclass(frozen=True, slots=True)
class Placement:
    counts: tuple[int, ...]  # pods placed per group (min_count <= n <= count)
    nodes: tuple[tuple[str, ...], ...]  # per group, one node name per placed pod


@dataclass(frozen=True, slots=True)
class PlacementFailure:
    code: PendingCode  # NO_NODE_FITS or TOPOLOGY_UNSATISFIABLE
    message: str  # one human sentence with numbers, shown as the job's pending reason


def toleration_key(tolerations: tuple[Toleration, ...]) -> tuple[tuple[object, ...], ...]:
    return tuple((t.key, t.operator, t.value, t.effect) for t in tolerations)


def group_key(g: PodGroup) -> tuple[object, ...]:
    """A hashable stand-in for a group with tolerations (which do not hash)."""
    return (g.name, g.count, g.min_count, g.requests, g.node_selector,
            toleration_key(g.tolerations))
