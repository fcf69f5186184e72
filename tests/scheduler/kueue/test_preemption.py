"""Kueue's classic preemption cases (pkg/scheduler/preemption/preemption_test.go,
TestPreemption), fair sharing off.

Kueue's test hands the preemptor a flavor assignment and asks for targets; here the
preemptor ("in") is submitted and one cycle runs, so the scheduler chooses the flavor
itself. Cases whose forced assignment a real cycle would not make (the preemptor fits by
borrowing, or another flavor is free) are left out. A preemptor waits for its victims,
so none is admitted in the cycle.
"""

from __future__ import annotations

from typing import Any

import pytest

from phalanx.spec import QueueConfig

from .cases import Case, R, cq, flavors, param, run, wl
from .cases import config as make

SOURCE = "pkg/scheduler/preemption/preemption_test.go"
DEFAULT = {"cpu": "default", "memory": "default"}


def case(*args: Any, **kwargs: Any) -> Any:
    return param(SOURCE, *args, **kwargs)


def queues() -> QueueConfig:
    """TestPreemption's default ClusterQueues that the ported cases use."""
    shared = {"default": {"cpu": (6, 6, None), "memory": ("3Gi", "3Gi", None)}}
    unlimited = {"default": {"cpu": 6, "memory": "3Gi"}}
    return make(
        *flavors("default", "alpha", "beta"),
        cq("standalone", {"default": {"cpu": 6}, "alpha": {"memory": "3Gi"},
                          "beta": {"memory": "3Gi"}}, within="LowerPriority"),
        cq("c1", shared, cohort="cohort", within="LowerPriority", reclaim="LowerPriority"),
        cq("c2", shared, cohort="cohort", within="Never", reclaim="Any"),
        cq("d1", unlimited, cohort="cohort-no-limits", within="LowerPriority",
           reclaim="LowerPriority"),
        cq("d2", unlimited, cohort="cohort-no-limits", within="Never", reclaim="Any"),
        cq("l1", {"default": {"cpu": (6, 12, None), "memory": ("3Gi", "6Gi", None)}},
           cohort="legion", within="LowerPriority", reclaim="LowerPriority"),
    )


CONFIG = queues()


def on(name: str, queue: str, cpu: int, priority: int = 0, **requests: Any) -> Any:
    """An admitted workload of ``queue`` with ``cpu`` (and ``requests``) in flavor default."""
    return wl(name, queue, priority=priority, cpu=cpu, **requests).admitted(flavors=DEFAULT)


def standalone_three(low: int, mid: int, high: int) -> list[Any]:
    return [on("low", "standalone", low, -1), on("mid", "standalone", mid, 0),
            on("high", "standalone", high, 1)]


