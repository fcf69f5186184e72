"""Kueue's scheduler cases with fair sharing on (pkg/scheduler/scheduler_fs_test.go,
TestScheduleForFairSharing).

Each case restores Kueue's admitted workloads, submits its pending ones and runs one
cycle with fair sharing on (see ``cases.run``). Kueue's cohort names are lower-cased and
prefixed ``cohort-`` where they would read like a ClusterQueue's.
"""

from __future__ import annotations

from typing import Any

import pytest

from phalanx.spec import ClusterQueue, Cohort, QueueConfig

from .cases import GPU, Admit, Case, R, cq, param, ps, run, wl
from .cases import cohort as co
from .cases import config as make
from .test_scheduler import FLAVORS, base

SOURCE = "pkg/scheduler/scheduler_fs_test.go"
OD, SPOT, DEFAULT = {"cpu": "on-demand"}, {"cpu": "spot"}, {"cpu": "default"}


def case(*args: Any, **kwargs: Any) -> Any:
    return param(SOURCE, *args, fair_sharing=True, **kwargs)


def one(cpu: int) -> list[Any]:
    """Kueue's single pod set "one" with one pod of ``cpu``."""
    return [ps("one", 1, cpu=cpu)]


def tree(*objects: ClusterQueue | Cohort) -> QueueConfig:
    return make(*FLAVORS, *objects)


def zero_quota_pair(weight: float) -> QueueConfig:
    """Cohort A holds 8 CPUs; b and c hold none, reclaim Any, with fair-sharing ``weight``."""
    return tree(
        co("cohort-a", quotas={"on-demand": {"cpu": 8}}),
        *(cq(name, {"on-demand": {"cpu": 0}}, cohort="cohort-a", reclaim="Any", weight=weight)
          for name in ("b", "c")))


def two_empty_queues() -> QueueConfig:
    """Cohort A holds 10 CPUs; b and c hold none."""
    return tree(co("cohort-a", quotas={"on-demand": {"cpu": 10}}),
                cq("b", {"on-demand": {"cpu": 0}}, cohort="cohort-a"),
                cq("c", {"on-demand": {"cpu": 0}}, cohort="cohort-a"))


