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
from .cases import cohort as co
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


def reclaiming(name: str, quota: float, cohort: str, weight: float = 1.0,
               within: str = "Never", reclaim: str = "Any") -> Any:
    """A ClusterQueue of ``quota`` CPUs that reclaims ``reclaim`` in its cohort."""
    return cq(name, {"default": {"cpu": quota}}, cohort=cohort, within=within,
              reclaim=reclaim, weight=weight)


def lending(name: str, quota: float, cohort: str | None, weight: float = 1.0) -> Any:
    """A ClusterQueue of ``quota`` CPUs that preempts nobody."""
    return cq(name, {"default": {"cpu": quota}}, cohort=cohort, weight=weight)


def units_of(queue: str, count: int, priority: int = 0, by_priority: bool = False
             ) -> list[tuple[str, float, int]]:
    """``count`` one-CPU jobs of ``queue``; with ``by_priority`` the i-th has priority i."""
    return [(f"{queue}{i}", 1, i if by_priority else priority) for i in range(1, count + 1)]


def three_queues(weights: dict[str, float]) -> QueueConfig:
    """Cohort all: a, b and c of 3 CPUs each, LowerPriority within and reclaim Any."""
    return make(*flavors("default"),
                *(reclaiming(n, 3, "all", weight=weights.get(n, 1.0), within="LowerPriority")
                  for n in "abc"))


def left_right() -> QueueConfig:
    """ROOT (5) holds LEFT (5, weight 2) with a (1, weight 2, the preemptor) and b (1), c
    (1), and RIGHT (5) with d (1) and e (1, weight 0.99)."""
    return make(*flavors("default"),
                co("root", quotas={"default": {"cpu": 5}}),
                co("left", parent="root", weight=2, quotas={"default": {"cpu": 5}}),
                co("right", parent="root", quotas={"default": {"cpu": 5}}),
                reclaiming("a", 1, "left", weight=2), lending("b", 1, "left"),
                lending("c", 1, "root"), lending("d", 1, "right"),
                lending("e", 1, "right", weight=0.99))


def a_and_right(right_quota: float, reclaim: str) -> QueueConfig:
    """ROOT holds a (5 CPUs, weight 10) and cohort RIGHT (``right_quota``, weight 0.1) with
    b (none, weight 0.1)."""
    return make(*flavors("default"), co("root"),
                co("right", parent="root", weight=0.1,
                   quotas={"default": {"cpu": right_quota}}),
                reclaiming("a", 5, "root", weight=10, within="LowerPriority", reclaim=reclaim),
                lending("b", 0, "right", weight=0.1))


def deep() -> QueueConfig:
    """ROOT holds three chains A-AA-AAA-a (A weight 1.01), B-BB-BBB-b (B weight 0.99) and
    C-CC-CCC-CCCC, where CCCC holds the one CPU."""
    chains = []
    for letter, weight in (("a", 1.01), ("b", 0.99), ("c", 1.0)):
        parent = "root"
        depth = 4 if letter == "c" else 3
        for level in range(1, depth + 1):
            name = letter * level
            chains.append(co(name, parent=parent, weight=weight if level == 1 else 1.0,
                             quotas={"default": {"cpu": 1}} if name == "cccc" else None))
            parent = name
        if letter != "c":
            chains.append(reclaiming(f"cq-{letter}", 0, parent) if letter == "a"
                          else lending(f"cq-{letter}", 0, parent))
    return make(*flavors("default"), co("root"), *chains)


def zero_weight_pair(a_weight: float, b_weight: float, a_quota: float, b_quota: float,
                     cohort_quota: float | None) -> QueueConfig:
    return make(*flavors("default"),
                co("all", quotas={"default": {"cpu": cohort_quota}} if cohort_quota else None),
                reclaiming("a", a_quota, "all", weight=a_weight),
                lending("b", b_quota, "all", weight=b_weight))


