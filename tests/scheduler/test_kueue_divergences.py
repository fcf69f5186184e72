"""Cases of Kueue's scheduler tests on which Phalanx used to decide differently.

Each case is translated from kubernetes-sigs/kueue ``pkg/scheduler/scheduler_test.go``
or ``pkg/scheduler/scheduler_fs_test.go`` (named per test): the workloads Kueue
starts admitted are restored with ``Scheduler.restore``, then one ``cycle()`` runs.
Only quota counts: flavors carry no node labels and one node is larger than any
quota.
"""

from __future__ import annotations

from typing import Any

from phalanx.scheduler import Admission, CycleResult, PodSetAssignment, Scheduler
from phalanx.spec import JobSpec, Node, PodSet, QueueConfig

from .strategies import cluster_queue, cohort, flavor, job, make_config

BIG_NODE = "big"


def plain_flavor(name: str) -> Any:
    """A flavor that any node serves: only quota decides."""
    return flavor(name, labels={})


def start(config: QueueConfig, *, fair_sharing: bool) -> Scheduler:
    big = Node.model_validate({"name": BIG_NODE, "allocatable": {
        "cpu": 100_000, "memory": "1000Ti", "nvidia.com/gpu": 100_000, "gpu": 100_000}})
    scheduler = Scheduler(config, [big])
    scheduler.set_fair_sharing(fair_sharing)
    return scheduler


def restore(s: Scheduler, spec: JobSpec, cq: str, flavors: dict[str, str], *,
            priority: int = 0, at: float = 0.0, count: int | None = None) -> None:
    """``spec`` admitted in ``cq`` on ``flavors`` (resource -> flavor), ``count`` pods."""
    ps = spec.pod_sets[0]
    n = ps.replicas if count is None else count
    s.restore(spec, priority=priority, submitted_at=at, admission=Admission(
        job=spec.name, cluster_queue=cq,
        pod_sets=(PodSetAssignment(ps.name, n, dict(flavors), (BIG_NODE,) * n),),
    ))


def admitted(result: CycleResult) -> dict[str, tuple[int, ...]]:
    """Job -> pod counts per pod set, for this cycle's admissions."""
    return {a.job: tuple(p.count for p in a.pod_sets) for a in result.admissions}


def admitted_flavors(result: CycleResult) -> dict[str, dict[str, str]]:
    return {a.job: dict(a.pod_sets[0].flavors) for a in result.admissions}


def preempted(result: CycleResult) -> set[str]:
    return {p.victim for p in result.preemptions}


def preemptors(result: CycleResult) -> dict[str, str]:
    return {p.victim: p.preemptor for p in result.preemptions}


def requests_job(name: str, queue: str, requests: dict[str, Any], replicas: int = 1,
                 min_replicas: int | None = None) -> JobSpec:
    """A one-pod-set job asking exactly ``requests`` per pod."""
    return JobSpec(name=name, queue=queue, pod_sets=[PodSet.model_validate(
        {"name": "one", "replicas": replicas, "minReplicas": min_replicas,
         "resources": requests})])


# --------------------------------------------------------------------------- 5: fair sharing
def _weighted_pair(weight: float) -> Scheduler:
    """Cohort a (Kueue's A) lends 8 CPUs; queues b and c own none. b0 holds 4 (in b); b1 (priority
    9001, in b) and c1 (priority 0, in c) ask 4 each."""
    on_demand = plain_flavor("on-demand")
    config = make_config(
        on_demand,
        cohort("a", flavors={"on-demand": {"cpu": 8}}),
        cluster_queue("b", {"on-demand": {"cpu": 0}}, cohort="a", reclaim="Any", weight=weight),
        cluster_queue("c", {"on-demand": {"cpu": 0}}, cohort="a", reclaim="Any", weight=weight),
    )
    s = start(config, fair_sharing=True)
    restore(s, job("b0", "b", cpu=4), "b", {"cpu": "on-demand"})
    s.submit(job("b1", "b", cpu=4), priority=9001, submitted_at=1)
    s.submit(job("c1", "c", cpu=4), priority=0, submitted_at=2)
    return s


def test_fair_sharing_zero_weight_schedules_the_queue_borrowing_less() -> None:
    """scheduler_fs_test.go, "fair sharing two queues with weight 0 schedules workload
    which borrows less": among zero-weight queues the unweighted shares decide."""
    s = _weighted_pair(0)
    result = s.cycle()
    assert admitted(result) == {"c1": (1,)}
    assert s.pending_reason("b1") is not None


def test_fair_sharing_high_weight_schedules_the_queue_borrowing_less() -> None:
    """scheduler_fs_test.go, "fair sharing two queues with high weight schedules workload
    which borrows less": shares far below one are still told apart."""
    s = _weighted_pair(123456789)
    result = s.cycle()
    assert admitted(result) == {"c1": (1,)}


