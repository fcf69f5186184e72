"""Kueue's fair-sharing preemption cases (pkg/scheduler/preemption/preemption_fair_test.go,
TestFairPreemptions), fair sharing on.

Cohort ``all`` holds ClusterQueues a, b and c (3 CPUs each; LowerPriority within,
reclaim Any, borrowWithinCohort LowerPriority up to priority -3) and ``preemptible``
(none). The preemptor is submitted and one cycle runs.

Kueue admits every workload of a case at the same instant and, between equal
candidates, preempts the one listed first; here the one listed first is restored last,
so it is the most recently admitted and Phalanx's tie-break picks the same workload.
"""

from __future__ import annotations

from typing import Any

import pytest

from phalanx.spec import QueueConfig

from .cases import Case, R, Wl, cq, flavors, param, run, wl
from .cases import config as make

SOURCE = "pkg/scheduler/preemption/preemption_fair_test.go"
DEFAULT = {"cpu": "default"}


def case(*args: Any, **kwargs: Any) -> Any:
    return param(SOURCE, *args, fair_sharing=True, **kwargs)


def queues() -> QueueConfig:
    policy: dict[str, Any] = {"within": "LowerPriority", "reclaim": "Any",
                              "borrow": ("LowerPriority", -3)}
    return make(*flavors("default"),
                *(cq(name, {"default": {"cpu": 3}}, cohort="all", **policy) for name in "abc"),
                cq("preemptible", {"default": {"cpu": 0}}, cohort="all"))


CONFIG = queues()


def admitted(*specs: tuple[str, float] | tuple[str, float, int]) -> list[Wl]:
    """Admitted workloads given as (name, cpu[, priority]); the queue is the name's first
    letter. Earlier in the list means admitted later (see the module docstring)."""
    out = []
    for index, spec in enumerate(specs):
        name, cpu = spec[0], spec[1]
        priority = spec[2] if len(spec) == 3 else 0
        out.append(wl(name, name[0], priority=priority, at=-index, cpu=cpu).admitted(
            flavors=DEFAULT))
    return out


def units(queue: str, count: int) -> list[tuple[str, float]]:
    return [(f"{queue}{i}", 1) for i in range(1, count + 1)]


def incoming(queue: str, cpu: float) -> Wl:
    return wl(f"{queue}-incoming", queue, at=1, cpu=cpu)


CASES = [
    case("reclaim nominal from user using the most", CONFIG,
         [*admitted(*units("a", 3), *units("b", 5), *units("c", 1)), incoming("c", 1)],
         preempt={"b1": R.IN_COHORT_RECLAMATION}),
    case("can reclaim from queue using less, if taking the latest workload from user using "
         "the most isn't enough", CONFIG,
         [*admitted(("a1", 3), ("a2", 1), ("b1", 2), ("b2", 3)), incoming("c", 3)],
         preempt={"a1": R.IN_COHORT_RECLAMATION}),
    case("reclaim borrowable quota from user using the most", CONFIG,
         [*admitted(*units("a", 3), *units("b", 5), *units("c", 1)), incoming("a", 1)],
         preempt={"b1": R.IN_COHORT_FAIR_SHARING}),
    case("preempt one from each CQ borrowing", CONFIG,
         [*admitted(("a1", 0.5), ("a2", 0.5), ("a3", 3), ("b1", 0.5), ("b2", 0.5), ("b3", 3)),
          incoming("c", 2)],
         preempt={"a1": R.IN_COHORT_RECLAMATION, "b1": R.IN_COHORT_RECLAMATION}),
    case("can't preempt when everyone under nominal", CONFIG,
         [*admitted(*units("a", 3), *units("b", 3), *units("c", 3)), incoming("c", 1)]),
    case("can't preempt when it would switch the imbalance", CONFIG,
         [*admitted(*units("a", 3), *units("b", 5)), incoming("a", 2)]),
    case("can preempt lower priority workloads from same CQ", CONFIG,
         [*admitted(("a1-low", 1, -1), ("a2-low", 1, -1), ("a3", 1), ("a4", 1),
                    *units("b", 5)), incoming("a", 2)],
         preempt={"a1-low": R.IN_CLUSTER_QUEUE, "a2-low": R.IN_CLUSTER_QUEUE}),
    case("can preempt a combination of same CQ and highest user", CONFIG,
         [*admitted(("a-low", 1, -1), ("a2", 1), ("a3", 1), *units("b", 6)), incoming("a", 2)],
         preempt={"a-low": R.IN_CLUSTER_QUEUE, "b1": R.IN_COHORT_FAIR_SHARING}),
    case("preempt huge workload if there is no other option, as long as the target CQ gets a "
         "lower share", CONFIG,
         [*admitted(("b1", 9)), incoming("a", 2)],
         preempt={"b1": R.IN_COHORT_RECLAMATION}),
    case("can't preempt huge workload if the incoming is also huge", CONFIG,
         [*admitted(("a1", 2), ("b1", 7)), incoming("a", 5)]),
    case("can't preempt 2 smaller workloads if the incoming is huge", CONFIG,
         [*admitted(("b1", 2), ("b2", 2), ("b3", 3)), incoming("a", 6)]),
    case("preempt from target and others even if over nominal", CONFIG,
         [*admitted(("a1-low", 2, -1), ("a2-low", 1, -1), ("b1", 3), ("b2", 3)),
          incoming("a", 4)],
         preempt={"a1-low": R.IN_CLUSTER_QUEUE, "b1": R.IN_COHORT_FAIR_SHARING}),
    case("prefer to preempt workloads that don't make the target CQ have the biggest share",
         CONFIG,
         [*admitted(("b1", 2), ("b2", 1), ("b3", 2), ("c1", 1)), incoming("a", 3.5)],
         preempt={"b2": R.IN_COHORT_FAIR_SHARING}),
    case("preempt from different cluster queues if the end result has a smaller max share",
         CONFIG,
         [*admitted(("b1", 2), ("b2", 2.5), ("c1", 2), ("c2", 2.5)), incoming("a", 3.5)],
         preempt={"b1": R.IN_COHORT_FAIR_SHARING, "c1": R.IN_COHORT_FAIR_SHARING}),
    case("scenario above does not flap", CONFIG,
         [*admitted(("a1", 3.5), ("b2", 2.5), ("c2", 2.5)), incoming("b", 2)]),
    case("cannot preempt if it would make the candidate CQ go under nominal after preempting "
         "one element", CONFIG,
         [*admitted(("b1", 3), ("b2", 3), ("c1", 3)), incoming("a", 4)]),
]


@pytest.mark.parametrize("kueue_case", CASES)
def test_fair_preemptions(kueue_case: Case) -> None:
    run(kueue_case)
