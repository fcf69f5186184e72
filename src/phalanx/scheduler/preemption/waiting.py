"""Preemptors whose victims are still terminating, and the capacity each keeps meanwhile.

A preemptor is not admitted when it preempts: its victims hold their quota and
nodes until their pods are gone. Until then it keeps, cycle after cycle, the quota
and nodes it preempted for, so that no other job takes what its victims free, and
once they are all gone it is admitted there if that still fits.
"""

from __future__ import annotations

from phalanx.scheduler.placement import Placement, PodGroup
from phalanx.scheduler.workload import FR, Workload


class PreemptedCapacity:
    """The quota and nodes a preemptor's victims are freeing for it (re-applied each cycle),
    and the flavors it preempted for, on which it is admitted once they are gone."""

    __slots__ = ("cluster_queue", "config_generation", "flavors", "groups", "placement",
                 "usage")

    def __init__(self, cluster_queue: str, usage: dict[FR, int], groups: tuple[PodGroup, ...],
                 placement: Placement, flavors: tuple[dict[str, str], ...],
                 config_generation: int) -> None:
        self.cluster_queue = cluster_queue
        self.usage = usage
        self.groups = groups
        self.placement = placement
        self.flavors = flavors  # per pod set: resource -> flavor
        # The configuration it was made under: flavors' labels, the queue's quotas and
        # covered resources may differ in another, so it is no assignment to admit on there.
        self.config_generation = config_generation


class WaitingPreemptor:
    __slots__ = ("capacity", "victims", "wl")

    def __init__(self, wl: Workload, victims: tuple[str, ...],
                 capacity: PreemptedCapacity) -> None:
        self.wl = wl
        self.victims = victims  # the victims that still hold capacity
        self.capacity = capacity
