"""The worked examples of Kueue's concept pages, replayed through the scheduler core.

Sources (kubernetes-sigs/kueue, site/content/en/docs/concepts/): cluster_queue.md
(the pods quota sample, borrowing, borrowingLimit, lendingLimit, queueing strategy,
preemption policies, flavorFungibility), preemption.md (classic candidates and
targets: borrowing queues first, lowest priority, most recently admitted, then the
minimal set; reclaimWithinCohort; borrowWithinCohort with maxPriorityThreshold; fair
sharing), cohort.md (cohort quota, hierarchical cohorts), topology_aware_scheduling.md
(required/preferred block) and the partial admission of batch Jobs
(``job-min-parallelism``).

Each case is a config, nodes and a list of steps; the driver terminates preempted
pods (requeues the victims) and runs cycles until nothing changes, then the
expected admissions, preemptions and pending codes are compared.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

from phalanx.scheduler import PendingCode, PreemptionReason
from phalanx.spec import JobSpec, Node, QueueConfig, TopologyConstraint

from .strategies import Driver, cluster_queue, cohort, flavor, job, make_config, node

Q = PendingCode
P = PreemptionReason
DEFAULT = flavor("default")
BIG = [node("big", pool="default")]

# Steps: ("submit", JobSpec, priority) | ("settle",) | ("remove", name)
Step = tuple[Any, ...]


@dataclass
class Case:
    name: str
    config: QueueConfig
    steps: Sequence[Step]
    admitted: set[str]
    # job -> expected pending code; a set means the docs leave the exact code open.
    pending: dict[str, PendingCode | set[PendingCode] | None] = field(default_factory=dict)
    # (victim, reason) in the order the preemptions were issued.
    preempted: list[tuple[str, PreemptionReason]] = field(default_factory=list)
    nodes: list[Node] = field(default_factory=lambda: list(BIG))
    flavors: dict[str, str] = field(default_factory=dict)  # job -> flavor of its cpu
    counts: dict[str, int] = field(default_factory=dict)  # job -> admitted pods
    borrowing: dict[str, bool] = field(default_factory=dict)
    check: Callable[[Driver], None] | None = None


def submit(spec: JobSpec, priority: int = 0) -> Step:
    return ("submit", spec, priority)


SETTLE: Step = ("settle",)


def cpu_jobs(prefix: str, queue: str, sizes: Sequence[Any], priority: int = 0) -> list[Step]:
    return [submit(job(f"{prefix}{i}", queue, cpu=c), priority) for i, c in enumerate(sizes)]


# --------------------------------------------------------------------------- cluster_queue.md
def pods_quota_cases() -> list[Case]:
    """Sample ClusterQueue: admits iff cpu <= 9, memory <= 36Gi and pods <= 5."""
    cq = cluster_queue("cluster-queue", {"default": {"cpu": 9, "memory": "36Gi", "pods": 5}})
    config = make_config(DEFAULT, cq)
    small = [submit(job(f"p{i}", "cluster-queue", cpu=1, memory="1Gi")) for i in range(6)]
    return [
        Case("pods-quota-limits-pod-count", config, [*small, SETTLE],
             admitted={f"p{i}" for i in range(5)}, pending={"p5": Q.QUOTA_EXHAUSTED}),
        Case("pods-quota-cpu-limit", config,
             [*cpu_jobs("c", "cluster-queue", [4, 4, 2]), SETTLE],
             admitted={"c0", "c1"}, pending={"c2": Q.QUOTA_EXHAUSTED}),
        Case("pods-quota-memory-limit", config,
             [submit(job("m0", "cluster-queue", cpu=1, memory="30Gi")),
              submit(job("m1", "cluster-queue", cpu=1, memory="7Gi")),
              submit(job("m2", "cluster-queue", cpu=1, memory="6Gi")), SETTLE],
             admitted={"m0", "m2"}, pending={"m1": Q.QUOTA_EXHAUSTED}),
    ]


def team_ab(
    a: dict[str, Any], b: dict[str, Any], **cq_options: Any
) -> QueueConfig:
    return make_config(
        DEFAULT,
        cluster_queue("team-a-cq", {"default": a}, cohort="team-ab", **cq_options),
        cluster_queue("team-b-cq", {"default": b}, cohort="team-ab", **cq_options),
    )


def borrowing_cases() -> list[Case]:
    """Borrowing example: team-a 9 CPU/36Gi, team-b 12 CPU/48Gi in cohort team-ab."""
    config = team_ab({"cpu": 9, "memory": "36Gi"}, {"cpu": 12, "memory": "48Gi"})
    big = [submit(job(f"a{i}", "team-a-cq", cpu=7, memory="28Gi")) for i in range(3)]
    return [
        # team-b idle: team-a can admit up to 12+9=21 CPUs and 48+36=84Gi.
        Case("borrowing-up-to-cohort-total", config,
             [*big, SETTLE, submit(job("a3", "team-a-cq", cpu=1)), SETTLE],
             admitted={"a0", "a1", "a2"}, pending={"a3": Q.COHORT_EXHAUSTED},
             borrowing={"a0": False, "a2": True}),
        # team-a at nominal and both teams pending: team-b's nominal quota comes first,
        # even though team-a's job is older.
        Case("borrowing-nominal-before-borrowers", config,
             [submit(job("a0", "team-a-cq", cpu=9)), SETTLE,
              submit(job("a1", "team-a-cq", cpu=6)),
              submit(job("b0", "team-b-cq", cpu=12)), SETTLE],
             admitted={"a0", "b0"}, pending={"a1": Q.COHORT_EXHAUSTED},
             borrowing={"b0": False}),
    ]


def borrowing_limit_cases() -> list[Case]:
    """BorrowingLimit example: team-a 9 CPU with borrowingLimit 1, team-b 12 CPU."""
    config = team_ab({"cpu": (9, 1, None)}, {"cpu": 12})
    return [
        Case("borrowing-limit-caps-borrower", config,
             [*cpu_jobs("a", "team-a-cq", [1] * 11), SETTLE],
             admitted={f"a{i}" for i in range(10)}, pending={"a10": Q.QUOTA_EXHAUSTED}),
        # Without a limit team-b may use 12+9 CPUs.
        Case("no-borrowing-limit-uses-whole-cohort", config,
             [*cpu_jobs("b", "team-b-cq", [7, 7, 7, 1]), SETTLE],
             admitted={"b0", "b1", "b2"}, pending={"b3": Q.COHORT_EXHAUSTED}),
    ]


def lending_limit_cases() -> list[Case]:
    """LendingLimit example: team-a 9 CPU, team-b 12 CPU with lendingLimit 1."""
    config = team_ab({"cpu": 9}, {"cpu": (12, None, 1)})
    return [
        Case("lending-limit-caps-what-others-borrow", config,
             [*cpu_jobs("a", "team-a-cq", [1] * 11), SETTLE],
             admitted={f"a{i}" for i in range(10)}, pending={"a10": Q.COHORT_EXHAUSTED}),
        Case("no-lending-limit-lends-everything", config,
             [*cpu_jobs("b", "team-b-cq", [7, 7, 7, 1]), SETTLE],
             admitted={"b0", "b1", "b2"}, pending={"b3": Q.COHORT_EXHAUSTED}),
        # The 11 CPUs team-b keeps for itself are there when it asks, with no preemption.
        Case("lending-limit-guarantees-the-rest", config,
             [*cpu_jobs("a", "team-a-cq", [5, 5]), SETTLE,
              submit(job("b0", "team-b-cq", cpu=11)), SETTLE],
             admitted={"a0", "a1", "b0"}),
    ]


def strict_fifo_cases() -> list[Case]:
    """Queueing strategy: StrictFIFO's head blocks newer jobs that would fit; BestEffort not."""
    steps = [submit(job("run", "q", cpu=2)), SETTLE,
             submit(job("big", "q", cpu=3)), submit(job("small", "q", cpu=1)), SETTLE]
    strict = make_config(
        DEFAULT, cluster_queue("q", {"default": {"cpu": 4}}, strategy="StrictFIFO")
    )
    best = make_config(DEFAULT, cluster_queue("q", {"default": {"cpu": 4}}))
    return [
        Case("strict-fifo-head-blocks", strict, steps, admitted={"run"},
             pending={"big": Q.QUOTA_EXHAUSTED, "small": Q.STRICT_FIFO_BLOCKED}),
        Case("best-effort-fifo-skips-head", best, steps, admitted={"run", "small"},
             pending={"big": Q.QUOTA_EXHAUSTED}),
    ]


