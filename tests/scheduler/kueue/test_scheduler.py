"""Kueue's scheduler cases with fair sharing off (pkg/scheduler/scheduler_test.go, TestSchedule).

Each case restores Kueue's admitted workloads, submits its pending ones and runs one
cycle (see ``cases.run``). Kueue's namespaces are dropped from workload names.
"""

from __future__ import annotations

from typing import Any

import pytest

from phalanx.spec import ClusterQueue, Cohort, QueueConfig

from .cases import GPU, MAIN, Admit, Case, R, cq, flavors, param, ps, run, wl
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


DEFAULT = {"cpu": "default"}
HOLD_NOTE = (
    "Kueue keeps the 1 GPU clusterqueuea has left for a2-pending because clusterqueuea "
    "could not be sure to reclaim it, so b1-pending waits; Phalanx keeps a waiting job's "
    "capacity only from lower-priority borrowers ranked after it, whatever "
    "reclaimWithinCohort says, and b1-pending has a2-pending's priority, so it borrows "
    "(a2-pending could not fit in the cohort's 2 GPUs next to a1-admitted anyway)"
)


def two_default_queues(alpha: int, beta: int, *, borrow: tuple[str, int | None] | None = None,
                       bank: ClusterQueue | None = None) -> QueueConfig:
    """other-alpha and other-beta in cohort other, preempting lower priorities within."""
    return make(*FLAVORS,
                cq("other-alpha", {"default": {"cpu": alpha}}, cohort="other",
                   within="LowerPriority", borrow=borrow),
                cq("other-beta", {"default": {"cpu": beta}}, cohort="other",
                   within="LowerPriority", borrow=borrow),
                *([bank] if bank else []))


