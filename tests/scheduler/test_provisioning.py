"""Quota held while a gang's node pool is bought (scheduler/provisioning.py)."""

from __future__ import annotations

from hypothesis import HealthCheck, example, given
from hypothesis import strategies as st

from phalanx.errors import SpecError
from phalanx.scheduler import Scheduler
from phalanx.scheduler.provisioning import ProvisioningNeed, nodes_needed
from phalanx.scheduler.types import PendingCode
from phalanx.spec.config import QueueConfig, load_config_yaml
from phalanx.spec.provisioning import POOL_LABEL, RESERVED_FOR
from phalanx.spec.resources import JobSpec, Node, PodSet, Taint
from tests.explore import property_settings

CONFIG = """
kind: ResourceFlavor
name: onprem
nodeLabels: {pool: onprem}
---
kind: ResourceFlavor
name: burst
nodeLabels: {pool: burst}
provisioning: {provider: local, node: {cpu: "2"}}
---
kind: ResourceFlavor
name: spare
nodeLabels: {pool: spare}
provisioning: {provider: local, node: {cpu: "4"}, nodesPerPool: 2}
---
kind: ClusterQueue
name: team
resourceGroups:
- coveredResources: [cpu]
  flavors:
  - {name: onprem, resources: [{name: cpu, nominalQuota: "4"}]}
  - {name: burst, resources: [{name: cpu, nominalQuota: "8"}]}
  - {name: spare, resources: [{name: cpu, nominalQuota: "8"}]}
---
kind: LocalQueue
name: team
clusterQueue: team
"""


def config(text: str = CONFIG) -> QueueConfig:
    return QueueConfig().merged(load_config_yaml(text))


def onprem_node(name: str = "n0", cpu: str = "4") -> Node:
    return Node(name=name, labels={"pool": "onprem"}, allocatable={"cpu": cpu})


def pool_nodes(job: str, pool: str, count: int, cpu: str = "2", flavor: str = "burst"
               ) -> list[Node]:
    return [Node(name=f"{pool}-{i}", labels={"pool": flavor, RESERVED_FOR: job,
                                              POOL_LABEL: pool},
                 taints=[Taint(key=RESERVED_FOR, value=job)], allocatable={"cpu": cpu})
            for i in range(count)]


def job(name: str, replicas: int = 4, cpu: str = "1") -> JobSpec:
    return JobSpec(name=name, queue="team",
                   pod_sets=[PodSet(replicas=replicas, resources={"cpu": cpu})])


def used(s: Scheduler, flavor: str) -> int:
    (status,) = s.queue_status()
    return sum(u.used for u in status.usage if u.flavor == flavor)


def test_a_gang_that_fits_quota_but_no_node_holds_its_quota_and_asks_for_a_pool() -> None:
    s = Scheduler(config(), [onprem_node(cpu="1")])
    s.submit(job("train"), priority=0, submitted_at=1)
    result = s.cycle(now=10)
    assert result.admissions == []
    assert result.provisioning == [s.provisioning_holds()["train"]]
    need = result.provisioning[0]
    assert isinstance(need, ProvisioningNeed)
    assert (need.flavor, need.nodes) == ("burst", 2)  # 4 one-CPU pods on 2-CPU nodes
    assert used(s, "burst") == 4000  # held: counted as used
    reason = s.pending_reason("train")
    assert reason is not None and reason.code is PendingCode.PROVISIONING
    # Held, it is not asked about again.
    assert s.cycle(now=11).provisioning == []


def test_a_job_with_room_on_existing_nodes_is_admitted_there_and_holds_nothing() -> None:
    s = Scheduler(config(), [onprem_node(cpu="4")])
    s.submit(job("train"), priority=0, submitted_at=1)
    result = s.cycle(now=10)
    assert [a.job for a in result.admissions] == ["train"]
    assert result.provisioning == [] and s.provisioning_holds() == {}


def test_the_gang_is_placed_on_its_pool_once_ready_and_nobody_else_takes_those_nodes() -> None:
    s = Scheduler(config(), [onprem_node(cpu="1")])
    s.submit(job("train"), priority=0, submitted_at=1)
    s.cycle(now=10)
    nodes = pool_nodes("train", "train-1", 2)
    for node in nodes:
        s.upsert_node(node)
    s.submit(job("other", replicas=2), priority=100, submitted_at=2)
    result = s.cycle(now=11)
    assert result.admissions == []  # train's nodes are tainted for train: other holds too
    assert [n.job for n in result.provisioning] == ["other"]
    assert s.provisioning_ready("train", [n.name for n in nodes])
    result = s.cycle(now=12)
    (admission,) = [a for a in result.admissions if a.job == "train"]
    assert {n for ps in admission.pod_sets for n in ps.nodes} == {"train-1-0", "train-1-1"}
    assert set(s.provisioning_holds()) == {"other"}
    assert used(s, "burst") == 4000 + 2000  # train's admission and other's hold, once each