CASES = [
    case("with fair sharing: schedule workload with lowest share first",
         base(cq("eng-shared", {"on-demand": {"cpu": (10, 0, None)}}, cohort="eng")),
         [wl("all-nominal", "eng-alpha", pod_sets=[ps("one", 50, cpu=1)]).admitted(
             flavors=OD),
          wl("borrowing", "eng-beta", pod_sets=[ps("one", 55, cpu=1)]).admitted(flavors=OD),
          wl("older-new", "eng-beta", at=-60, pod_sets=[ps("one", 1, cpu=1)]),
          wl("new", "eng-alpha", at=0, pod_sets=[ps("one", 5, cpu=1)])],
         [Admit("new", "eng-alpha", OD), Admit("older-new", "eng-beta", SPOT)],
         note="Kueue admits new, then older-new no longer fits the on-demand it was given "
              "and waits for the next cycle, where it borrows eng-alpha's unused spot; "
              "Phalanx admits many jobs per ClusterQueue per cycle and gets there now"),
    case("with fair sharing: nominal-first ordering admits workload fitting within nominal "
         "despite higher CQ DRS",
         base(cq("fs-nom-a", {"on-demand": {"cpu": (50, 0, None)},
                              "spot": {"cpu": (50, 50, None)}}, cohort="fs-nom"),
              cq("fs-nom-b", {"on-demand": {"cpu": (10, 50, None)},
                              "spot": {"cpu": (50, 0, None)}}, cohort="fs-nom")),
         [wl("spot-heavy", "fs-nom-a", pod_sets=[ps("one", 80, cpu=1)]).admitted(
             flavors=SPOT),
          wl("light-usage", "fs-nom-b", pod_sets=[ps("one", 5, cpu=1)]).admitted(flavors=OD),
          wl("borrow-wl", "fs-nom-b", at=-60, pod_sets=[ps("one", 15, cpu=1)]),
          wl("nom-wl", "fs-nom-a", at=0, pod_sets=[ps("one", 45, cpu=1)])],
         [Admit("nom-wl", "fs-nom-a", OD), Admit("borrow-wl", "fs-nom-b", SPOT)],
         note="nom-wl, within fs-nom-a's on-demand quota, goes before borrow-wl, which would "
              "borrow on-demand, though fs-nom-a's share (it borrows spot) is the higher. "
              "Kueue then finds borrow-wl no longer fits the on-demand it was given and "
              "admits it on spot in its next cycle; Phalanx admits many jobs per "
              "ClusterQueue per cycle and gets there now"),
    case("with fair sharing: hierarchical nominal-first prefers non-borrowing subtree",
         tree(co("root"), co("cohort-a", parent="root", quotas={"on-demand": {"cpu": 10}}),
              co("cohort-b", parent="root"),
              cq("cq-a", {"on-demand": {"cpu": 0}}, cohort="cohort-a"),
              cq("cq-b", {"on-demand": {"cpu": 5}}, cohort="cohort-b"),
              cq("cq-c", {"on-demand": {"cpu": 0}}, cohort="cohort-b")),
         [wl("c0", "cq-c", pod_sets=one(10)).admitted(flavors=OD),
          wl("wl-a", "cq-a", pod_sets=one(5)), wl("wl-b", "cq-b", pod_sets=one(5))],
         [Admit("wl-a", "cq-a", OD)]),
    case("with fair sharing: hierarchical nominal-first with deeper nesting",
         tree(co("root"), co("cohort-a", parent="root"),
              co("sub-a", parent="cohort-a", quotas={"on-demand": {"cpu": 10}}),
              co("cohort-b", parent="root"),
              cq("cq-a", {"on-demand": {"cpu": 0}}, cohort="sub-a"),
              cq("cq-b", {"on-demand": {"cpu": 5}}, cohort="cohort-b"),
              cq("cq-c", {"on-demand": {"cpu": 0}}, cohort="cohort-b")),
         [wl("c0", "cq-c", pod_sets=one(10)).admitted(flavors=OD),
          wl("wl-a", "cq-a", pod_sets=one(5)), wl("wl-b", "cq-b", pod_sets=one(5))],
         [Admit("wl-a", "cq-a", OD)]),
    case("with fair sharing: hierarchical nominal-first with mixed CQ and cohort quotas",
         tree(co("root"), co("cohort-a", parent="root", quotas={"on-demand": {"cpu": 10}}),
              co("cohort-b", parent="root", quotas={"on-demand": {"cpu": 10}}),
              cq("cq-a1", {"on-demand": {"cpu": 5}}, cohort="cohort-a"),
              cq("cq-a2", {"on-demand": {"cpu": 3}}, cohort="cohort-a"),
              cq("cq-b", {"on-demand": {"cpu": 5}}, cohort="cohort-b"),
              cq("cq-c", {"on-demand": {"cpu": 3}}, cohort="cohort-b")),
         [wl("a2-admitted", "cq-a2", pod_sets=one(6)).admitted(flavors=OD),
          wl("c-admitted", "cq-c", pod_sets=one(20)).admitted(flavors=OD),
          wl("wl-a1", "cq-a1", pod_sets=one(7)), wl("wl-b", "cq-b", pod_sets=one(4))],
         [Admit("wl-a1", "cq-a1", OD)]),
    case("with fair sharing: hierarchical nominal-first per-flavor ignores cross-flavor "
         "borrowing",
         tree(co("root"), co("cohort-a", parent="root", quotas={"on-demand": {"cpu": 10}}),
              co("cohort-b", parent="root", quotas={"spot": {"cpu": 10}}),
              cq("cq-a", {"on-demand": {"cpu": 0}, "spot": {"cpu": 0}}, cohort="cohort-a"),
              cq("cq-b", {"on-demand": {"cpu": 5}, "spot": {"cpu": 0}}, cohort="cohort-b")),
         [wl("spot-admitted", "cq-a", pod_sets=one(5)).admitted(flavors=SPOT),
          wl("od-admitted", "cq-b", pod_sets=one(8)).admitted(flavors=OD),
          wl("wl-a", "cq-a", pod_sets=one(4)), wl("wl-b", "cq-b", pod_sets=one(4))],
         [Admit("wl-a", "cq-a", OD), Admit("wl-b", "cq-b", SPOT)],
         note="Kueue admits wl-a, then wl-b no longer fits the on-demand it was given and "
              "waits for the next cycle, where it borrows cohort-b's spot; Phalanx admits "
              "many jobs per cycle, so the expected state is Kueue's after its next cycle"),
    case("hierarchical fair sharing schedule workload which wins tournament",
         tree(co("cohort-a", quotas={"on-demand": {"cpu": 200}}),
              co("cohort-b", parent="cohort-a"), co("cohort-c", parent="cohort-a"),
              *(cq(name, {"on-demand": {"cpu": 0}},
                   cohort="cohort-b" if name in "de" else "cohort-c") for name in "defg")),
         [wl("d0", "d", pod_sets=one(10)).admitted(flavors=OD),
          wl("e0", "e", pod_sets=one(20)).admitted(flavors=OD),
          wl("g0", "g", pod_sets=one(100)).admitted(flavors=OD),
          wl("d1", "d", pod_sets=one(70)), wl("e1", "e", pod_sets=one(61)),
          wl("f1", "f", pod_sets=one(1)), wl("g1", "g", pod_sets=one(1))],
         [Admit("d1", "d", OD)]),
    case("fair sharing schedule workload with lowest drf after admission",
         tree(co("cohort-a", quotas={"on-demand": {"cpu": 100}}),
              cq("b", {"on-demand": {"cpu": 0}}, cohort="cohort-a"),
              cq("c", {"on-demand": {"cpu": 0}}, cohort="cohort-a")),
         [wl("b0", "b", pod_sets=one(10)).admitted(flavors=OD),
          wl("b1", "b", pod_sets=one(50)), wl("c1", "c", pod_sets=one(75))],
         [Admit("b1", "b", OD)]),
    case("fair sharing two queues with weight 0 schedules workload which borrows less",
         zero_quota_pair(0),
         [wl("b0", "b", pod_sets=one(4)).admitted(flavors=OD),
          wl("b1", "b", priority=9001, pod_sets=one(4)), wl("c1", "c", pod_sets=one(4))],
         [Admit("c1", "c", OD)]),
    case("fair sharing two queues with high weight schedules workload which borrows less",
         zero_quota_pair(123456789),
         [wl("b0", "b", pod_sets=one(4)).admitted(flavors=OD),
          wl("b1", "b", priority=9001, pod_sets=one(4)), wl("c1", "c", pod_sets=one(4))],
         [Admit("c1", "c", OD)]),
    case("fair sharing schedule singleton cqs and cq without cohort",
         tree(co("cohort-a", quotas={"on-demand": {"cpu": 10}}), co("cohort-b"),
              cq("a", {"on-demand": {"cpu": 0}}, cohort="cohort-a"),
              cq("b", {"on-demand": {"cpu": 10}}, cohort="cohort-b"),
              cq("c", {"on-demand": {"cpu": 10}})),
         [wl("a1", "a", pod_sets=one(10)), wl("b1", "b", pod_sets=one(10)),
          wl("c1", "c", pod_sets=one(10))],
         [Admit("a1", "a", OD), Admit("b1", "b", OD), Admit("c1", "c", OD)]),
    case("fair sharing schedule highest priority first", two_empty_queues(),
         [wl("b1", "b", priority=99, pod_sets=one(10)),
          wl("c1", "c", priority=101, pod_sets=one(10))],
         [Admit("c1", "c", OD)]),
    case("fair sharing schedule earliest timestamp first", two_empty_queues(),
         [wl("b1", "b", priority=101, at=1, pod_sets=one(10)),
          wl("c1", "c", priority=101, at=0, pod_sets=one(10))],
         [Admit("c1", "c", OD)]),
    case("multiple preemptions within cq when fair sharing",
         tree(*(cq(f"other-{name}", {"default": {"cpu": 2}}, cohort="other",
                   within="LowerPriority") for name in ("alpha", "beta", "gamma")),
              cq("resource-bank", {"default": {"cpu": 3}}, cohort="other")),
         [wl("a1", "other-alpha", cpu=3).admitted(flavors=DEFAULT),
          wl("b1", "other-beta", cpu=3).admitted(flavors=DEFAULT),
          wl("c1", "other-gamma", cpu=3).admitted(flavors=DEFAULT),
          *(wl(f"preemptor-{name}", f"other-{name}", priority=100, cpu=3)
            for name in ("alpha", "beta", "gamma"))],
         preempt={"a1": R.IN_CLUSTER_QUEUE, "b1": R.IN_CLUSTER_QUEUE,
                  "c1": R.IN_CLUSTER_QUEUE}),
    case("with fair sharing: prefer reclamation over cq priority based preemption; with "
         "preemption while borrowing",
         tree(cq("other-alpha", {"on-demand": {GPU: 7}, "spot": {GPU: 7}}, cohort="other",
                 within="LowerPriority", reclaim="LowerPriority"),
              cq("other-beta", {"on-demand": {GPU: 3}, "spot": {GPU: 3}}, cohort="other")),
         [wl("a1", "other-alpha", priority=50, gpu=5).admitted(flavors={GPU: "on-demand"}),
          wl("b1", "other-beta", priority=50, gpu=5).admitted(flavors={GPU: "spot"}),
          wl("preemptor", "other-alpha", priority=100, gpu=8)],
         preempt={"b1": R.IN_COHORT_FAIR_SHARING}),
]


@pytest.mark.parametrize("kueue_case", CASES)
def test_schedule_for_fair_sharing(kueue_case: Case) -> None:
    run(kueue_case)