# --------------------------------------------------------------------------- 1: partial admission
def _eng_beta(new_pods: int) -> Scheduler:
    """Queue eng-beta: 20 GPUs of model-a, preempting lower priorities in itself. ``old``
    (priority -4) holds 10; ``new`` (priority 4) asks ``new_pods`` pods of one GPU, at
    least 10."""
    config = make_config(
        plain_flavor("model-a"),
        cluster_queue("eng-beta", {"model-a": {"nvidia.com/gpu": 20}}, within="LowerPriority",
                      strategy="StrictFIFO"),
    )
    s = start(config, fair_sharing=False)
    gpu = {"nvidia.com/gpu": 1}
    restore(s, requests_job("old", "eng-beta", gpu, replicas=10), "eng-beta",
            {"nvidia.com/gpu": "model-a"}, priority=-4)
    s.submit(requests_job("new", "eng-beta", gpu, replicas=new_pods, min_replicas=10),
             priority=4, submitted_at=1)
    return s


def test_partial_admission_preempts_for_the_full_count_first() -> None:
    """scheduler_test.go, "partial admission single variable pod set, preempt first"."""
    s = _eng_beta(20)
    result = s.cycle()
    assert admitted(result) == {}
    assert preemptors(result) == {"old": "new"}
    s.requeue("old")
    assert admitted(s.cycle()) == {"new": (20,)}


def test_partial_admission_shrinks_to_what_preemption_makes_fit() -> None:
    """scheduler_test.go, "partial admission single variable pod set, preempt with partial
    admission": 30 pods never fit 20 GPUs; 20 do once ``old`` is preempted."""
    s = _eng_beta(30)
    result = s.cycle()
    assert admitted(result) == {}
    assert preemptors(result) == {"old": "new"}
    s.requeue("old")
    assert admitted(s.cycle()) == {"new": (20,)}


# --------------------------------------------------------------------------- 3: preemption flavor
def _other_cohort(alpha: int, beta: int, beta_preempts: bool, *, fair_sharing: bool
                  ) -> Scheduler:
    """Cohort other: other-alpha (on-demand and spot, ``alpha`` GPUs each, preempting lower
    priorities in itself and in the cohort) and other-beta (``beta`` GPUs of each)."""
    policy = "LowerPriority"
    config = make_config(
        plain_flavor("on-demand"), plain_flavor("spot"),
        cluster_queue("other-alpha", {"on-demand": {"gpu": alpha}, "spot": {"gpu": alpha}},
                      cohort="other", within=policy, reclaim=policy),
        cluster_queue("other-beta", {"on-demand": {"gpu": beta}, "spot": {"gpu": beta}},
                      cohort="other", within=policy if beta_preempts else "Never",
                      reclaim=policy if beta_preempts else "Never"),
    )
    return start(config, fair_sharing=fair_sharing)


def test_prefers_the_first_flavor_when_the_second_also_needs_preemption_in_the_queue() -> None:
    """scheduler_test.go, "prefer first preemption flavor when second flavor also requires
    cq preemption": with 6 of 10 used and 5 asked, on-demand needs a1 preempted and then does
    not borrow; spot needs a2 (b1 is too high to reclaim). Both preempt in the queue: the
    first flavor wins."""
    s = _other_cohort(10, 0, False, fair_sharing=False)
    restore(s, requests_job("a1", "other-alpha", {"gpu": 6}), "other-alpha",
            {"gpu": "on-demand"}, priority=50)
    restore(s, requests_job("a2", "other-alpha", {"gpu": 5}), "other-alpha",
            {"gpu": "spot"}, priority=50)
    restore(s, requests_job("b1", "other-beta", {"gpu": 5}), "other-beta",
            {"gpu": "spot"}, priority=9001)
    s.submit(requests_job("preemptor", "other-alpha", {"gpu": 5}), priority=100,
             submitted_at=1)
    result = s.cycle()
    assert admitted(result) == {}
    assert preemptors(result) == {"a1": "preemptor"}


def test_prefers_reclaiming_in_the_cohort_over_preempting_in_the_queue() -> None:
    """scheduler_test.go, "prefer reclamation over cq priority based preemption": on-demand
    needs a1 of the preemptor's own queue; spot only b1, which other-beta borrows."""
    s = _other_cohort(10, 0, True, fair_sharing=False)
    restore(s, requests_job("a1", "other-alpha", {"gpu": 5}), "other-alpha",
            {"gpu": "on-demand"}, priority=50)
    restore(s, requests_job("b1", "other-beta", {"gpu": 5}), "other-beta",
            {"gpu": "spot"}, priority=50)
    s.submit(requests_job("preemptor", "other-alpha", {"gpu": 6}), priority=100,
             submitted_at=1)
    result = s.cycle()
    assert preemptors(result) == {"b1": "preemptor"}


def test_fair_sharing_prefers_reclaim_over_preemption_in_the_queue_while_borrowing() -> None:
    """scheduler_fs_test.go, "with fair sharing: prefer reclamation over cq priority based
    preemption; with preemption while borrowing": both flavors leave the preemptor
    borrowing; spot takes only b1 of other-beta, on-demand a1 of its own queue."""
    s = _other_cohort(7, 3, False, fair_sharing=True)
    restore(s, requests_job("a1", "other-alpha", {"gpu": 5}), "other-alpha",
            {"gpu": "on-demand"}, priority=50)
    restore(s, requests_job("b1", "other-beta", {"gpu": 5}), "other-beta",
            {"gpu": "spot"}, priority=50)
    s.submit(requests_job("preemptor", "other-alpha", {"gpu": 8}), priority=100,
             submitted_at=1)
    result = s.cycle()
    assert preemptors(result) == {"b1": "preemptor"}