# --------------------------------------------------------------------------- preemption.md
def within_cluster_queue_cases() -> list[Case]:
    def one_cq(within: str, cpu: int = 4) -> QueueConfig:
        return make_config(DEFAULT, cluster_queue("q", {"default": {"cpu": cpu}}, within=within))

    low_then_high = [submit(job("low", "q", cpu=4), -100), SETTLE,
                     submit(job("high", "q", cpu=4), 100), SETTLE]
    # C is admitted; A (older, too big for what is free) waits while B (newer) fits and is
    # admitted. When C finishes, A needs B's room: only LowerOrNewerEqualPriority takes it.
    newer_equal = [submit(job("c", "q", cpu=2)), SETTLE,
                   submit(job("a", "q", cpu=4)), submit(job("b", "q", cpu=2)), SETTLE,
                   ("remove", "c"), SETTLE]
    return [
        Case("within-lower-priority-preempts", one_cq("LowerPriority"), low_then_high,
             admitted={"high"}, pending={"low": None},
             preempted=[("low", P.IN_CLUSTER_QUEUE)]),
        Case("within-never-does-not-preempt", one_cq("Never"), low_then_high,
             admitted={"low"}, pending={"high": Q.PREEMPTION_DISABLED}),
        Case("within-lower-priority-spares-equal-priority", one_cq("LowerPriority"),
             [submit(job("first", "q", cpu=4)), SETTLE, submit(job("second", "q", cpu=4)),
              SETTLE],
             admitted={"first"}, pending={"second": None}),
        Case("within-lower-or-newer-equal-preempts-newer", one_cq("LowerOrNewerEqualPriority"),
             newer_equal, admitted={"a"}, pending={"b": None},
             preempted=[("b", P.IN_CLUSTER_QUEUE)]),
        Case("within-lower-priority-keeps-newer-equal", one_cq("LowerPriority"), newer_equal,
             admitted={"b"}, pending={"a": None}),
        # Candidates: lowest priority first, then most recently admitted; only one is needed.
        Case("candidate-order-lowest-priority-newest-first", one_cq("LowerPriority", 6),
             [submit(job("l1", "q", cpu=2), -100), SETTLE,
              submit(job("l2", "q", cpu=2), -100), SETTLE,
              submit(job("m", "q", cpu=2), 0), SETTLE,
              submit(job("h", "q", cpu=2), 100), SETTLE],
             admitted={"l1", "m", "h"}, pending={"l2": None},
             preempted=[("l2", P.IN_CLUSTER_QUEUE)]),
        # Greedy targets are [la, lb]; the minimisation pass drops la because the
        # preemptor fits with lb alone gone.
        Case("minimal-set-of-victims", one_cq("LowerPriority", 3),
             [submit(job("lb", "q", cpu=2), 0), SETTLE,
              submit(job("la", "q", cpu=1), -100), SETTLE,
              submit(job("h", "q", cpu=2), 100), SETTLE],
             admitted={"la", "h"}, pending={"lb": None},
             preempted=[("lb", P.IN_CLUSTER_QUEUE)]),
    ]


