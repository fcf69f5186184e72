"""Dominance between pending jobs: when one job's failure settles another for the cycle."""

from __future__ import annotations

from phalanx.scheduler import PendingCode
from phalanx.scheduler.preemption.dominance import Demands, Frontier, _Numbers, covers, demand_of
from phalanx.scheduler.types import PendingReason
from phalanx.scheduler.workload import Workload, make_workload
from phalanx.spec import JobSpec, TopologyConstraint
from phalanx.spec.resources import PodSet

from .strategies import Driver, cluster_queue, flavor, job, make_config, node

RACK = TopologyConstraint(required="rack")
BLOCK = TopologyConstraint(required="block")
NODE_FAILURE = PendingReason(PendingCode.NO_NODE_FITS, "needs 1 pods x 1 nvidia.com/gpu; ...")


def wl(spec: JobSpec, priority: int = 0, seq: int = 1) -> Workload:
    return make_workload(spec, local_queue=spec.queue, cluster_queue="team", priority=priority,
                         submitted_at=float(seq), seq=seq)


def gang(name: str, replicas: int, gpu: int = 1, *, min_replicas: int | None = None,
         topology: TopologyConstraint | None = None) -> JobSpec:
    return job(name, "team", gpu=gpu, replicas=replicas, min_replicas=min_replicas,
               topology=topology)


# ---------------------------------------------------------------------------- covers()
def test_bigger_on_every_count_and_request_covers_smaller() -> None:
    small = demand_of(wl(gang("s", 2, 1)))
    assert covers(demand_of(wl(gang("b", 4, 1))), small)
    assert covers(demand_of(wl(gang("b", 2, 8))), small)
    assert covers(small, small)
    assert not covers(demand_of(wl(gang("b", 1, 8))), small)  # fewer pods
    assert not covers(small, demand_of(wl(gang("b", 4, 1))))


def test_different_resources_or_pod_sets_never_cover() -> None:
    small = demand_of(wl(gang("s", 1, 1)))
    cpu_only = demand_of(wl(job("c", "team", cpu=64, replicas=4)))
    assert not covers(cpu_only, small)
    two_sets = JobSpec(name="t", queue="team", pod_sets=[
        PodSet.model_validate({"name": "worker", "replicas": 4,
                               "resources": {"cpu": 1, "nvidia.com/gpu": 1}}),
        PodSet.model_validate({"name": "launcher", "replicas": 1, "resources": {"cpu": 1}}),
    ])
    assert not covers(demand_of(wl(two_sets)), small)


def test_a_required_topology_only_covers_the_same_or_no_constraint() -> None:
    free = demand_of(wl(gang("free", 2)))
    rack = demand_of(wl(gang("rack", 2, topology=RACK)))
    block = demand_of(wl(gang("block", 2, topology=BLOCK)))
    # Failing anywhere means failing within one rack too.
    assert covers(rack, free)
    # Failing within a rack says nothing about the whole cluster or a block.
    assert not covers(free, rack)
    assert not covers(block, rack)
    assert covers(demand_of(wl(gang("rack4", 4, topology=RACK))), rack)


def test_partial_admission_floors_must_not_go_below_the_failed_count() -> None:
    failed = demand_of(wl(gang("s", 4)))
    # It could run with 2 pods, fewer than the 4 that failed: not settled.
    assert not covers(demand_of(wl(gang("b", 8, min_replicas=2))), failed)
    assert covers(demand_of(wl(gang("b", 8, min_replicas=4))), failed)
    # A failed job with a floor failed at every size down to it, but only its full count
    # is known to fail for sure.
    shrinkable = demand_of(wl(gang("s2", 4, min_replicas=1)))
    assert not covers(demand_of(wl(gang("b2", 2))), shrinkable)
    assert covers(demand_of(wl(gang("b3", 4))), shrinkable)


