"""Kueue's flavor assignment cases (pkg/scheduler/flavorassigner/flavorassigner_test.go,
TestAssignFlavors).

Kueue's test hands a ClusterQueue, its usage and a workload to the flavor assigner and
checks the flavor and mode (Fit, Preempt, NoFit) per resource. Here the workload is
submitted and one cycle runs: Fit is an admission on the expected flavors, NoFit and
Preempt without candidates leave it pending. The ClusterQueue's usage is a job
restored with that usage (``used``). Where Kueue's test tells its oracle that
preemption would succeed, the job holding the usage is of lower priority in a queue
that preempts LowerPriority, so the cycle really preempts it.

The flavors' node labels and taints are left out: none of the ported cases asks for
them, and quota alone decides.
"""

from __future__ import annotations

from typing import Any

import pytest

from phalanx.spec import QueueConfig

from .cases import GPU, Admit, Case, Wl, cq, flavors, param, ps, run, wl
from .cases import config as make

SOURCE = "pkg/scheduler/flavorassigner/flavorassigner_test.go"
NAMES = ("default", "one", "two", "b-one", "b-two")
TRY_NEXT = {"can_borrow": "TryNextFlavor", "can_preempt": "TryNextFlavor"}
STOP = {"can_borrow": "Borrow", "can_preempt": "Preempt"}  # Kueue's MayStopSearch


def case(*args: Any, **kwargs: Any) -> Any:
    return param(SOURCE, *args, **kwargs)


def queues(main: Any, secondary: Any | None = None) -> QueueConfig:
    """test-clusterqueue (``main``) and, in its cohort, test-secondary-clusterqueue."""
    return make(*flavors(*NAMES), main, *([secondary] if secondary is not None else []))


def main_cq(quotas: dict[str, Any], *, cohort: bool = False, **options: Any) -> Any:
    return cq("test-clusterqueue", quotas, cohort="test-cohort" if cohort else None,
              **options)


def secondary_cq(quotas: dict[str, Any]) -> Any:
    return cq("test-secondary-clusterqueue", quotas, cohort="test-cohort")


def used(queue: str, flavor: str, cpu: int, priority: int = 0) -> Wl:
    """The ClusterQueue's usage: a job holding ``cpu`` CPUs of ``flavor``."""
    return wl(f"usage-{queue[:4]}", queue, priority=priority, at=-1, cpu=cpu).admitted(
        flavors={"cpu": flavor})


def incoming(*pod_sets: Any, priority: int = 0, **requests: Any) -> Wl:
    if pod_sets:
        return wl("in", "test-clusterqueue", priority=priority, at=1, pod_sets=pod_sets)
    return wl("in", "test-clusterqueue", priority=priority, at=1, **requests)


MAIN = "test-clusterqueue"
SECONDARY = "test-secondary-clusterqueue"
# Kueue's cases with one pods quota and a CPU quota per flavor (one, then two).
PODS_AND_CPU = {"pods": 10}


def one_two(one_cpu: Any, two_cpu: Any) -> dict[str, Any]:
    return {"one": {**PODS_AND_CPU, "cpu": one_cpu}, "two": {**PODS_AND_CPU, "cpu": two_cpu}}