def reclaim_cases() -> list[Case]:
    """reclaimWithinCohort: team-b borrowed team-a's nominal; team-a wants it back."""

    def config(reclaim: str) -> QueueConfig:
        return team_ab({"cpu": 4}, {"cpu": 4}, reclaim=reclaim)

    def steps(priority: int) -> list[Step]:
        return [submit(job("b1", "team-b-cq", cpu=4)), SETTLE,
                submit(job("b2", "team-b-cq", cpu=4)), SETTLE,
                submit(job("a1", "team-a-cq", cpu=4), priority), SETTLE]

    blocked = {Q.PREEMPTION_DISABLED, Q.COHORT_EXHAUSTED}
    return [
        Case("reclaim-any-ignores-priority", config("Any"), steps(-100),
             admitted={"b1", "a1"}, pending={"b2": None},
             preempted=[("b2", P.IN_COHORT_RECLAMATION)]),
        Case("reclaim-lower-priority-preempts-lower", config("LowerPriority"), steps(100),
             admitted={"b1", "a1"}, pending={"b2": None},
             preempted=[("b2", P.IN_COHORT_RECLAMATION)]),
        Case("reclaim-lower-priority-spares-higher", config("LowerPriority"), steps(-100),
             admitted={"b1", "b2"}, pending={"a1": blocked}),
        Case("reclaim-never", config("Never"), steps(100),
             admitted={"b1", "b2"}, pending={"a1": blocked}),
        # Only queues that borrow give back: team-b within its nominal keeps its job
        # even though it has lower priority, when reclaiming would not be enough.
        Case("reclaim-only-from-borrowing-queues",
             team_ab({"cpu": 4}, {"cpu": 4}, reclaim="Any", within="LowerPriority"),
             [submit(job("b1", "team-b-cq", cpu=4), -100), SETTLE,
              submit(job("a1", "team-a-cq", cpu=4), 100), SETTLE,
              submit(job("a2", "team-a-cq", cpu=4), 100), SETTLE],
             admitted={"b1", "a1"}, pending={"a2": None}),
    ]


