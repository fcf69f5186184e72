"""Kueue's scheduler cases with fair sharing off (pkg/scheduler/scheduler_test.go, TestSchedule).

Each case restores Kueue's admitted workloads, submits its pending ones and runs one
cycle (see ``cases.run``). Kueue's namespaces are dropped from workload names.
"""

from __future__ import annotations

from typing import Any

import pytest

from phalanx.spec import ClusterQueue, Cohort, QueueConfig

from .cases import GPU, MAIN, Admit, Case, R, cq, divergence, flavors, param, ps, run, wl
from .cases import cohort as co
from .cases import config as make

SOURCE = "pkg/scheduler/scheduler_test.go"
FLAVORS = flavors("default", "on-demand", "spot", "model-a")


def case(*args: Any, **kwargs: Any) -> Any:
    return param(SOURCE, *args, **kwargs)


def base(*extra: ClusterQueue | Cohort) -> QueueConfig:
    """TestSchedule's ClusterQueues (sales, eng-alpha, eng-beta, lend-a, lend-b) and ``extra``."""
    return make(
        *FLAVORS,
        cq("sales", {"default": {"cpu": (50, 0, None)}}, strategy="StrictFIFO"),
        cq("eng-alpha", {"on-demand": {"cpu": (50, 50, None)}, "spot": {"cpu": (100, 0, None)}},
           cohort="eng", strategy="StrictFIFO"),
        cq("eng-beta", {"on-demand": {"cpu": (50, 10, None)}, "spot": {"cpu": (0, 100, None)},
                        "model-a": {GPU: (20, 0, None)}},
           cohort="eng", strategy="StrictFIFO", reclaim="Any", within="LowerPriority"),
        cq("lend-a", {"default": {"cpu": (3, None, 2)}}, cohort="lend"),
        cq("lend-b", {"default": {"cpu": (2, None, 2)}}, cohort="lend"),
        *extra,
    )


OD, SPOT = {"cpu": "on-demand"}, {"cpu": "spot"}


def hierarchy(lending: int) -> QueueConfig:
    """ROOT > CHILD > {cq-lender (10, lendingLimit), cq-borrower (5, borrowingLimit 10)}."""
    return base(
        co("root"), co("child", parent="root"),
        cq("cq-lender", {"on-demand": {"cpu": (10, None, lending)}}, cohort="child"),
        cq("cq-borrower", {"on-demand": {"cpu": (5, 10, None)}}, cohort="child"),
    )


def three_r_queues() -> QueueConfig:
    """cq1..cq3 in cohort co, each 10 of r1 and r2 (borrowingLimit 10) in flavor default."""
    quotas = {"default": {"r1": (10, 10, None), "r2": (10, 10, None)}}
    return make(*FLAVORS, *(cq(f"cq{i}", quotas, cohort="co", reclaim="Any",
                               within="LowerPriority") for i in (1, 2, 3)))