# --------------------------------------------------------------------------- 2: many preemptors
def _three_full_queues(fair_sharing: bool, cpus: int, bank: int = 0) -> Scheduler:
    """Cohort other: three queues of 2 CPUs preempting lower priorities in themselves, each
    running a priority-0 job of ``cpus`` CPUs, each with a priority-100 job of the same
    size waiting; a queue resource-bank lends ``bank`` CPUs. (Kueue's case without fair
    sharing has two such queues; a third adds to it.)"""
    names = ("other-alpha", "other-beta", "other-gamma")
    config = make_config(
        plain_flavor("default"),
        *(cluster_queue(n, {"default": {"cpu": 2}}, cohort="other", within="LowerPriority")
          for n in names),
        cluster_queue("resource-bank", {"default": {"cpu": bank}}, cohort="other"),
    )
    s = start(config, fair_sharing=fair_sharing)
    for n in names:
        restore(s, requests_job(f"{n}-low", n, {"cpu": cpus}), n, {"cpu": "default"})
    for i, n in enumerate(names):
        s.submit(requests_job(f"{n}-high", n, {"cpu": cpus}), priority=100,
                 submitted_at=1 + i)
    return s


def test_queues_of_a_cohort_preempt_within_their_quota_in_one_cycle() -> None:
    """scheduler_test.go, "multiple preemptions without borrowing": every queue preempts
    inside its own nominal quota in the same cycle."""
    s = _three_full_queues(fair_sharing=False, cpus=2)
    result = s.cycle()
    assert preemptors(result) == {f"{n}-low": f"{n}-high"
                                  for n in ("other-alpha", "other-beta", "other-gamma")}


def test_queues_of_a_cohort_preempt_within_their_quota_in_one_cycle_fair_sharing() -> None:
    """scheduler_fs_test.go, "multiple preemptions within cq when fair sharing"."""
    s = _three_full_queues(fair_sharing=True, cpus=3, bank=3)
    result = s.cycle()
    assert preemptors(result) == {f"{n}-low": f"{n}-high"
                                  for n in ("other-alpha", "other-beta", "other-gamma")}
    for n in ("other-alpha", "other-beta", "other-gamma"):
        s.requeue(f"{n}-low")
    assert set(admitted(s.cycle())) == {f"{n}-high"
                                        for n in ("other-alpha", "other-beta", "other-gamma")}


# --------------------------------------------------------------------------- 4: hierarchy order
def test_hierarchical_cohort_schedules_the_job_borrowing_less_first() -> None:
    """scheduler_test.go, "in a hierarchical cohort, workload borrowing less is scheduled
    first": cohort root holds sub-cohort guaranteed (4 CPUs) and queue best-effort; queue
    guaranteed (no quota) is in the sub-cohort. Both jobs borrow from their queue, but the
    guaranteed one only from its sub-cohort, so it goes before the higher priority."""
    config = make_config(
        plain_flavor("default"),
        cohort("root"),
        cohort("guaranteed", parent="root", flavors={"default": {"cpu": 4}}),
        cluster_queue("guaranteed", {"default": {"cpu": 0}}, cohort="guaranteed"),
        cluster_queue("best-effort", {"default": {"cpu": 0}}, cohort="root"),
    )
    s = start(config, fair_sharing=False)
    s.submit(requests_job("guaranteed", "guaranteed", {"cpu": 4}), priority=0, submitted_at=1)
    s.submit(requests_job("best-effort", "best-effort", {"cpu": 4}), priority=3,
             submitted_at=2)
    assert admitted(s.cycle()) == {"guaranteed": (1,)}


# --------------------------------------------------------------------------- 6: hierarchy
def test_hierarchical_advantage_reclaims_what_the_cohort_lent() -> None:
    """preemption_hierarchical_test.go, "preempt with hierarchical advantage": cohort c (2
    CPUs, under root r) holds queue q (no quota); q_borrowing, directly under r, runs a job
    on c's 2 CPUs. A job of q fits within c, so it may reclaim them."""
    config = make_config(
        plain_flavor("default"),
        cohort("r"),
        cohort("c", parent="r", flavors={"default": {"cpu": 2}}),
        cluster_queue("q", {"default": {"cpu": 0}}, cohort="c", within="LowerPriority",
                      reclaim="Any"),
        cluster_queue("q-borrowing", {"default": {"cpu": 0}}, cohort="r",
                      within="LowerPriority", reclaim="Any"),
    )
    s = start(config, fair_sharing=False)
    restore(s, requests_job("admitted2", "q-borrowing", {"cpu": 2}), "q-borrowing",
            {"cpu": "default"})
    s.submit(requests_job("in", "q", {"cpu": 2}), priority=0, submitted_at=1)
    assert preemptors(s.cycle()) == {"admitted2": "in"}