def job(name: str, queue: str, cpu: float, priority: int = 0, at: float = 0) -> Wl:
    return wl(name, queue, priority=priority, at=at, cpu=cpu).admitted(flavors=DEFAULT)


def listed(*specs: tuple[str, str, float, int]) -> list[Wl]:
    """(name, queue, cpu, priority); earlier in the list means admitted later."""
    return [job(n, q, c, p, at=-i) for i, (n, q, c, p) in enumerate(specs)]


def arrives(name: str, queue: str, cpu: float, priority: int = 0) -> Wl:
    return wl(name, queue, priority=priority, at=1, cpu=cpu)


FS = R.IN_COHORT_FAIR_SHARING
MORE_CASES = [
    case("workloads under priority threshold not capriciously preempted", CONFIG,
         [*admitted(*units("a", 3), *units("b", 3)),
          *(job(f"preemptible{i}", "preemptible", 1, -3, at=-10 - i) for i in range(1, 4)),
          wl("a-incoming", "a", at=1, cpu=2)],
         preempt={"preemptible1": R.IN_COHORT_RECLAIM_WHILE_BORROWING,
                  "preemptible2": R.IN_COHORT_RECLAIM_WHILE_BORROWING},
         note="Kueue ignores borrowWithinCohort under fair sharing and preempts nobody; "
              "Phalanx, whose control plane always shares fairly, lets a's threshold (-3) "
              "reclaim the priority -3 jobs while a borrows (docs/kueue-differences.md, 4)"),
    case("CQ with higher weight can preempt more", three_queues({"a": 2}),
         [*admitted(*units("a", 3), *units("b", 6)), incoming("a", 2)],
         preempt={"b1": FS, "b2": FS}),
    case("can preempt anything borrowing from CQ with 0 weight", three_queues({"b": 0}),
         [*admitted(*units("a", 3), *units("b", 6)), incoming("a", 3)],
         preempt={"b1": FS, "b2": FS, "b3": FS}),
    case("can't preempt nominal from CQ with 0 weight",
         make(*flavors("default"), reclaiming("a", 3, "all", within="LowerPriority"),
              reclaiming("b", 3, "all", weight=0, within="LowerPriority")),
         [*admitted(*units("a", 3), *units("b", 3)), incoming("a", 1)]),
    case("can't preempt nominal from Cohort with 0 weight",
         make(*flavors("default"), co("root"),
              co("right-cohort", parent="root", weight=0, quotas={"default": {"cpu": 1}}),
              reclaiming("left-cq", 0, "root"), reclaiming("right-cq", 0, "right-cohort",
                                                           weight=0)),
         [job("right-1", "right-cq", 1), arrives("left-1", "left-cq", 1)]),
    case("can preempt within cluster queue when no cohort",
         make(*flavors("default"), cq("a", {"default": {"cpu": 1}}, within="LowerPriority")),
         [job("a1", "a", 1), arrives("a-incoming", "a", 1, priority=1000)],
         preempt={"a1": R.IN_CLUSTER_QUEUE}),
    #                ROOT(20,5,20)
    #             /       |         \
    #       LEFT(5,5,7)  c(5,1,1)   RIGHT(10,5,7)
    #       /       \               /      \
    #     a(0,1,1)    b(5,1,1)   d(5,1,1)    e(5,1,1)
    case("hierarchical preemption", left_right(),
         [*listed(*((n, q, c, p) for q in "bcde" for n, c, p in units_of(q, 5, by_priority=True))),
          arrives("unit", "a", 5)],
         preempt={"b1": FS, "b2": FS, "c1": FS, "c2": FS, "e1": FS}),
    #             ROOT
    #           /      \
    #       a(3,5,5)   RIGHT(1,1,1)
    #                        \
    #                         b(1,0,0)
    case("borrowing cq in non-borrowing cohort is protected", a_and_right(1, "Any"),
         [*listed(*((n, "a", 1, -1) for n in ("a1", "a2", "a3")), ("b1", "b", 1, -1)),
          arrives("unit", "a", 5)],
         preempt={"a1": R.IN_CLUSTER_QUEUE, "a2": R.IN_CLUSTER_QUEUE,
                  "a3": R.IN_CLUSTER_QUEUE}),
    #             ROOT
    #           /      \
    #       a(3,5,5)   RIGHT(4,3,3)
    #                        \
    #                         b(4,0,0)
    case("forced to preempt within clusterqueue because borrowing workload too important",
         a_and_right(3, "LowerPriority"),
         [*listed(*((n, "a", 1, -1) for n in ("a1", "a2", "a3")), ("b1", "b", 4, 100)),
          arrives("unit", "a", 4)],
         preempt={"a1": R.IN_CLUSTER_QUEUE, "a2": R.IN_CLUSTER_QUEUE,
                  "a3": R.IN_CLUSTER_QUEUE}),
    case("deep preemption", deep(),
         [job("b1", "cq-b", 1), arrives("a1", "cq-a", 1)],
         preempt={"b1": FS}),
    case("cq with zero weight can reclaim nominal quota",
         make(*flavors("default"), reclaiming("a", 1, "root", weight=0),
              lending("b", 0, "root")),
         [job("b1", "b", 1), arrives("a1", "a", 1)],
         preempt={"b1": R.IN_COHORT_RECLAMATION}),
    case("cohort with zero weight can reclaim nominal quota",
         make(*flavors("default"), co("root"),
              co("cohort-a", parent="root", weight=0, quotas={"default": {"cpu": 1}}),
              reclaiming("a", 0, "cohort-a", weight=0), lending("b", 0, "root")),
         [job("b1", "b", 1), arrives("a1", "a", 1)],
         preempt={"b1": FS}),
    case("zero weight borrowing preemptor cannot preempt from a borrowing CQ with a non-zero "
         "weight", zero_weight_pair(0, 1, 1, 1, None),
         [*listed(("a1", "a", 1, 0), ("b1", "b", 1, 0), ("b2", "b", 1, 0)),
          arrives("a-incoming", "a", 1)]),
    case("zero weight borrowing preemptor can preempt from a borrowing CQ which also has zero "
         "weight", zero_weight_pair(0, 0, 1, 0, 3),
         [*listed(("b1", "b", 1, 0), ("b2", "b", 1, 0), ("b3", "b", 1, 0)),
          arrives("a-incoming", "a", 2)],
         preempt={"b1": FS}),
    case("non-zero weight borrowing preemptor preempts from a borrowing CQ",
         zero_weight_pair(1, 1, 1, 0, 3),
         [*listed(("b1", "b", 1, 0), ("b2", "b", 1, 0), ("b3", "b", 1, 0)),
          arrives("a-incoming", "a", 2)],
         preempt={"b1": FS}),
    #   ROOT ── A (weight 0, 1 CPU) ── p (2 CPU, the preemptor)
    #        │                      └─ y (2 CPU)
    #        └─ x (1 CPU)
    case("candidates skipped by the first strategy are still available to the second "
         "strategy",
         make(*flavors("default"), co("root"),
              co("cohort-a", parent="root", weight=0, quotas={"default": {"cpu": 1}}),
              reclaiming("p", 2, "cohort-a"), lending("y", 2, "cohort-a"),
              lending("x", 1, "root")),
         [*listed(("p1", "p", 2, 0), ("y1", "y", 2, 0), ("y2", "y", 2, 0), ("x1", "x", 1, 0),
                  ("x2", "x", 1, 0)),
          arrives("p-incoming", "p", 1)],
         preempt={"y1": FS, "x1": FS}),
]


@pytest.mark.parametrize("kueue_case", CASES + MORE_CASES)
def test_fair_preemptions(kueue_case: Case) -> None:
    run(kueue_case)