def borrow_within_cohort_cases() -> list[Case]:
    """borrowWithinCohort: a preemptor that must borrow may preempt lower priorities."""

    def config(borrow: tuple[str, int | None] | None) -> QueueConfig:
        return make_config(
            DEFAULT,
            cluster_queue("team-a-cq", {"default": {"cpu": 2}}, cohort="co", reclaim="Any",
                          borrow_within=borrow),
            cluster_queue("team-b-cq", {"default": {"cpu": 6}}, cohort="co"),
        )

    steps = [submit(job("b1", "team-b-cq", cpu=4), -100), SETTLE,
             submit(job("b2", "team-b-cq", cpu=4), -100), SETTLE,
             submit(job("a1", "team-a-cq", cpu=4), 100), SETTLE]
    return [
        Case("borrow-within-cohort-lower-priority", config(("LowerPriority", 0)), steps,
             admitted={"b1", "a1"}, pending={"b2": None}, borrowing={"a1": True},
             preempted=[("b2", P.IN_COHORT_RECLAIM_WHILE_BORROWING)]),
        Case("borrow-within-cohort-threshold", config(("LowerPriority", -200)), steps,
             admitted={"b1", "b2"}, pending={"a1": None}),
        Case("borrow-within-cohort-off", config(None), steps,
             admitted={"b1", "b2"}, pending={"a1": None}),
    ]


def fungibility_cases() -> list[Case]:
    spot, on_demand = flavor("spot"), flavor("on-demand")
    nodes = [node("spot-node", pool="spot"), node("od-node", pool="on-demand")]

    def borrow_config(when: str) -> QueueConfig:
        return make_config(
            spot, on_demand,
            cluster_queue("team-a-cq", {"spot": {"cpu": 4}, "on-demand": {"cpu": 8}},
                          cohort="co", when_can_borrow=when),
            cluster_queue("team-b-cq", {"spot": {"cpu": 4}}, cohort="co"),
        )

    def preempt_config(when: str) -> QueueConfig:
        return make_config(
            spot, on_demand,
            cluster_queue("q", {"spot": {"cpu": 4}, "on-demand": {"cpu": 4}},
                          within="LowerPriority", when_can_preempt=when),
        )

    low_then_high = [submit(job("low", "q", cpu=4), -100), SETTLE,
                     submit(job("high", "q", cpu=4), 100), SETTLE]
    return [
        # Flavors in list order: the first with enough unused nominal quota.
        Case("flavor-order", make_config(
            spot, on_demand,
            cluster_queue("q", {"spot": {"cpu": 4}, "on-demand": {"cpu": 8}})),
            [submit(job("six", "q", cpu=6)), submit(job("three", "q", cpu=3)), SETTLE],
            admitted={"six", "three"}, nodes=nodes,
            flavors={"six": "on-demand", "three": "spot"}),
        Case("when-can-borrow-borrow", borrow_config("Borrow"),
             [submit(job("six", "team-a-cq", cpu=6)), SETTLE], admitted={"six"}, nodes=nodes,
             flavors={"six": "spot"}, borrowing={"six": True}),
        Case("when-can-borrow-try-next-flavor", borrow_config("TryNextFlavor"),
             [submit(job("six", "team-a-cq", cpu=6)), SETTLE], admitted={"six"}, nodes=nodes,
             flavors={"six": "on-demand"}, borrowing={"six": False}),
        Case("when-can-preempt-try-next-flavor", preempt_config("TryNextFlavor"), low_then_high,
             admitted={"low", "high"}, nodes=nodes,
             flavors={"low": "spot", "high": "on-demand"}),
        # high stops at spot and preempts; low, requeued, then finds on-demand free.
        Case("when-can-preempt-preempt", preempt_config("Preempt"), low_then_high,
             admitted={"high", "low"}, nodes=nodes,
             preempted=[("low", P.IN_CLUSTER_QUEUE)],
             flavors={"high": "spot", "low": "on-demand"}),
    ]


