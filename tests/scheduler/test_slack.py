"""Capacity follows health: a slack queue's quota shrinks with its nodes and grows back;
a queue that avoids degraded nodes is placed on healthy ones only."""

from __future__ import annotations

from phalanx.scheduler import PreemptionReason, Scheduler
from phalanx.spec import QueueConfig
from phalanx.spec.resources import NodeHealth

from .strategies import cluster_queue, flavor, job, make_config, node


def _config(slack: bool = True, avoid_degraded: bool = False) -> QueueConfig:
    cq = cluster_queue("q", {"default": {"cpu": 12}}).model_copy(
        update={"capacity_follows_health": slack, "avoid_degraded_nodes": avoid_degraded})
    return make_config(flavor("default"), cq)


def _nominal(s: Scheduler) -> int:
    [status] = [q for q in s.queue_status() if q.name == "q"]
    [cpu] = [u for u in status.usage if u.resource == "cpu"]
    return cpu.nominal


def test_a_slack_queue_shrinks_with_an_unhealthy_node_and_grows_back() -> None:
    nodes = [node(f"n{i}", cpu=4) for i in range(3)]
    s = Scheduler(_config(), nodes)
    for i, priority in enumerate((0, 10, 20)):
        s.submit(job(f"j{i}", "q", cpu=4), priority=priority, submitted_at=i)
    assert len(s.cycle().admissions) == 3
    assert _nominal(s) == 12_000
    s.upsert_node(node("n1", cpu=4, health=NodeHealth.UNHEALTHY))
    result = s.cycle()
    assert _nominal(s) == 8_000
    # Over the shrunk quota by one job's worth: the lowest priority goes (whatever node).
    assert [(p.victim, p.reason) for p in result.preemptions] == [
        ("j0", PreemptionReason.CAPACITY_WITHHELD)]
    assert not s.cycle().preemptions  # nothing more while the victim terminates
    s.requeue("j0")
    assert not s.cycle().admissions  # the queue holds all it may now
    s.upsert_node(node("n1", cpu=4))  # repaired
    assert _nominal(s) == 8_000  # recomputed at the next cycle
    assert [a.job for a in s.cycle().admissions] == ["j0"]
    assert _nominal(s) == 12_000


def test_a_cordoned_node_withholds_its_capacity_too() -> None:
    s = Scheduler(_config(), [node(f"n{i}", cpu=4) for i in range(3)])
    s.upsert_node(node("n0", cpu=4, cordoned=True))
    s.cycle()
    assert _nominal(s) == 8_000


def test_without_the_option_the_quota_stays() -> None:
    nodes = [node(f"n{i}", cpu=4) for i in range(3)]
    s = Scheduler(_config(slack=False), nodes)
    s.upsert_node(node("n1", cpu=4, health=NodeHealth.UNHEALTHY))
    s.cycle()
    assert _nominal(s) == 12_000


def test_a_job_as_large_as_the_full_quota_is_still_accepted_while_nodes_are_out() -> None:
    s = Scheduler(_config(), [node(f"n{i}", cpu=4) for i in range(3)])
    s.upsert_node(node("n1", cpu=4, health=NodeHealth.UNHEALTHY))
    s.cycle()
    s.check_feasible(job("big", "q", cpu=4, replicas=3))  # raises if refused


def test_a_queue_that_avoids_degraded_nodes_is_placed_on_healthy_ones_only() -> None:
    nodes = [node("warn", cpu=4, health=NodeHealth.DEGRADED), node("ok", cpu=4)]
    for avoid, expected in ((True, {"ok"}), (False, {"ok", "warn"})):
        s = Scheduler(_config(slack=False, avoid_degraded=avoid), nodes)
        for i in range(2):
            s.submit(job(f"j{i}", "q", cpu=4), priority=0, submitted_at=i)
        admitted = s.cycle().admissions
        assert {n for a in admitted for ps in a.pod_sets for n in ps.nodes} == expected


def test_avoiding_degraded_nodes_applies_to_a_queue_configured_later() -> None:
    nodes = [node("warn", cpu=4, health=NodeHealth.DEGRADED), node("ok", cpu=4)]
    s = Scheduler(_config(slack=False), nodes)
    s.set_config(_config(slack=False, avoid_degraded=True))
    for i in range(2):
        s.submit(job(f"j{i}", "q", cpu=4), priority=0, submitted_at=i)
    admitted = s.cycle().admissions
    assert {n for a in admitted for ps in a.pod_sets for n in ps.nodes} == {"ok"}
    s.upsert_node(node("warn", cpu=4))  # it recovers: the pending job goes there
    assert [tuple(a.pod_sets[0].nodes) for a in s.cycle().admissions] == [("warn",)]
