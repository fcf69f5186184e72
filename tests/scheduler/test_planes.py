"""Several compute planes (nodes labelled ``phalanx.dev/plane``): a gang never spans two,
and preemption takes its victims only in the plane where the preemptor will run."""

from __future__ import annotations

from collections import defaultdict

from phalanx.scheduler import PendingCode, Scheduler
from phalanx.scheduler.types import CycleResult
from phalanx.spec import Node, TopologyConstraint
from phalanx.spec.planes import PLANE_LABEL

from .strategies import (
    Driver,
    RandomPicker,
    Scenario,
    cluster_queue,
    flavor,
    job,
    make_config,
    node,
    random_scenario,
    replay,
)
from .test_properties import check_cycle, check_preemptors_admitted


def on_plane(plane: str, name: str, cpu: int) -> Node:
    return node(name, cpu=cpu, labels={PLANE_LABEL: plane})


def _admitted_nodes(result: CycleResult) -> dict[str, list[str]]:
    return {a.job: [n for ps in a.pod_sets for n in ps.nodes] for a in result.admissions}


def test_victims_that_only_free_quota_on_another_plane_are_not_taken() -> None:
    # Quota 8 CPU; "low" (priority 0) holds 4 on plane a, "mid" (50) holds 2 on plane b,
    # and "high" (100) needs 5 CPU in one pod: only b's 8-CPU node can ever hold it.
    # Preempting "low" would free the quota, but "low" runs on the other cluster.
    config = make_config(flavor("default"), cluster_queue(
        "q", {"default": {"cpu": 8}}, within="LowerPriority"))
    s = Scheduler(config, [on_plane("a", "a.n1", 4), on_plane("b", "b.n1", 8)])
    s.submit(job("low", "q", cpu=4), priority=0, submitted_at=1)
    assert _admitted_nodes(s.cycle()) == {"low": ["a.n1"]}  # the tighter fit
    s.submit(job("mid", "q", cpu=2), priority=50, submitted_at=2)
    assert _admitted_nodes(s.cycle()) == {"mid": ["b.n1"]}
    s.submit(job("high", "q", cpu=5), priority=100, submitted_at=3)
    result = s.cycle()
    assert not result.preemptions, [p.victim for p in result.preemptions]
    reason = s.pending_reason("high")
    assert reason is not None and reason.code is not PendingCode.WAITING_FOR_PREEMPTED_PODS
    assert "one compute plane" in reason.message, reason.message


def test_the_plane_whose_victims_cost_least_is_chosen() -> None:
    # "high" fits either plane once that plane's job leaves; plane b's victim has the
    # lower priority, although plane a comes first by name.
    config = make_config(flavor("default"), cluster_queue(
        "q", {"default": {"cpu": 8}}, within="LowerPriority"))
    s = Scheduler(config, [on_plane("a", "a.n1", 4), on_plane("b", "b.n1", 4)])
    s.submit(job("on-a", "q", cpu=4), priority=50, submitted_at=1)
    assert _admitted_nodes(s.cycle()) == {"on-a": ["a.n1"]}
    s.submit(job("on-b", "q", cpu=4), priority=0, submitted_at=2)
    assert _admitted_nodes(s.cycle()) == {"on-b": ["b.n1"]}
    s.submit(job("high", "q", cpu=4), priority=100, submitted_at=3)
    assert [p.victim for p in s.cycle().preemptions] == ["on-b"]
    s.requeue("on-b")
    assert _admitted_nodes(s.cycle()) == {"high": ["b.n1"]}


def test_a_gang_preempts_within_the_plane_it_lands_on() -> None:
    # A 2-pod gang of 4 CPU each: plane a has one 4-CPU node (never enough), plane b two.
    # The cheapest victims by priority are on a; the gang can only run on b.
    config = make_config(flavor("default"), cluster_queue(
        "q", {"default": {"cpu": 12}}, within="LowerPriority"))
    nodes = [on_plane("a", "a.n1", 4), on_plane("b", "b.n1", 4), on_plane("b", "b.n2", 4)]
    s = Scheduler(config, nodes)
    s.submit(job("a-low", "q", cpu=4), priority=0, submitted_at=1)
    assert _admitted_nodes(s.cycle()) == {"a-low": ["a.n1"]}
    s.submit(job("b-mid", "q", cpu=4), priority=50, submitted_at=2)
    s.submit(job("b-mid2", "q", cpu=4), priority=50, submitted_at=3)
    placed = _admitted_nodes(s.cycle())
    assert sorted(placed["b-mid"] + placed["b-mid2"]) == ["b.n1", "b.n2"]
    s.submit(job("gang", "q", cpu=4, replicas=2), priority=100, submitted_at=4)
    victims = sorted(p.victim for p in s.cycle().preemptions)
    assert victims == ["b-mid", "b-mid2"]
    for name in victims:
        s.requeue(name)
    assert sorted(_admitted_nodes(s.cycle())["gang"]) == ["b.n1", "b.n2"]