def test_a_released_hold_gives_its_quota_back_and_the_next_flavor_is_tried() -> None:
    s = Scheduler(config(), [onprem_node(cpu="1")])
    s.submit(job("train"), priority=0, submitted_at=1)
    s.cycle(now=10)
    assert s.release_provisioning("train", flavor="burst", until=100, reason="Stockout: none",
                                  every_job=True)
    assert used(s, "burst") == 0
    result = s.cycle(now=11)
    assert [(n.flavor, n.nodes) for n in result.provisioning] == [("spare", 2)]  # a slice of 2
    # The block ends: another job may ask for burst again.
    s.submit(job("later", replicas=2), priority=0, submitted_at=2)
    assert [n.flavor for n in s.cycle(now=101).provisioning] == ["burst"]


def test_when_every_flavor_is_blocked_the_reason_names_the_pools_tried() -> None:
    s = Scheduler(config(), [onprem_node(cpu="1")])
    s.submit(job("train"), priority=0, submitted_at=1)
    s.cycle(now=10)
    s.release_provisioning("train", flavor="burst", until=100, reason="train-1: Stockout")
    s.cycle(now=11)
    s.release_provisioning("train", flavor="spare", until=100, reason="train-2: Timeout")
    s.cycle(now=12)
    reason = s.pending_reason("train")
    assert reason is not None
    assert "burst: train-1: Stockout" in reason.message
    assert "spare: train-2: Timeout" in reason.message
    assert s.cycle(now=50).provisioning == []
    # The blocks end: the job is looked at again, with nothing else changed.
    assert [n.job for n in s.cycle(now=100).provisioning] == ["train"]


def test_a_removed_held_job_gives_its_quota_back() -> None:
    s = Scheduler(config(), [])
    s.submit(job("train"), priority=0, submitted_at=1)
    s.cycle(now=10)
    s.remove("train")
    assert used(s, "burst") == 0 and s.provisioning_holds() == {}


def test_a_new_configuration_keeps_the_hold() -> None:
    s = Scheduler(config(), [])
    s.submit(job("train"), priority=0, submitted_at=1)
    s.cycle(now=10)
    s.set_config(config())
    assert "train" in s.provisioning_holds() and used(s, "burst") == 4000


def test_create_pools_false_holds_nothing_and_says_why() -> None:
    s = Scheduler(config(CONFIG + "---\nkind: ProvisioningPolicy\ncreatePools: false\n"), [])
    s.submit(job("train"), priority=0, submitted_at=1)
    assert s.cycle(now=10).provisioning == []
    reason = s.pending_reason("train")
    assert reason is not None and "createPools: false" in reason.message


def test_a_pod_larger_than_any_existing_node_is_accepted_when_a_pool_would_hold_it() -> None:
    s = Scheduler(config(), [onprem_node(cpu="1")])
    s.check_feasible(job("big", replicas=1, cpu="2"))  # a burst node has 2 CPUs
    s.check_feasible(job("bigger", replicas=1, cpu="4"))  # a spare node has 4
    try:
        s.check_feasible(job("huge", replicas=1, cpu="5"))
    except SpecError as exc:
        assert exc.field == "podSets[0].resources.cpu"
    else:
        raise AssertionError("a pod no node or pool could hold was accepted")


def test_nodes_needed_packs_pods_and_rounds_to_whole_slices() -> None:
    assert nodes_needed({"cpu": 2000}, {"cpu": 1000}, 4, None) == 2
    assert nodes_needed({"cpu": 2000}, {"cpu": 1000}, 5, None) == 3
    assert nodes_needed({"cpu": 2000}, {"cpu": 1000}, 5, 4) == 4
    assert nodes_needed({"cpu": 2000}, {"cpu": 3000}, 1, None) == 0
    assert nodes_needed({"cpu": 2000}, {"cpu": 500, "memory": 10}, 8, None) == 0