CASES = [
    case("preempt lowest priority", CONFIG,
         [*standalone_three(2, 2, 2), wl("in", "standalone", priority=1, cpu=2)],
         preempt={"low": R.IN_CLUSTER_QUEUE}),
    case("preempt multiple", CONFIG,
         [*standalone_three(2, 2, 2), wl("in", "standalone", priority=1, cpu=3)],
         preempt={"low": R.IN_CLUSTER_QUEUE, "mid": R.IN_CLUSTER_QUEUE}),
    case("no preemption for low priority", CONFIG,
         [on("low", "standalone", 3, -1), on("mid", "standalone", 3),
          wl("in", "standalone", priority=-1, cpu=1)]),
    case("not enough low priority workloads", CONFIG,
         [on("low", "standalone", 3, -1), on("mid", "standalone", 3),
          wl("in", "standalone", cpu=4)]),
    case("some free quota, preempt low priority", CONFIG,
         [*standalone_three(1, 1, 3), wl("in", "standalone", priority=1, cpu=2)],
         preempt={"low": R.IN_CLUSTER_QUEUE}),
    case("minimal set excludes low priority", CONFIG,
         [*standalone_three(1, 2, 3), wl("in", "standalone", priority=1, cpu=2)],
         preempt={"mid": R.IN_CLUSTER_QUEUE}),
    case("reclaim quota from borrower", CONFIG,
         [on("c1-low", "c1", 3, -1), on("c2-mid", "c2", 3), on("c2-high", "c2", 6, 1),
          wl("in", "c1", priority=1, cpu=3)],
         preempt={"c2-mid": R.IN_COHORT_RECLAMATION}),
    case("reclaim quota if workload requests 0 resources for a resource at nominal quota",
         CONFIG,
         [on("c1-low", "c1", 3, -1, memory="3Gi"), on("c2-mid", "c2", 3),
          on("c2-high", "c2", 6, 1), wl("in", "c1", priority=1, cpu=3, memory=0)],
         preempt={"c2-mid": R.IN_COHORT_RECLAMATION}),
    case("not enough workloads borrowing", CONFIG,
         [on("c1-high", "c1", 4, 1), on("c2-low-1", "c2", 4, -1), on("c2-low-2", "c2", 4, -1),
          wl("in", "c1", priority=1, cpu=4)]),
    case("preempting locally and borrowing other resources in cohort, without cohort "
         "candidates", CONFIG,
         [on("c1-low", "c1", 4, -1), on("c2-low-1", "c2", 4, -1), on("c2-high-2", "c2", 4, 1),
          wl("in", "c1", priority=1, cpu=4, memory="5Gi")],
         preempt={"c1-low": R.IN_CLUSTER_QUEUE}),
    case("preempting locally and borrowing same resource in cohort", CONFIG,
         [on("c1-med", "c1", 4), on("c1-low", "c1", 4, -1), on("c2-low-1", "c2", 4, -1),
          wl("in", "c1", priority=1, cpu=4)],
         preempt={"c1-low": R.IN_CLUSTER_QUEUE}),
    case("preempting locally and borrowing same resource in cohort; no borrowing limit in "
         "the cohort", CONFIG,
         [on("d1-med", "d1", 4), on("d1-low", "d1", 4, -1), on("d2-low-1", "d2", 4, -1),
          wl("in", "d1", priority=1, cpu=4)],
         preempt={"d1-low": R.IN_CLUSTER_QUEUE}),
    case("preempting locally and borrowing other resources in cohort, with cohort candidates",
         CONFIG,
         [on("c1-med", "c1", 4), on("c2-low-1", "c2", 5, -1), on("c2-low-2", "c2", 1, -1),
          on("c2-low-3", "c2", 1, -1), wl("in", "c1", priority=1, cpu=2, memory="5Gi")],
         preempt={"c1-med": R.IN_CLUSTER_QUEUE}),
    case("preempting locally and not borrowing same resource in 1-queue cohort", CONFIG,
         [on("l1-med", "l1", 4), on("l1-low", "l1", 2, -1), wl("in", "l1", priority=1, cpu=4)],
         preempt={"l1-med": R.IN_CLUSTER_QUEUE}),
    case("do not reclaim borrowed quota from same priority for "
         "withinCohort=ReclaimFromLowerPriority", CONFIG,
         [on("c1", "c1", 2), on("c2-1", "c2", 4), on("c2-2", "c2", 4), wl("in", "c1", cpu=4)]),
    case("reclaim borrowed quota from same priority for withinCohort=ReclaimFromAny", CONFIG,
         [on("c1-1", "c1", 4), on("c1-2", "c1", 4, 1), on("c2", "c2", 2),
          wl("in", "c2", cpu=4)],
         preempt={"c1-1": R.IN_COHORT_RECLAMATION}),
    case("preempt from all ClusterQueues in cohort", CONFIG,
         [on("c1-low", "c1", 3, -1), on("c1-mid", "c1", 2), on("c2-low", "c2", 3, -1),
          on("c2-mid", "c2", 4), wl("in", "c1", cpu=4)],
         preempt={"c1-low": R.IN_CLUSTER_QUEUE, "c2-low": R.IN_COHORT_RECLAMATION}),
]


@pytest.mark.parametrize("kueue_case", CASES)
def test_preemption(kueue_case: Case) -> None:
    run(kueue_case)