CASES = [
    case("single flavor, fits",
         queues(main_cq({"default": {"cpu": 1, "memory": "2Mi"}})),
         [incoming(cpu=1, memory="1Mi")],
         [Admit("in", MAIN, {"cpu": "default", "memory": "default"})]),
    case("single flavor, used resources, doesn't fit",
         queues(main_cq({"default": {"cpu": 4}})),
         [used(MAIN, "default", 3), incoming(cpu=2)]),
    case("multiple resource groups, fits",
         queues(main_cq({"one": {"cpu": 2}, "two": {"cpu": 4},
                         "b-one": {"memory": "1Gi"}, "b-two": {"memory": "5Gi"}})),
         [incoming(cpu=3, memory="10Mi")],
         [Admit("in", MAIN, {"cpu": "two", "memory": "b-one"})]),
    case("multiple resource groups, one could fit with preemption, other doesn't fit",
         queues(main_cq({"one": {"cpu": 3}, "b-one": {"memory": "1Mi"}})),
         [used(MAIN, "one", 1), incoming(cpu=3, memory="10Mi")]),
    case("multiple resource groups with multiple resources, fits",
         queues(main_cq({"one": {"cpu": 2, "memory": "1Gi"}, "two": {"cpu": 4, "memory": "15Mi"},
                         "b-one": {GPU: 4}, "b-two": {GPU: 2}})),
         [incoming(cpu=3, memory="10Mi", gpu=3)],
         [Admit("in", MAIN, {"cpu": "two", "memory": "two", GPU: "b-one"})]),
    case("multiple resources in a group, doesn't fit",
         queues(main_cq({"one": {"cpu": 2, "memory": "1Gi"}, "two": {"cpu": 4, "memory": "5Mi"}})),
         [incoming(cpu=3, memory="10Mi")]),
    case("multiple specs, fit different flavors",
         queues(main_cq({"one": {"cpu": 4}, "two": {"cpu": 10}})),
         [incoming(ps("driver", 1, cpu=5), ps("worker", 1, cpu=3))],
         [Admit("in", MAIN, {"driver": {"cpu": "two"}, "worker": {"cpu": "one"}})]),
    case("multiple specs, fits borrowing",
         queues(main_cq({"default": {"cpu": (2, 98, None), "memory": "2Gi"}}, cohort=True),
                secondary_cq({"default": {"cpu": 198, "memory": "198Gi"}})),
         [incoming(ps("driver", 1, cpu=4, memory="1Gi"), ps("worker", 1, cpu=6, memory="4Gi"))],
         [Admit("in", MAIN, {"cpu": "default", "memory": "default"})]),
    case("not enough space to borrow",
         queues(main_cq({"one": {"cpu": 1}}, cohort=True),
                secondary_cq({"one": {"cpu": (10, None, 0)}})),
         [used(SECONDARY, "one", 9), incoming(cpu=2)]),
    case("resource not listed in clusterQueue",
         queues(main_cq({"one": {"cpu": 4}})),
         [incoming(gpu=2)]),
    case("num pods fit",
         queues(main_cq({"default": {"pods": 3, "cpu": 10}})),
         [incoming(ps("main", 3, cpu=1))],
         [Admit("in", MAIN, {"cpu": "default"})]),
    case("num pods don't fit",
         queues(main_cq({"default": {"pods": 2, "cpu": 10}})),
         [incoming(ps("main", 3, cpu=1))]),
    case("preempt before try next flavor",
         queues(main_cq(one_two(10, 10), within="LowerPriority", **STOP)),
         [used(MAIN, "one", 2, priority=-1), incoming(cpu=9)],
         preempt=["usage-test"],
         note="Kueue's oracle is told preemption would succeed on flavor one; here the job "
              "holding flavor one's usage has a lower priority, and is preempted"),
    case("preempt try next flavor",
         queues(main_cq(one_two(10, 10), within="LowerPriority")),
         [used(MAIN, "one", 2, priority=-1), incoming(cpu=9)],
         [Admit("in", MAIN, {"cpu": "two"})]),
    case("borrow try next flavor, found the first flavor",
         queues(main_cq(one_two((10, 1, None), 1), cohort=True, **TRY_NEXT),
                secondary_cq({"one": {"cpu": 1}})),
         [used(MAIN, "one", 2), incoming(cpu=9)],
         [Admit("in", MAIN, {"cpu": "one"})]),
    case("borrow try next flavor, found the second flavor",
         queues(main_cq(one_two((10, 1, None), 10), cohort=True, **TRY_NEXT),
                secondary_cq({"one": {"cpu": 1}})),
         [used(MAIN, "one", 2), incoming(cpu=9)],
         [Admit("in", MAIN, {"cpu": "two"})]),
    case("borrow before try next flavor",
         queues(main_cq(one_two((10, 1, None), 10), cohort=True),
                secondary_cq({"one": {"cpu": 1}})),
         [used(MAIN, "one", 2), incoming(cpu=9)],
         [Admit("in", MAIN, {"cpu": "one"})]),
    case("lend try next flavor, found the second flavor",
         queues(main_cq(one_two((10, None, 1), (10, None, 0)), cohort=True, **TRY_NEXT),
                secondary_cq({"one": {"cpu": 1}})),
         [used(MAIN, "one", 2), incoming(cpu=9)],
         [Admit("in", MAIN, {"cpu": "two"})]),
    case("lend try next flavor, found the first flavor",
         queues(main_cq(one_two((10, None, 1), (1, None, 0)), cohort=True, **TRY_NEXT),
                secondary_cq({"one": {"cpu": 1}})),
         [used(MAIN, "one", 2), incoming(cpu=9)],
         [Admit("in", MAIN, {"cpu": "one"})]),
    case("when borrowing while preemption is needed, but borrowingLimit exceeds the quota "
         "available in the cohort",
         queues(main_cq({"one": {"cpu": (0, 12, None)}}, cohort=True, reclaim="LowerPriority",
                        borrow=("LowerPriority", None)),
                secondary_cq({"one": {"cpu": 11}})),
         [used(SECONDARY, "one", 10), incoming(cpu=12)]),
]


@pytest.mark.parametrize("kueue_case", CASES)
def test_assign_flavors(kueue_case: Case) -> None:
    run(kueue_case)
