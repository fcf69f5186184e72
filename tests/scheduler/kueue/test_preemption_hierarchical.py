"""Kueue's preemption cases in hierarchical cohorts
(pkg/scheduler/preemption/preemption_hierarchical_test.go, TestHierarchicalPreemptions),
fair sharing off.

Kueue's test hands the preemptor ("in") a flavor assignment and asks for targets; here
it is submitted and one cycle runs. There is one flavor, ``default``. Every ClusterQueue
preempts LowerPriority within itself and reclaims Any in the cohort unless a case says
otherwise. The trees are drawn as Kueue's comments draw them, with subtree quotas in
parentheses. Kueue admits every workload of a case at the same instant; the order in
which they are listed here is the order of admission, so the last listed is the most
recently admitted. Names are Kueue's with "-" for "_".

Left out: "prefer to preempt evicted workloads" (its candidate is evicted but still
admitted, a state a restored job cannot be in here).
"""

from __future__ import annotations

from typing import Any

import pytest

from phalanx.spec import QueueConfig

from .cases import Case, R, Wl, cq, flavors, param, run, wl
from .cases import cohort as co
from .cases import config as make

SOURCE = "pkg/scheduler/preemption/preemption_hierarchical_test.go"
DEFAULT = {"cpu": "default", "memory": "default"}
NONE = {"default": {"cpu": 0}}


def case(*args: Any, **kwargs: Any) -> Any:
    return param(SOURCE, *args, **kwargs)


def q(name: str, cohort: str, quotas: dict[str, Any] | None = None, **policy: Any) -> Any:
    """A ClusterQueue preempting LowerPriority within itself and reclaiming Any."""
    return cq(name, {"default": quotas} if quotas else NONE, cohort=cohort,
              within=policy.pop("within", "LowerPriority"),
              reclaim=policy.pop("reclaim", "Any"), **policy)


BORROW_BELOW_0 = ("LowerPriority", 0)


def tree(*objects: Any) -> QueueConfig:
    return make(*flavors("default"), *objects)


def on(name: str, queue: str, cpu: float, priority: int = 0, at: float = 0,
       **requests: Any) -> Wl:
    return wl(name, queue, priority=priority, at=at, cpu=cpu, **requests).admitted(
        flavors=DEFAULT)


def admitted(*specs: tuple[Any, ...]) -> list[Wl]:
    """(name, queue, cpu, priority[, requests]) in order of admission."""
    return [on(s[0], s[1], s[2], s[3], at=-len(specs) + i, **(s[4] if len(s) > 4 else {}))
            for i, s in enumerate(specs)]


def incoming(queue: str, cpu: float, priority: int = 0, **requests: Any) -> Wl:
    return wl("in", queue, priority=priority, at=1, cpu=cpu, **requests)


def r_c(c_cpu: float, *queues: Any, r_quotas: dict[str, Any] | None = None,
        c_quotas: dict[str, Any] | None = None) -> QueueConfig:
    """Root r (``r_quotas``) with cohort c (``c_cpu`` CPUs) below it."""
    return tree(co("r", quotas={"default": r_quotas} if r_quotas else None),
                co("c", parent="r", quotas={"default": c_quotas or {"cpu": c_cpu}}),
                *queues)