CASES = [
    case("single clusterQueue full", base(),
         [wl("new", "sales", pod_sets=[ps("one", 11, cpu=1)]),
          wl("assigned", "sales", pod_sets=[ps("one", 40, cpu=1)]).admitted(
              flavors={"cpu": "default"})]),
    case("admit in different cohorts", base(),
         [wl("new-sales", "sales", pod_sets=[ps("one", 1, cpu=1)]),
          wl("new-alpha", "eng-alpha", pod_sets=[ps("one", 51, cpu=1)])],
         [Admit("new-sales", "sales", {"cpu": "default"}),
          Admit("new-alpha", "eng-alpha", OD)]),
    case("admit in same cohort with no borrowing", base(),
         [wl("new-alpha", "eng-alpha", pod_sets=[ps("one", 40, cpu=1)]),
          wl("new-beta", "eng-beta", pod_sets=[ps("one", 40, cpu=1)])],
         [Admit("new-alpha", "eng-alpha", OD), Admit("new-beta", "eng-beta", OD)]),
    case("assign multiple resources and flavors", base(),
         [wl("new", "eng-beta", pod_sets=[ps("one", 10, cpu=6, gpu=1), ps("two", 40, cpu=1)])],
         [Admit("new", "eng-beta", {"one": {"cpu": "on-demand", GPU: "model-a"},
                                    "two": {"cpu": "spot"}})]),
    case("cannot borrow if cohort was assigned and would result in overadmission", base(),
         [wl("new-alpha", "eng-alpha", pod_sets=[ps("one", 45, cpu=1)]),
          wl("new-beta", "eng-beta", pod_sets=[ps("one", 56, cpu=1)])],
         [Admit("new-alpha", "eng-alpha", OD), Admit("new-beta", "eng-beta", SPOT)],
         note="Kueue admits only new-alpha this cycle and new-beta, on spot (borrowing "
              "eng-alpha's unused spot), in the next; Phalanx admits many jobs per "
              "ClusterQueue and cohort per cycle and reaches Kueue's next cycle in this one"),
    case("can borrow if cohort was assigned and will not result in overadmission", base(),
         [wl("new-alpha", "eng-alpha", pod_sets=[ps("one", 45, cpu=1)]),
          wl("new-beta", "eng-beta", pod_sets=[ps("one", 55, cpu=1)])],
         [Admit("new-alpha", "eng-alpha", OD), Admit("new-beta", "eng-beta", OD)]),
    case("can borrow if needs reclaim from cohort in different flavor", base(),
         [wl("can-reclaim", "eng-alpha", cpu=100),
          wl("needs-to-borrow", "eng-beta", cpu=1),
          wl("user-on-demand", "eng-beta", cpu=50).admitted(flavors=OD),
          wl("user-spot", "eng-beta", cpu=1).admitted(flavors=SPOT)],
         [Admit("needs-to-borrow", "eng-beta", OD)]),
    case("workload exceeds lending limit when borrow in cohort", base(),
         [wl("a", "lend-b", cpu=2).admitted(flavors={"cpu": "default"}),
          wl("b", "lend-b", cpu=3)]),
    case("hierarchical cohort respects lending limit when borrowing", hierarchy(3),
         [wl("wl-existing", "cq-borrower", cpu=5).admitted(flavors=OD),
          wl("wl-pending", "cq-borrower", cpu=4)]),
    case("hierarchical cohort allows borrowing up to lending limit", hierarchy(5),
         [wl("wl-existing", "cq-borrower", cpu=5).admitted(flavors=OD),
          wl("wl-borrowing", "cq-borrower", cpu=5)],
         [Admit("wl-borrowing", "cq-borrower", OD)]),
    case("preempt workloads in ClusterQueue and cohort", base(),
         [wl("preemptor", "eng-beta", cpu=20),
          wl("use-all-spot", "eng-alpha", cpu=100).admitted(flavors=SPOT),
          wl("low-1", "eng-beta", priority=-1, cpu=30).admitted(flavors=OD),
          wl("low-2", "eng-beta", priority=-2, cpu=10).admitted(flavors=OD),
          wl("borrower", "eng-alpha", cpu=60).admitted(flavors=OD)],
         preempt={"borrower": R.IN_COHORT_RECLAMATION, "low-2": R.IN_CLUSTER_QUEUE}),
    case("multiple CQs need preemption",
         base(cq("other-alpha", {"on-demand": {"cpu": (50, 50, None)}}, cohort="other"),
              cq("other-beta", {"on-demand": {"cpu": (50, 10, None)}}, cohort="other",
                 reclaim="Any", within="LowerPriority")),
         [wl("preemptor", "other-beta", priority=-1, cpu=1),
          wl("pending", "other-alpha", priority=1, cpu=1),
          wl("use-all", "other-alpha", cpu=100).admitted(flavors=OD)],
         preempt={"use-all": R.IN_COHORT_RECLAMATION}),
    case("cannot borrow resource not listed in clusterQueue", base(),
         [wl("new", "eng-alpha", gpu=1)]),
    case("not enough resources to borrow, fallback to next flavor; WhenCanPreempt: TryNextFlavor",
         base(),
         [wl("new", "eng-alpha", pod_sets=[ps("one", 60, cpu=1)]),
          wl("existing", "eng-beta", pod_sets=[ps("one", 45, cpu=1)]).admitted(flavors=OD)],
         [Admit("new", "eng-alpha", SPOT)]),
    case("no overadmission while borrowing",
         base(cq("eng-gamma", {"on-demand": {"cpu": (50, 10, None)},
                               "spot": {"cpu": (0, 100, None)}},
                 cohort="eng", reclaim="Any", within="LowerPriority")),
         [wl("new", "eng-beta", at=-2, pod_sets=[ps("one", 50, cpu=1)]),
          wl("new-alpha", "eng-alpha", at=-1, pod_sets=[ps("one", 1, cpu=1)]),
          wl("new-gamma", "eng-gamma", at=0, pod_sets=[ps("one", 50, cpu=1)]),
          wl("existing", "eng-gamma",
             pod_sets=[ps("borrow-on-demand", 51, cpu=1), ps("use-all-spot", 100, cpu=1)]
             ).admitted(flavors={"borrow-on-demand": OD, "use-all-spot": SPOT})],
         [Admit("new", "eng-beta", OD), Admit("new-alpha", "eng-alpha", OD)]),
    case("partial admission single variable pod set", base(),
         [wl("new", "sales", pod_sets=[ps("one", 50, 20, cpu=2)])],
         [Admit("new", "sales", {"cpu": "default"}, {"one": 25})]),
    case("partial admission single variable pod set, preempt first", base(),
         [wl("new", "eng-beta", priority=4, pod_sets=[ps("one", 20, 10, gpu=1)]),
          wl("old", "eng-beta", priority=-4, pod_sets=[ps("one", 10, gpu=1)]).admitted(
              flavors={GPU: "model-a"})],
         preempt={"old": R.IN_CLUSTER_QUEUE},
         marks=[divergence(1, "partial admission shrinks to the 10 free GPUs instead of "
                              "preempting old for all 20")]),
    case("partial admission single variable pod set, preempt with partial admission", base(),
         [wl("new", "eng-beta", priority=4, pod_sets=[ps("one", 30, 10, gpu=1)]),
          wl("old", "eng-beta", priority=-4, pod_sets=[ps("one", 10, gpu=1)]).admitted(
              flavors={GPU: "model-a"})],
         preempt={"old": R.IN_CLUSTER_QUEUE},
         marks=[divergence(1, "partial admission shrinks to the 10 free GPUs instead of "
                              "preempting old for 20 of 30")]),
    case("partial admission multiple variable pod sets", base(),
         [wl("new", "sales", pod_sets=[ps("one", 20, cpu=1), ps("two", 30, 10, cpu=1),
                                       ps("three", 15, 5, cpu=1)])],
         [Admit("new", "sales", {"cpu": "default"}, {"one": 20, "two": 20, "three": 10})]),
    case("two workloads can borrow different resources from the same flavor in the same cycle",
         three_r_queues(),
         [wl("wl1", "cq1", priority=-1, r1=16), wl("wl2", "cq2", priority=-2, r2=16)],
         [Admit("wl1", "cq1", {"r1": "default"}), Admit("wl2", "cq2", {"r2": "default"})]),
    case("two workloads can borrow the same resources from the same flavor in the same cycle "
         "if fits in the cohort quota", three_r_queues(),
         [wl("wl1", "cq1", priority=-1, r1=16), wl("wl2", "cq2", priority=-2, r1=14)],
         [Admit("wl1", "cq1", {"r1": "default"}), Admit("wl2", "cq2", {"r1": "default"})]),
    case("only one workload can borrow one resources from the same flavor in the same cycle "
         "if cohort quota cannot fit", three_r_queues(),
         [wl("wl1", "cq1", priority=-1, r1=16), wl("wl2", "cq2", priority=-2, r1=16)],
         [Admit("wl1", "cq1", {"r1": "default"})]),
    case("preemption while borrowing, workload waiting for preemption should not block a "
         "borrowing workload in another CQ",
         make(*FLAVORS,
              cq("cq-shared", {"default": {"cpu": (4, 0, None)}}, cohort="pwb"),
              cq("cq-a", {"default": {"cpu": (0, 3, None)}}, cohort="pwb",
                 reclaim="LowerPriority", borrow=("LowerPriority", None)),
              cq("cq-b", {"default": {"cpu": 0}}, cohort="pwb",
                 reclaim="LowerPriority", borrow=("LowerPriority", None))),
         [wl("a", "cq-a", at=1, cpu=3), wl("b", "cq-b", at=2, cpu=1),
          wl("admitted-a", "cq-a", cpu=2).admitted(flavors={"cpu": "default"})],
         [Admit("b", "cq-b", {"cpu": "default"})]),
]


@pytest.mark.parametrize("kueue_case", CASES)
def test_schedule(kueue_case: Case) -> None:
    run(kueue_case)


def test_main_is_kueues_default_pod_set_name() -> None:
    # The cases lean on it: Kueue's single-pod-set workloads call their pod set "main".
    assert wl("x", "sales", cpu=1).pod_sets[0].name == MAIN