def gpu_pair(*, beta_preempts: bool = False) -> QueueConfig:
    """other-alpha with 10 GPUs in each of on-demand and spot; other-beta with none."""
    policy = {"within": "LowerPriority", "reclaim": "LowerPriority"}
    return make(*FLAVORS,
                cq("other-alpha", {"on-demand": {GPU: 10}, "spot": {GPU: 10}}, cohort="other",
                   **policy),
                cq("other-beta", {"on-demand": {GPU: 0}, "spot": {GPU: 0}}, cohort="other",
                   **(policy if beta_preempts else {})))


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
         preempt={"old": R.IN_CLUSTER_QUEUE}),
    case("partial admission single variable pod set, preempt with partial admission", base(),
         [wl("new", "eng-beta", priority=4, pod_sets=[ps("one", 30, 10, gpu=1)]),
          wl("old", "eng-beta", priority=-4, pod_sets=[ps("one", 10, gpu=1)]).admitted(
              flavors={GPU: "model-a"})],
         preempt={"old": R.IN_CLUSTER_QUEUE}),
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
    case("minimal preemptions when target queue is exhausted",
         make(*FLAVORS,
              cq("other-alpha", {"on-demand": {"cpu": 2}}, cohort="other", reclaim="Any",
                 within="LowerPriority"),
              cq("other-beta", {"on-demand": {"cpu": 2}}, cohort="other"),
              cq("other-gamma", {"on-demand": {"cpu": 2}}, cohort="other")),
         [wl("a1", "other-alpha", priority=-2, cpu=1).admitted(flavors=OD),
          wl("a2", "other-alpha", priority=-2, cpu=1).admitted(flavors=OD),
          wl("a3", "other-alpha", priority=-1, cpu=1).admitted(flavors=OD),
          wl("b1", "other-beta", cpu=1).admitted(flavors=OD),
          wl("b2", "other-beta", cpu=1).admitted(flavors=OD),
          wl("b3", "other-beta", cpu=1).admitted(flavors=OD),
          wl("incoming", "other-alpha", cpu=2)],
         preempt={"a1": R.IN_CLUSTER_QUEUE, "a2": R.IN_CLUSTER_QUEUE}),
    case("A workload is only eligible to do preemptions if it fits fully within nominal quota",
         make(*FLAVORS,
              cq("other-alpha", {"on-demand": {"cpu": 2}}, cohort="other", reclaim="Any",
                 within="LowerPriority"),
              cq("other-beta", {"on-demand": {"cpu": 2}}, cohort="other")),
         [wl("a1", "other-alpha", priority=-1, cpu=1).admitted(flavors=OD),
          wl("b1", "other-beta", priority=-1, cpu=1).admitted(flavors=OD),
          wl("incoming", "other-alpha", priority=1, cpu=3)]),
    case("multiple preemptions without borrowing", two_default_queues(2, 2),
         [wl("a1", "other-alpha", cpu=2).admitted(flavors=DEFAULT),
          wl("b1", "other-beta", cpu=2).admitted(flavors=DEFAULT),
          wl("preemptor-alpha", "other-alpha", priority=100, cpu=2),
          wl("preemptor-beta", "other-beta", priority=100, cpu=2)],
         preempt={"a1": R.IN_CLUSTER_QUEUE, "b1": R.IN_CLUSTER_QUEUE}),
    case("multiple preemptions preemption possible after earlier workload fits",
         two_default_queues(1, 2),
         [wl("b1", "other-beta", cpu=2).admitted(flavors=DEFAULT),
          wl("fit", "other-alpha", priority=100, cpu=1),
          wl("preemptor", "other-beta", priority=99, cpu=2)],
         [Admit("fit", "other-alpha", DEFAULT)],
         preempt={"b1": R.IN_CLUSTER_QUEUE}),
    case("multiple preemptions skip preemption when shared limited resource",
         two_default_queues(2, 2, borrow=("LowerPriority", None),
                            bank=cq("resource-bank", {"default": {"cpu": 1}}, cohort="other")),
         [wl("a1", "other-alpha", cpu=2).admitted(flavors=DEFAULT),
          wl("b1", "other-beta", cpu=2).admitted(flavors=DEFAULT),
          wl("preemptor", "other-alpha", priority=100, cpu=3),
          wl("pretending-preemptor", "other-beta", priority=99, cpu=3)],
         preempt={"a1": R.IN_CLUSTER_QUEUE}),
    case("not enough resources", base(),
         [wl("new", "sales", pod_sets=[ps("one", 1, cpu=100)])]),
    case("prefer reclamation over cq priority based preemption", gpu_pair(beta_preempts=True),
         [wl("a1", "other-alpha", priority=50, gpu=5).admitted(flavors={GPU: "on-demand"}),
          wl("b1", "other-beta", priority=50, gpu=5).admitted(flavors={GPU: "spot"}),
          wl("preemptor", "other-alpha", priority=100, gpu=6)],
         preempt={"b1": R.IN_COHORT_RECLAMATION}),
    case("prefer first preemption flavor when second flavor requires both reclaim and cq "
         "priority preemption", gpu_pair(),
         [wl("a1", "other-alpha", priority=50, gpu=5).admitted(flavors={GPU: "on-demand"}),
          wl("a2", "other-alpha", priority=50, gpu=5).admitted(flavors={GPU: "spot"}),
          wl("b1", "other-beta", priority=50, gpu=5).admitted(flavors={GPU: "spot"}),
          wl("preemptor", "other-alpha", priority=100, gpu=6)],
         preempt={"a1": R.IN_CLUSTER_QUEUE}),
    case("prefer first preemption flavor when second flavor also requires cq preemption",
         gpu_pair(),
         [wl("a1", "other-alpha", priority=50, gpu=6).admitted(flavors={GPU: "on-demand"}),
          wl("a2", "other-alpha", priority=50, gpu=5).admitted(flavors={GPU: "spot"}),
          # b1 is too high a priority for the preemptor.
          wl("b1", "other-beta", priority=9001, gpu=5).admitted(flavors={GPU: "spot"}),
          wl("preemptor", "other-alpha", priority=100, gpu=5)],
         preempt={"a1": R.IN_CLUSTER_QUEUE}),
    case("workload requiring reclaimation prioritized over wl in another full cq",
         make(*FLAVORS,
              cq("cq1", {"on-demand": {GPU: 10}}, cohort="other"),
              cq("cq2", {"on-demand": {GPU: 10}}, cohort="other", reclaim="Any"),
              cq("cq3", {"on-demand": {GPU: 0}}, cohort="other")),
         [wl("admitted-workload-1", "cq1", gpu=5).admitted(flavors={GPU: "on-demand"}),
          wl("wl1", "cq1", at=0, gpu=10),
          wl("wl2", "cq2", at=1, gpu=10),
          wl("admitted-workload-2", "cq3", gpu=5).admitted(flavors={GPU: "on-demand"}),
          wl("admitted-workload-3", "cq3", priority=1, gpu=5).admitted(
              flavors={GPU: "on-demand"})],
         preempt={"admitted-workload-2": R.IN_COHORT_RECLAMATION}),
    *(case(f"capacity {verb} when lending clusterqueue {why} (ReclaimWithinCohort={reclaim})",
           make(*FLAVORS,
                cq("clusterqueuea", {"on-demand": {GPU: 2}}, cohort="root", reclaim=reclaim),
                cq("clusterqueueb", {"on-demand": {GPU: 0}}, cohort="root")),
           [wl("a1-admitted", "clusterqueuea", gpu=1).admitted(flavors={GPU: "on-demand"}),
            wl("a2-pending", "clusterqueuea", gpu=2),
            wl("b1-pending", "clusterqueueb", gpu=1)],
           # Phalanx admits b1-pending whatever reclaimWithinCohort says.
           [Admit("b1-pending", "clusterqueueb", {GPU: "on-demand"})],
           note="" if reclaim == "Any" else HOLD_NOTE)
      for verb, why, reclaim in [
          ("not blocked", "can reclaim", "Any"),
          ("blocked", "not guaranteed to reclaim", "LowerPriority"),
          ("blocked", "not guaranteed to reclaim", "Never")]),
    case("in a hierarchical cohort, workload borrowing less is scheduled first",
         make(*FLAVORS, co("root"),
              co("guaranteed", parent="root", quotas={"default": {"cpu": 4}}),
              cq("guaranteed", {"default": {"cpu": 0}}, cohort="guaranteed"),
              cq("best-effort", {"default": {"cpu": 0}}, cohort="root")),
         [wl("guaranteed", "guaranteed", pod_sets=[ps("one", 1, cpu=4)]),
          wl("best-effort", "best-effort", priority=3, pod_sets=[ps("one", 1, cpu=4)])],
         [Admit("guaranteed", "guaranteed", {"cpu": "default"})]),
    case("don't assign flavor if there are no candidates for preemption",
         make(*FLAVORS,
              cq("cq1", {"on-demand": {"cpu": (0, 1, None)}, "spot": {"cpu": (0, 1, None)}},
                 cohort="cohort", within="LowerPriority", reclaim="Any",
                 borrow=("LowerPriority", None), can_borrow="Borrow", can_preempt="Preempt"),
              cq("cq2", {"on-demand": {"cpu": 1}, "spot": {"cpu": 1}}, cohort="cohort")),
         [wl("admitted", "cq2", cpu=1).admitted(flavors=OD),
          wl("new", "cq1", priority=100, cpu=1)],
         [Admit("new", "cq1", SPOT)]),
    case("use second flavor when the first has no preemption candidates; "
         "WhenCanPreempt: MayStopSearch",
         base(cq("other-alpha", {"on-demand": {"cpu": (50, 50, None)},
                                 "spot": {"cpu": (100, 0, None)}},
                 within="LowerPriority", can_preempt="Preempt")),
         [wl("admitted", "other-alpha", cpu=50).admitted(flavors=OD),
          wl("new", "other-alpha", cpu=20)],
         [Admit("new", "other-alpha", SPOT)]),
    case("admit to second flavor when first needs preemption; WhenCanPreempt: TryNextFlavor",
         base(cq("preempt-attempts-cq", {"on-demand": {"cpu": 1}, "spot": {"cpu": 1}},
                 within="LowerPriority", can_preempt="TryNextFlavor")),
         [wl("blocker", "preempt-attempts-cq", priority=50, cpu=1).admitted(flavors=OD),
          wl("test-wl", "preempt-attempts-cq", priority=100, cpu=1)],
         [Admit("test-wl", "preempt-attempts-cq", SPOT)]),
    case("admit workload with zero-quantity request for resource not in ClusterQueue", base(),
         [wl("zero-resource-wl", "sales", cpu=1, gpu=0)],
         [Admit("zero-resource-wl", "sales", DEFAULT)]),
    case("preempt when workload requests zero of a resource not defined in ClusterQueue",
         base(cq("preempt-zero-gpu-cq", {"default": {"cpu": 4}}, within="LowerPriority")),
         [wl("preemptor", "preempt-zero-gpu-cq", cpu=2, gpu=0),
          wl("low-priority", "preempt-zero-gpu-cq", priority=-1, cpu=4).admitted(
              flavors=DEFAULT)],
         preempt={"low-priority": R.IN_CLUSTER_QUEUE}),
]


@pytest.mark.parametrize("kueue_case", CASES)
def test_schedule(kueue_case: Case) -> None:
    run(kueue_case)


def test_main_is_kueues_default_pod_set_name() -> None:
    # The cases lean on it: Kueue's single-pod-set workloads call their pod set "main".
    assert wl("x", "sales", cpu=1).pod_sets[0].name == MAIN
