"""Scheduling policies to compare, each a transformation of the queue configuration.

The simulator never forks the scheduler: a policy rewrites the ClusterQueues
(queueing strategy, borrowing limits, preemption) and says whether fair
sharing is on, and the same core runs the result.

* ``config``: the queues file as written, fair sharing on (the server's default).
* ``phalanx``: Phalanx's defaults for teams sharing a cohort: BestEffortFIFO,
  borrowing without limit (``borrowingLimit`` dropped; ``lendingLimit`` kept, it
  is a guarantee), reclaim preemption (``reclaimWithinCohort: Any``), fair
  sharing, and packing placement (always on).
* ``fifo``: strict FIFO per queue without borrowing: StrictFIFO,
  ``borrowingLimit: 0`` on every quota of a queue in a cohort, no preemption,
  fair sharing off.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from phalanx.errors import SpecError
from phalanx.spec import ClusterQueue, QueueConfig, ResourceGroup


@dataclass(frozen=True, slots=True)
class Policy:
    name: str
    description: str
    fair_sharing: bool
    transform: Callable[[QueueConfig], QueueConfig]

    def apply(self, config: QueueConfig) -> QueueConfig:
        return self.transform(config)


def _rewrite(config: QueueConfig, change: Callable[[ClusterQueue], ClusterQueue]) -> QueueConfig:
    new = config.model_copy(deep=True)
    new.cluster_queues = {name: change(cq) for name, cq in new.cluster_queues.items()}
    new.check()
    return new


def _limits(groups: list[ResourceGroup], borrowing: int | None) -> list[ResourceGroup]:
    out = []
    for group in groups:
        flavors = [
            f.model_copy(update={"resources": [
                q.model_copy(update={"borrowing_limit": borrowing}) for q in f.resources
            ]})
            for f in group.flavors
        ]
        out.append(group.model_copy(update={"flavors": flavors}))
    return out


def _phalanx(cq: ClusterQueue) -> ClusterQueue:
    preemption = cq.preemption.model_copy(update={"reclaim_within_cohort": "Any"})
    return cq.model_copy(update={
        "queueing_strategy": "BestEffortFIFO",
        "preemption": preemption,
        "resource_groups": _limits(cq.resource_groups, None),
    })


def _fifo(cq: ClusterQueue) -> ClusterQueue:
    preemption = cq.preemption.model_copy(update={
        "within_cluster_queue": "Never", "reclaim_within_cohort": "Never",
        "borrow_within_cohort": None,
    })
    groups = _limits(cq.resource_groups, 0) if cq.cohort is not None else cq.resource_groups
    return cq.model_copy(update={
        "queueing_strategy": "StrictFIFO", "preemption": preemption, "resource_groups": groups,
    })


POLICIES: dict[str, Policy] = {
    p.name: p
    for p in (
        Policy("config", "the queues file as written, fair sharing on", True,
               lambda c: c.model_copy(deep=True)),
        Policy("phalanx", "BestEffortFIFO, borrowing, reclaim preemption, fair sharing, "
               "packing", True, lambda c: _rewrite(c, _phalanx)),
        Policy("fifo", "StrictFIFO per queue, no borrowing, no preemption", False,
               lambda c: _rewrite(c, _fifo)),
    )
}


def policy_named(name: str) -> Policy:
    found = POLICIES.get(name)
    if found is None:
        raise SpecError(f"unknown policy {name!r}", field="--policy",
                        fix=f"use one of {', '.join(POLICIES)}")
    return found