# --------------------------------------------------------------------------- properties
EVENTS = st.lists(st.one_of(
    st.tuples(st.just("submit"), st.integers(1, 6), st.sampled_from(["1", "2"])),
    st.tuples(st.just("cycle"), st.just(0), st.just("")),
    st.tuples(st.just("ready"), st.integers(0, 5), st.just("")),
    st.tuples(st.just("release"), st.integers(0, 5), st.sampled_from(["burst", "spare"])),
    st.tuples(st.just("finish"), st.integers(0, 5), st.just("")),
), max_size=40)


@property_settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(EVENTS)
# A pool that fails once Ready is given back with its quota; the job then asks for a pool
# of the next flavor (this model once kept the failed pool's nodes listed as the job's).
@example([("submit", 2, "2"), ("cycle", 0, ""), ("ready", 0, ""), ("release", 0, "burst"),
          ("cycle", 0, "")])
def test_quota_is_never_exceeded_and_no_job_holds_twice(events: list[tuple[str, int, str]]
                                                        ) -> None:
    s = Scheduler(config(), [onprem_node(cpu="2")])
    names: list[str] = []
    pools: dict[str, list[Node]] = {}
    deleting: list[Node] = []  # the nodes of failed pools
    now = 0.0
    for verb, number, extra in events:
        now += 1
        if verb == "submit":
            name = f"j{len(names)}"
            names.append(name)
            s.submit(job(name, replicas=number, cpu=extra), priority=0, submitted_at=now)
        elif verb == "cycle":
            result = s.cycle(now=now)
            admitted = {a.job for a in result.admissions}
            held = set(s.provisioning_holds())
            assert not admitted & held, "a job both admitted and holding"
            assert len({n.job for n in result.provisioning}) == len(result.provisioning)
            for need in result.provisioning:
                assert need.job not in pools, "a second pool for one job"
            placed = {n for a in result.admissions for ps in a.pod_sets for n in ps.nodes}
            assert not placed & {n.name for n in deleting}, "placed on a pool being deleted"
            for node in deleting:
                s.remove_node(node.name)
            deleting.clear()
        elif not names:
            continue
        else:
            name = names[number % len(names)]
            holds = s.provisioning_holds()
            if verb == "ready" and name in holds and name not in pools:
                need = holds[name]
                cpu = "2" if need.flavor == "burst" else "4"
                pools[name] = pool_nodes(name, f"{name}-1", need.nodes, cpu, need.flavor)
                for node in pools[name]:
                    s.upsert_node(node)
                s.provisioning_ready(name, [n.name for n in pools[name]])
            elif verb == "release":
                # The pool failed: as the provisioning controller does, the quota goes back
                # and the pool is deleted (its nodes stay listed until the next cycle is
                # over), so a pool asked for next is no second one.
                if s.release_provisioning(name, flavor=extra, until=now + 3, reason="x"):
                    deleting += pools.pop(name, [])
            elif verb == "finish":
                s.remove(name)
                for node in pools.pop(name, []):
                    s.remove_node(node.name)
        (status,) = s.queue_status()
        for usage in status.usage:
            assert usage.used <= usage.nominal, f"{usage.flavor} over its quota: {usage}"
        held_usage = sum(p.count * p.requests.get("cpu", 0)
                         for n in s.provisioning_holds().values() for p in n.pod_sets)
        assert held_usage <= sum(u.used for u in status.usage)


def test_a_job_that_holds_quota_for_a_pool_is_no_preemption_victim() -> None:
    """A deliberate difference from Kueue (docs/kueue-differences.md): a higher priority in
    the same queue, with withinClusterQueue LowerPriority, does not take a held job's quota."""
    text = CONFIG.replace("name: team\nresourceGroups:",
                          "name: team\npreemption: {withinClusterQueue: LowerPriority}\n"
                          "resourceGroups:")
    text = text.replace('{name: burst, resources: [{name: cpu, nominalQuota: "8"}]}',
                        '{name: burst, resources: [{name: cpu, nominalQuota: "4"}]}')
    text = text.replace('{name: spare, resources: [{name: cpu, nominalQuota: "8"}]}',
                        '{name: spare, resources: [{name: cpu, nominalQuota: "0"}]}')
    s = Scheduler(config(text), [onprem_node(cpu="1")])
    s.submit(job("low"), priority=0, submitted_at=1)
    s.cycle(now=10)
    assert set(s.provisioning_holds()) == {"low"}
    s.submit(job("high"), priority=100, submitted_at=2)
    result = s.cycle(now=11)
    assert result.preemptions == [] and result.provisioning == []
    assert set(s.provisioning_holds()) == {"low"}
    reason = s.pending_reason("high")
    assert reason is not None and reason.code is not PendingCode.PROVISIONING