# ---------------------------------------------------------------------------- the frontier
def test_a_failure_settles_later_jobs_at_no_higher_priority() -> None:
    frontier = Frontier(Demands())
    small = wl(gang("small", 2), priority=10, seq=5)
    frontier.add(small, NODE_FAILURE, None, None)
    later_same = wl(gang("later", 4), priority=10, seq=6)
    later_lower = wl(gang("lower", 4), priority=0, seq=7)
    later_higher = wl(gang("higher", 4), priority=20, seq=8)
    older_same = wl(gang("older", 4), priority=10, seq=1)
    assert frontier.match(later_same) is not None
    assert frontier.match(later_lower) is not None
    assert frontier.match(later_higher) is None  # more jobs it may preempt
    assert frontier.match(older_same) is None  # newer-equal-priority jobs are candidates
    assert frontier.match(wl(gang("smaller", 1), priority=0, seq=9)) is None


def test_a_smaller_failure_replaces_the_bigger_ones_it_covers() -> None:
    frontier = Frontier(Demands())
    frontier.add(wl(gang("big", 8), seq=1), NODE_FAILURE, None, None)
    frontier.add(wl(gang("mid", 4), seq=2), NODE_FAILURE, None, None)
    assert [f.wl.name for f in frontier.failures] == ["mid"]
    frontier.add(wl(gang("rack", 2, topology=RACK), seq=3), NODE_FAILURE, None, None)
    assert [f.wl.name for f in frontier.failures] == ["mid", "rack"]


# ---------------------------------------------------------------------------- in a cycle
def test_a_settled_job_gets_a_reason_with_its_own_demand() -> None:
    config = make_config(flavor("default"),
                         cluster_queue("team", {"default": {"cpu": 100, "nvidia.com/gpu": 10}}))
    driver = Driver.start(config, [node("n1", gpu=16)])
    driver.submit(job("five", "team", gpu=5))
    driver.submit(job("six", "team", gpu=6))
    driver.submit(job("eight", "team", gpu=8))
    driver.cycle()
    assert set(driver.admitted) == {"five"}
    six, eight = driver.reason("six"), driver.reason("eight")
    assert six is not None and eight is not None
    assert six.code == eight.code == PendingCode.QUOTA_EXHAUSTED
    assert six.message == "needs 6 nvidia.com/gpu of default; team has 5 free of 10 nvidia.com/gpu"
    # Settled by "six" without an evaluation of its own, yet it states its own demand.
    assert eight.message == (
        "needs 8 nvidia.com/gpu of default; team has 5 free of 10 nvidia.com/gpu")


def test_a_job_settled_by_a_node_failure_names_the_job_that_failed() -> None:
    config = make_config(flavor("default"),
                         cluster_queue("team", {"default": {"cpu": 100, "nvidia.com/gpu": 64}}))
    driver = Driver.start(config, [node("n1", gpu=8), node("n2", gpu=8)])
    driver.submit(job("three", "team", gpu=8, replicas=3))
    driver.submit(job("four", "team", gpu=8, replicas=4))
    driver.cycle()
    three, four = driver.reason("three"), driver.reason("four")
    assert three is not None and four is not None
    assert three.code == four.code == PendingCode.NO_NODE_FITS
    assert "needs 3 pods x (8 nvidia.com/gpu, 1 cpu)" in three.message
    assert "2 of 2 matching nodes have room, for 2 pods" in three.message
    assert four.message.startswith("asks for no less than three, which does not fit either")


def test_structure_numbers_are_never_reused_once_the_table_is_cleared() -> None:
    numbers = _Numbers(limit=2)
    a, b, c = ("a",), ("b",), ("c",)
    first = [numbers.of(a), numbers.of(b), numbers.of(a)]
    assert first[0] == first[2] != first[1]
    later = numbers.of(c)  # the table was full: cleared, and c numbered after a and b
    assert later not in first
    assert numbers.of(a) not in {*first, later}  # a again: a new number, never an old one