def test_one_plane_keeps_preempting_across_nodes_as_before() -> None:
    # The same shape as the first test on one cluster: the low job goes.
    config = make_config(flavor("default"), cluster_queue(
        "q", {"default": {"cpu": 8}}, within="LowerPriority"))
    s = Scheduler(config, [on_plane("a", "a.n1", 4), on_plane("a", "a.n2", 8)])
    s.submit(job("low", "q", cpu=4), priority=0, submitted_at=1)
    assert _admitted_nodes(s.cycle()) == {"low": ["a.n1"]}
    s.submit(job("mid", "q", cpu=2), priority=50, submitted_at=2)
    assert _admitted_nodes(s.cycle()) == {"mid": ["a.n2"]}
    s.submit(job("high", "q", cpu=5), priority=100, submitted_at=3)
    assert [p.victim for p in s.cycle().preemptions] == ["low"]


def test_a_required_level_whose_values_repeat_across_planes_is_met_within_one() -> None:
    # Both clusters label their nodes zone=z1: a 2-pod gang that requires one zone must not
    # take a node of each, though "zone z1" alone would hold it.
    config = make_config(flavor("default"), cluster_queue("q", {"default": {"cpu": 16}}))
    nodes = [node(f"{p}.n1", cpu=4, labels={PLANE_LABEL: p, "zone": "z1"}) for p in "ab"]
    s = Scheduler(config, nodes)
    s.submit(job("gang", "q", cpu=4, replicas=2, topology=TopologyConstraint(required="zone")),
             priority=0, submitted_at=1)
    assert not s.cycle().admissions
    reason = s.pending_reason("gang")
    assert reason is not None and reason.code is PendingCode.TOPOLOGY_UNSATISFIABLE, reason
    assert "within one zone of one compute plane" in reason.message, reason.message
    # A second node on plane b: now the gang fits there.
    s.upsert_node(node("b.n2", cpu=4, labels={PLANE_LABEL: "b", "zone": "z1"}))
    assert sorted(_admitted_nodes(s.cycle())["gang"]) == ["b.n1", "b.n2"]


def test_why_pending_names_a_cluster_that_takes_no_placements() -> None:
    # Plane b's worker is silent: its nodes are NotReady (unschedulable, with the reason).
    config = make_config(flavor("default"), cluster_queue("q", {"default": {"cpu": 64}}))
    silent = node("b.n1", cpu=8, cordoned=True, labels={PLANE_LABEL: "b"})
    silent.health_reasons = ["NotReady: compute plane b is disconnected (silent for 75s)"]
    s = Scheduler(config, [on_plane("a", "a.n1", 4), silent])
    s.submit(job("big", "q", cpu=6), priority=0, submitted_at=1)
    s.cycle()
    reason = s.pending_reason("big")
    assert reason is not None and reason.code is PendingCode.NO_NODE_FITS, reason
    assert "cluster b takes no placements (compute plane b is disconnected)" in reason.message
    assert "cluster a" not in reason.message, reason.message


# --------------------------------------------------------------------------- random sweep
def _two_planes(scenario: Scenario) -> Scenario:
    """The scenario with its nodes dealt over planes p0 and p1 by name."""
    def labelled(n: Node) -> Node:
        plane = f"p{int(n.name[1:]) % 2}"
        return n.model_copy(update={"labels": {**n.labels, PLANE_LABEL: plane}})
    events = [(e[0], labelled(e[1])) if e[0] == "add" else e for e in scenario.events]
    return Scenario(scenario.config, [labelled(n) for n in scenario.nodes], events)


def check_one_plane(driver: Driver, result: CycleResult) -> None:
    """Every gang on one plane; a preemptor's victims all on one plane, and once they have
    gone (nothing else having changed) the preemptor runs there."""
    def planes(job_name: str) -> set[str]:
        adm = driver.admitted[job_name]
        return {driver.nodes[n].labels[PLANE_LABEL]
                for ps in adm.pod_sets for n in ps.nodes if n in driver.nodes}
    for adm in result.admissions:
        assert len(planes(adm.job)) <= 1, f"{adm.job} spans planes"
    victims: dict[str, set[str]] = defaultdict(set)
    for pre in result.preemptions:
        victims[pre.preemptor] |= planes(pre.victim)
    for preemptor, where in victims.items():
        assert len(where) <= 1, f"{preemptor} preempted on planes {sorted(where)}"
    driver_victims = getattr(driver, "victim_planes", {})
    if len(driver.results) >= 2 and not driver.outside_events:
        for adm in result.admissions:
            before = driver_victims.get(adm.job)
            if before:
                assert planes(adm.job) <= before, (
                    f"{adm.job} preempted on {sorted(before)} but runs on "
                    f"{sorted(planes(adm.job))}")
    driver.victim_planes = dict(victims)  # type: ignore[attr-defined]


def test_victims_stay_on_the_preemptors_plane_over_seeded_scenarios() -> None:
    failures: list[str] = []
    preempted = 0
    for seed in range(600):
        scenario = _two_planes(random_scenario(RandomPicker(seed), max_events=80))
        driver = Driver.start(scenario.config, scenario.nodes)
        driver.on_cycle += [check_cycle, check_preemptors_admitted, check_one_plane]
        try:
            replay(driver, scenario.events)
        except AssertionError as exc:
            failures.append(f"seed {seed}: {str(exc)[:200]}")
        preempted += len(driver.preemptions)
    assert not failures, "\n".join(failures[:10])
    assert preempted > 50, f"only {preempted} preemptions: the sweep no longer tests much"