def fair_sharing_cases() -> list[Case]:
    """Fair sharing: a queue borrowing less may preempt from the one borrowing most.

    team-a borrowed all 4 CPUs team-c lends; team-b wants to borrow 2. After the
    preemptions the two borrowers hold equal weighted shares.
    """
    config = make_config(
        DEFAULT,
        cluster_queue("team-a-cq", {"default": {"cpu": 4}}, cohort="co", reclaim="Any"),
        cluster_queue("team-b-cq", {"default": {"cpu": 4}}, cohort="co", reclaim="Any"),
        cluster_queue("team-c-cq", {"default": {"cpu": 4}}, cohort="co"),
    )
    return [
        Case("fair-sharing-equalises-borrowers", config,
             [*cpu_jobs("a", "team-a-cq", [1] * 8), SETTLE,
              *cpu_jobs("b", "team-b-cq", [1] * 6), SETTLE],
             admitted={"a0", "a1", "a2", "a3", "a4", "a5", *(f"b{i}" for i in range(6))},
             pending={"a6": None, "a7": None},
             preempted=[("a7", P.IN_COHORT_FAIR_SHARING), ("a6", P.IN_COHORT_FAIR_SHARING)]),
    ]


# --------------------------------------------------------------------------- cohort.md
def cohort_cases() -> list[Case]:
    hello = make_config(
        DEFAULT,
        cohort("hello-cohort", flavors={"default": {"cpu": 12}}),
        cluster_queue("my-cluster-queue", {"default": {"cpu": 0}}, cohort="hello-cohort"),
    )

    def tree(regular_org: dict[str, Any] | None, important_cq: Any = 4) -> QueueConfig:
        return make_config(
            DEFAULT,
            cohort("root-cohort", flavors={"default": {"cpu": 8}}),
            cohort("important-org", parent="root-cohort", weight=0.75),
            cohort("regular-org", parent="root-cohort", weight=0.25, flavors=regular_org),
            cluster_queue("important-cq", {"default": {"cpu": important_cq}},
                          cohort="important-org"),
            cluster_queue("regular-cq", {"default": {"cpu": 4}}, cohort="regular-org"),
        )

    return [
        Case("cohort-quota-lent-to-zero-nominal-queue", hello,
             [*cpu_jobs("j", "my-cluster-queue", [4, 4, 4, 1]), SETTLE],
             admitted={"j0", "j1", "j2"}, pending={"j3": Q.COHORT_EXHAUSTED}),
        # regular-cq: its 4, the root's 8 and important-cq's idle 4.
        Case("hierarchy-borrows-across-the-tree", tree(None),
             [*cpu_jobs("r", "regular-cq", [4, 4, 4, 4, 1]), SETTLE],
             admitted={"r0", "r1", "r2", "r3"}, pending={"r4": Q.COHORT_EXHAUSTED}),
        # important-cq lends nothing: regular-cq gets its 4 and the root's 8.
        Case("hierarchy-lending-limit", tree(None, important_cq=(4, None, 0)),
             [*cpu_jobs("r", "regular-cq", [4, 4, 4, 1]), SETTLE],
             admitted={"r0", "r1", "r2"}, pending={"r3": Q.COHORT_EXHAUSTED}),
        # regular-org may borrow at most 2 from its parent.
        Case("hierarchy-cohort-borrowing-limit", tree({"default": {"cpu": (0, 2, None)}}),
             [*cpu_jobs("r", "regular-cq", [4, 2, 1]), SETTLE],
             admitted={"r0", "r1"}, pending={"r2": None}),
    ]


# --------------------------------------------------------------------------- partial admission
def partial_admission_cases() -> list[Case]:
    def config(cpu: int) -> QueueConfig:
        return make_config(DEFAULT, cluster_queue("q", {"default": {"cpu": cpu}}))

    # parallelism 6, job-min-parallelism 5
    partial = job("partial", "q", cpu=1, replicas=6, min_replicas=5)
    whole = job("whole", "q", cpu=1, replicas=6)
    small_nodes = [node("n2", cpu=2), node("n3", cpu=3)]
    return [
        Case("partial-admission-shrinks-to-quota", config(5), [submit(partial), SETTLE],
             admitted={"partial"}, counts={"partial": 5}),
        Case("partial-admission-full-when-room", config(8), [submit(partial), SETTLE],
             admitted={"partial"}, counts={"partial": 6}),
        Case("partial-admission-not-below-min", config(4), [submit(partial), SETTLE],
             admitted=set(), pending={"partial": Q.QUOTA_EXHAUSTED}),
        Case("gang-without-min-is-all-or-nothing", config(5), [submit(whole), SETTLE],
             admitted=set(), pending={"whole": Q.QUOTA_EXHAUSTED}),
        # Quota has room for 6 but the nodes only for 5: placement decides the count.
        Case("partial-admission-shrinks-to-nodes", config(10), [submit(partial), SETTLE],
             admitted={"partial"}, counts={"partial": 5}, nodes=small_nodes),
    ]