CASES = [
    #            r
    #      /      |
    #   c(2) q_borrowing(0)
    #  /
    # q
    case("preempt with hierarchical advantage",
         r_c(2, q("q", "c"), q("q-borrowing", "r")),
         [*admitted(("admitted2", "q-borrowing", 2, 0)), incoming("q", 2)],
         preempt={"admitted2": R.IN_COHORT_RECLAMATION}),
    #             r
    #      /      |         \
    #   c(2) q_borrowing(0)  q_nominal(2)
    #  /
    # q
    case("avoid queues within nominal quota",
         r_c(2, q("q-nominal", "r", {"cpu": 2}), q("q", "c"), q("q-borrowing", "r")),
         [*admitted(("admitted1", "q-nominal", 2, -10), ("admitted2", "q-borrowing", 2, 0)),
          incoming("q", 2)],
         preempt={"admitted2": R.IN_COHORT_RECLAMATION}),
    case("preempt multiple with hierarchical advantage",
         r_c(2, q("q", "c"), q("q-borrowing", "r")),
         [*admitted(("admitted1", "q-borrowing", 1, 1), ("admitted2", "q-borrowing", 1, 2)),
          incoming("q", 2)],
         preempt={"admitted1": R.IN_COHORT_RECLAMATION,
                  "admitted2": R.IN_COHORT_RECLAMATION}),
    #        r
    #      /
    #   c(3)
    #  /   \
    # q(0) q_same_cohort(0)
    case("preempt in cohort and own CQ",
         r_c(3, q("q", "c", borrow=BORROW_BELOW_0), q("q-same-cohort", "c")),
         [*admitted(("admitted-not-preemptible", "q-same-cohort", 1, 1),
                    ("admitted-preemptible", "q-same-cohort", 1, 0),
                    ("admitted-own-queue", "q", 1, -1)),
          incoming("q", 2, priority=1)],
         preempt={"admitted-own-queue": R.IN_CLUSTER_QUEUE,
                  "admitted-preemptible": R.IN_COHORT_RECLAIM_WHILE_BORROWING}),
    case("prefer to preempt hierarchical candidate",
         r_c(2, q("q", "c"), q("q-borrowing", "r")),
         [*admitted(("admitted-borrowing", "q-borrowing", 1, 1),
                    ("admitted-same-queue", "q", 1, -2)),
          incoming("q", 1)],
         preempt={"admitted-borrowing": R.IN_COHORT_RECLAMATION}),
    #             r
    #      /            \
    #   c(2)         q_nominal(2)
    #  /    \
    # q(0) q_same_cohort(0)
    case("forced to preempt priority candidate",
         r_c(2, q("q", "c", borrow=BORROW_BELOW_0), q("q-nominal", "r", {"cpu": 2}),
             q("q-same-cohort", "c")),
         [*admitted(("admitted-nominal", "q-nominal", 2, -10),
                    ("admitted-same-cohort", "q-same-cohort", 2, -1)),
          incoming("q", 2)],
         preempt={"admitted-same-cohort": R.IN_COHORT_RECLAIM_WHILE_BORROWING}),
    #             r
    #      /            \
    #   c(2)         q_borrowing(0)
    #  /    \
    # q(4) q_same_cohort(0)
    case("incoming workload fits in CQ nominal quota",
         r_c(2, q("q", "c", {"cpu": 4}), q("q-borrowing", "r"), q("q-same-cohort", "c")),
         [*admitted(("admitted-borrowing", "q-borrowing", 3, 10),
                    ("admitted-same-cohort", "q-same-cohort", 3, 10)),
          incoming("q", 4)],
         preempt={"admitted-borrowing": R.IN_COHORT_RECLAMATION,
                  "admitted-same-cohort": R.IN_COHORT_RECLAMATION}),
    #             r(1)
    #      /            \
    #   c(4)         q_borrowing(0)
    #  /    \
    # q(0) q_same_cohort(0)
    case("preempt hierarchical and priority candidates",
         r_c(4, q("q", "c", reclaim="LowerPriority", borrow=BORROW_BELOW_0),
             q("q-borrowing", "r"), q("q-same-cohort", "c"), r_quotas={"cpu": 1}),
         [*admitted(("admitted-borrowing", "q-borrowing", 2, -1),
                    ("admitted-same-cohort-preemptible", "q-same-cohort", 1, -1),
                    ("admitted-borrowing-not-preemptible", "q-borrowing", 2, 1)),
          incoming("q", 3)],
         preempt={"admitted-borrowing": R.IN_COHORT_RECLAMATION,
                  "admitted-same-cohort-preemptible": R.IN_COHORT_RECLAIM_WHILE_BORROWING}),
    case("preempt hierarchical candidates and inside CQ",
         r_c(4, q("q", "c", reclaim="LowerPriority", borrow=BORROW_BELOW_0),
             q("q-borrowing", "r"), q("q-same-cohort", "c"), r_quotas={"cpu": 1}),
         [*admitted(("admitted-borrowing", "q-borrowing", 2, -1),
                    ("admitted-same-queue-preemptible", "q", 1, -1),
                    ("admitted-borrowing-not-preemptible", "q-borrowing", 2, 1)),
          incoming("q", 3)],
         preempt={"admitted-borrowing": R.IN_COHORT_RECLAMATION,
                  "admitted-same-queue-preemptible": R.IN_CLUSTER_QUEUE}),
    #             r
    #      /      |         \
    #   c(3) q_borrowing(0)  q_nominal(2)
    #  /
    # q
    case("reclaim nominal quota from lowest priority workload, excluding non-borrowing",
         r_c(3, q("q", "c"), q("q-borrowing", "r"), q("q-nominal", "r", {"cpu": 2})),
         [*admitted(("admitted-borrowing-prio-8", "q-borrowing", 1, 8),
                    ("admitted-borrowing-prio-9", "q-borrowing", 1, 9),
                    ("admitted-borrowing-prio-10", "q-borrowing", 1, 9),
                    ("admitted-nominal", "q-nominal", 2, -2)),
          incoming("q", 1)],
         preempt={"admitted-borrowing-prio-8": R.IN_COHORT_RECLAMATION}),
    #             r
    #      /            \
    #   c(2)          c_other(2)
    #  /    \             \
    # q(0) q_same_cohort(0) q_other(0)
    case("infeasible preemption all available workloads in pruned subtrees",
         tree(co("r"), co("c", parent="r", quotas={"default": {"cpu": 2}}),
              co("c-other", parent="r", quotas={"default": {"cpu": 2}}),
              q("q-other", "c-other"), q("q", "c"), q("q-same-cohort", "c")),
         [*admitted(("admitted-other-1", "q-other", 1, -10),
                    ("admitted-other-2", "q-other", 1, -10),
                    ("admitted-same-cohort", "q-same-cohort", 2, 0)),
          incoming("q", 2)]),
    #             r(3 CPU)
    #      /            \
    #   c(4 CPU, 4Gi)  q_borrowing(0)
    #  /    \
    # q(0) q_same_cohort(0)
    case("hiearchical preemption with multiple resources",
         tree(co("r", quotas={"default": {"cpu": 3, "memory": 0}}),
              co("c", parent="r", quotas={"default": {"cpu": 4, "memory": "4Gi"}}),
              *(cq(name, {"default": {"cpu": 0, "memory": 0}}, cohort=parent,
                   within="LowerPriority", reclaim="Any")
                for name, parent in (("q", "c"), ("q-borrowing", "r"), ("q-same-cohort", "c")))),
         [*admitted(("admitted-borrowing", "q-borrowing", 3, 0, {"memory": "1Gi"}),
                    ("admitted-same-cohort", "q-same-cohort", 1, -2, {"memory": "3Gi"})),
          incoming("q", 2, priority=-2, memory="1Gi")],
         preempt={"admitted-borrowing": R.IN_COHORT_RECLAMATION}),
    #             r
    #      /            \
    #   c(2)         q_borrowing(0)
    #  /
    # q(3, lending limit 2)
    case("respect lending limits",
         r_c(2, cq("q", {"default": {"cpu": (3, None, 2)}}, cohort="c",
                   within="LowerPriority", reclaim="Any"),
             q("q-borrowing", "r")),
         [*admitted(("admitted-borrowing", "q-borrowing", 4, 0)), incoming("q", 5, priority=-2)],
         preempt={"admitted-borrowing": R.IN_COHORT_RECLAMATION}),
    #                    r
    #             /             \
    #          c11(4)          c12(4)
    #       /    |    \            \
    #   c21(4) c22(4) c23(4)        q1
    #   /   \     |     |
    # c31(4) c32(4) q3  q2
    #  |      |
    #  q5     q4
    case("reclaim in complex hierarchy",
         tree(co("r"),
              *(co(name, parent=parent, quotas={"default": {"cpu": 4}})
                for name, parent in (("c11", "r"), ("c12", "r"), ("c21", "c11"),
                                     ("c22", "c11"), ("c23", "c11"), ("c31", "c21"),
                                     ("c32", "c21"))),
              *(q(name, parent) for name, parent in (("q1", "c12"), ("q2", "c23"),
                                                    ("q3", "c22"), ("q4", "c32"),
                                                    ("q5", "c31")))),
         [*admitted(("admitted-borrowing-1", "q1", 4, -6),
                    ("admitted-borrowing-2", "q1", 4, -5),
                    ("admitted-borrowing-3", "q2", 4, -9),
                    ("admitted-borrowing-4", "q2", 4, -10),
                    ("admitted-borrowing-5", "q3", 4, -4),
                    ("admitted-borrowing-6", "q3", 3, -3),
                    ("admitted-borrowing-7", "q4", 2, 4),
                    ("admitted-borrowing-8", "q4", 3, 2)),
          incoming("q5", 7, priority=-2)],
         preempt={"admitted-borrowing-1": R.IN_COHORT_RECLAMATION,
                  "admitted-borrowing-4": R.IN_COHORT_RECLAMATION}),
]


@pytest.mark.parametrize("kueue_case", CASES)
def test_hierarchical_preemptions(kueue_case: Case) -> None:
    run(kueue_case)