# --------------------------------------------------------------- topology_aware_scheduling.md
TAS_NODES = [
    node("node-1", cpu=4, labels={"block": "block-1", "rack": "rack-1"}),
    node("node-2", cpu=4, labels={"block": "block-1", "rack": "rack-2"}),
    node("node-3", cpu=4, labels={"block": "block-2", "rack": "rack-1"}),
    node("node-4", cpu=4, labels={"block": "block-2", "rack": "rack-3"}),
]
BLOCK_OF = {n.name: n.labels["block"] for n in TAS_NODES}


def _blocks_of(driver: Driver, name: str) -> set[str]:
    return {BLOCK_OF[n] for ps in driver.admitted[name].pod_sets for n in ps.nodes}


def _tas_check(driver: Driver) -> None:
    (first,) = _blocks_of(driver, "f1")
    (second,) = _blocks_of(driver, "f2")
    assert first != second, "f2 only fits the block f1 left untouched"
    assert _blocks_of(driver, "t3") == {"block-1", "block-2"}
    assert len(driver.admitted["t3"].pod_sets[0].nodes) == 2


def topology_cases() -> list[Case]:
    config = make_config(DEFAULT, cluster_queue("q", {"default": {"cpu": 100}}))
    required = TopologyConstraint(required="block")
    preferred = TopologyConstraint(preferred="block")
    return [
        # Each block has 8 CPUs. f1 takes 6 in one block, so f2 (also 6, one block) must
        # take the other; then 2 CPUs are free in each block: a 2 x 2 CPU job that
        # requires one block waits, one that only prefers it spreads over both.
        Case("tas-required-and-preferred-block", config,
             [submit(job("f1", "q", cpu=2, replicas=3, topology=required)), SETTLE,
              submit(job("f2", "q", cpu=2, replicas=3, topology=required)), SETTLE,
              submit(job("t2", "q", cpu=2, replicas=2, topology=required)), SETTLE,
              submit(job("t3", "q", cpu=2, replicas=2, topology=preferred)), SETTLE],
             admitted={"f1", "f2", "t3"}, pending={"t2": Q.TOPOLOGY_UNSATISFIABLE},
             nodes=TAS_NODES, check=_tas_check),
    ]


ALL_CASES = [
    *pods_quota_cases(),
    *borrowing_cases(),
    *borrowing_limit_cases(),
    *lending_limit_cases(),
    *strict_fifo_cases(),
    *within_cluster_queue_cases(),
    *reclaim_cases(),
    *borrow_within_cohort_cases(),
    *fungibility_cases(),
    *fair_sharing_cases(),
    *cohort_cases(),
    *partial_admission_cases(),
    *topology_cases(),
]


@pytest.mark.parametrize("case", ALL_CASES, ids=[c.name for c in ALL_CASES])
def test_kueue_documented_example(case: Case) -> None:
    driver = Driver.start(case.config, case.nodes)
    for step in case.steps:
        if step[0] == "submit":
            driver.submit(step[1], step[2])
        elif step[0] == "remove":
            driver.remove(step[1])
        else:
            driver.settle()

    assert set(driver.admitted) == case.admitted
    assert [(p.victim, p.reason) for p in driver.preemptions] == case.preempted
    assert driver.pending() == set(case.pending)
    for name, want in case.pending.items():
        reason = driver.reason(name)
        assert reason is not None and reason.message, f"{name} has no pending reason"
        if isinstance(want, set):
            assert reason.code in want, f"{name}: {reason}"
        elif want is not None:
            assert reason.code == want, f"{name}: {reason}"
    for name, want_flavor in case.flavors.items():
        (pod_set,) = driver.admitted[name].pod_sets
        assert pod_set.flavors["cpu"] == want_flavor, name
    for name, count in case.counts.items():
        (pod_set,) = driver.admitted[name].pod_sets
        assert pod_set.count == count and len(pod_set.nodes) == count, name
    for name, borrowing in case.borrowing.items():
        assert driver.admitted[name].borrowing is borrowing, name
    if case.check is not None:
        case.check(driver)
