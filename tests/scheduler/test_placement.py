"""Node placement of gangs: eligibility, packing, all-or-nothing, partial counts, topology."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import HealthCheck, given
from hypothesis import strategies as st

from phalanx.scheduler.placement import NodePool, Placement, PlacementFailure, PodGroup
from phalanx.scheduler.types import PendingCode
from phalanx.spec import GPU, Node, Taint, Toleration, TopologyConstraint
from phalanx.spec.resources import NodeHealth
from tests.explore import property_settings

UNIT = 1000


def node(name: str, gpus: int = 8, *, cpu: int = 64, pods: int | None = None,
         labels: dict[str, str] | None = None, taints: list[Taint] | None = None,
         cordoned: bool = False, health: str = "healthy") -> Node:
    allocatable: dict[str, Any] = {"cpu": cpu, GPU: gpus}
    if pods is not None:
        allocatable["pods"] = pods
    return Node(name=name, labels=labels or {}, taints=taints or [], allocatable=allocatable,
                unschedulable=cordoned, health=NodeHealth(health))


def racked(racks: int, per_rack: int, gpus: int = 8) -> list[Node]:
    return [
        node(f"r{r}-n{i}", gpus, labels={"rack": f"r{r}", "block": f"b{r // 2}"})
        for r in range(racks) for i in range(per_rack)
    ]


def gpus(count: int, per_pod: int, *, min_count: int | None = None, name: str = "worker",
         selector: dict[str, str] | None = None, tolerations: tuple[Toleration, ...] = (),
         cpu: int = 0) -> PodGroup:
    requests = [(GPU, per_pod * UNIT)] if per_pod else []
    if cpu:
        requests.append(("cpu", cpu * UNIT))
    return PodGroup(name=name, count=count, min_count=count if min_count is None else min_count,
                    requests=tuple(requests), node_selector=tuple((selector or {}).items()),
                    tolerations=tolerations)


def placed(result: Placement | PlacementFailure) -> Placement:
    assert isinstance(result, Placement), result
    return result


def failed(result: Placement | PlacementFailure) -> PlacementFailure:
    assert isinstance(result, PlacementFailure), result
    return result


def admit(pool: NodePool, job: str, groups: list[PodGroup],
          topology: TopologyConstraint | None = None) -> Placement:
    result = placed(pool.place(groups, topology))
    pool.reserve(job, groups, result)
    return result


# ---------------------------------------------------------------- table: where pods go
@dataclass
class Case:
    id: str
    nodes: list[Node]
    held: list[tuple[str, int]]  # (node, GPUs already reserved by some other job)
    groups: list[PodGroup]
    expect: list[list[str]] | None = None  # node per pod, per group
    topology: TopologyConstraint | None = None
    code: PendingCode | None = None
    message_has: list[str] = field(default_factory=list)


CASES = [
    Case("packs onto the most allocated node", [node("a"), node("b")], [("b", 4)],
         [gpus(1, 4)], [["b"]]),
    Case("several pods share a node before opening the next", [node("a"), node("b")], [],
         [gpus(3, 4)], [["a", "a", "b"]]),
    Case("ties broken by node name", [node("c"), node("a"), node("b")], [], [gpus(1, 8)],
         [["a"]]),
    Case("cordoned and unhealthy nodes take nothing",
         [node("a", cordoned=True), node("b", health="unhealthy"), node("c")], [],
         [gpus(2, 8)], code=PendingCode.NO_NODE_FITS,
         message_has=["needs 2 pods x 8 nvidia.com/gpu", "1 of 3 matching nodes have room",
                      "for 1 pods", "1 cordoned", "1 unhealthy"]),
    Case("degraded nodes are used last", [node("a", health="degraded"), node("b")],
         [("b", 4)], [gpus(2, 4)], [["b", "a"]]),
    Case("selector limits the nodes",
         [node("a", labels={"gpu": "a100"}), node("b", labels={"gpu": "h100"})], [],
         [gpus(1, 8, selector={"gpu": "h100"})], [["b"]]),
    Case("no node has the selected labels", [node("a", labels={"gpu": "a100"})], [],
         [gpus(1, 8, selector={"gpu": "h100"})], code=PendingCode.NO_NODE_FITS,
         message_has=["on nodes with gpu=h100", "none of the 1 nodes has those labels"]),
    Case("untolerated taint keeps pods off",
         [node("a", taints=[Taint(key="spot", value="true")])], [], [gpus(1, 8)],
         code=PendingCode.NO_NODE_FITS, message_has=["taints it does not tolerate",
                                                     "spot=true:NoSchedule"]),
    Case("tolerated taint lets pods on",
         [node("a", taints=[Taint(key="spot", value="true")])], [],
         [gpus(1, 8, tolerations=(Toleration(key="spot", operator="Exists"),))], [["a"]]),
    Case("PreferNoSchedule never blocks",
         [node("a", taints=[Taint(key="x", effect="PreferNoSchedule")])], [], [gpus(1, 8)],
         [["a"]]),
    Case("the pods resource caps pods per node", [node("a", pods=2), node("b", pods=2)], [],
         [gpus(3, 1)], [["a", "a", "b"]]),
    Case("a resource the node lacks counts as zero", [node("a", gpus=0)], [], [gpus(1, 1)],
         code=PendingCode.NO_NODE_FITS, message_has=["0 of 1 matching nodes have room"]),
    Case("nodes without a requested resource are named",
         [Node(name="cpu-only", allocatable={"cpu": 8}), node("a")], [("a", 8)], [gpus(1, 1)],
         code=PendingCode.NO_NODE_FITS,
         message_has=["0 of 2 matching nodes have room", "1 without nvidia.com/gpu"]),
    Case("pods without GPUs go to CPU-only nodes too",
         [Node(name="cpu-only", allocatable={"cpu": 8}), node("a", cpu=4)], [],
         [gpus(2, 0, cpu=4)], [["a", "cpu-only"]]),
    Case("partial admission takes as many as fit", [node("a"), node("b")], [("a", 8)],
         [gpus(6, 4, min_count=2)], [["b", "b"]]),
    Case("partial admission below the minimum fails", [node("a")], [],
         [gpus(6, 4, min_count=3)], code=PendingCode.NO_NODE_FITS,
         message_has=["needs at least 3 (up to 6) pods x 4 nvidia.com/gpu", "for 2 pods"]),
    Case("all or nothing across pod groups", [node("a", cpu=8), node("b", cpu=8)], [],
         [gpus(1, 0, name="launcher", cpu=16), gpus(2, 8, name="worker")],
         code=PendingCode.NO_NODE_FITS,
         message_has=["pod set launcher needs 1 pods x 16 cpu", "0 of 2 matching nodes"]),
    Case("groups that fit alone but not together", [node("a")], [],
         [gpus(1, 8, name="big"), gpus(1, 4, name="small")], code=PendingCode.NO_NODE_FITS,
         message_has=["pod set small", "not together with the job's other pod sets"]),
    Case("big pods go first so small ones fill the gaps", [node("a"), node("b")], [("a", 4)],
         [gpus(2, 2, name="small"), gpus(1, 8, name="big")], [["a", "a"], ["b"]]),
    Case("required topology packs into the fullest rack that fits", racked(3, 2),
         [("r0-n0", 8), ("r1-n0", 2), ("r2-n1", 1)], [gpus(2, 6)], [["r1-n0", "r1-n1"]],
         topology=TopologyConstraint(required="rack")),
    Case("required topology fails when no rack fits though the cluster does", racked(3, 2),
         [], [gpus(3, 8)], topology=TopologyConstraint(required="rack"),
         code=PendingCode.TOPOLOGY_UNSATISFIABLE,
         message_has=["within one rack", "room for 2 of the 3 pods", "as a whole fits 3"]),
    Case("required topology is NoNodeFits when the cluster cannot hold it", racked(2, 2), [],
         [gpus(5, 8)], topology=TopologyConstraint(required="rack"),
         code=PendingCode.NO_NODE_FITS, message_has=["4 of 4 matching nodes", "for 4 pods"]),
    Case("required topology ignores nodes without the label",
         [node("a"), node("b", labels={"rack": "r0"})], [], [gpus(2, 8)],
         topology=TopologyConstraint(required="rack"),
         code=PendingCode.TOPOLOGY_UNSATISFIABLE, message_has=["room for 1 of the 2"]),
    Case("required topology at block level spans racks", racked(4, 1), [("b0-n0", 0)],
         [gpus(2, 8)], [["r0-n0", "r1-n0"]], topology=TopologyConstraint(required="block")),
    Case("required topology with partial counts takes the roomiest rack", racked(2, 3),
         [("r0-n0", 8), ("r0-n1", 8)], [gpus(6, 8, min_count=2)],
         [["r1-n0", "r1-n1", "r1-n2"]], topology=TopologyConstraint(required="rack")),
    Case("required topology keeps every pod group in the same rack", racked(2, 2),
         [("r0-n0", 8)], [gpus(1, 8, name="launcher"), gpus(2, 4, name="worker")],
         [["r1-n0"], ["r1-n1", "r1-n1"]], topology=TopologyConstraint(required="rack")),
    Case("preferred topology keeps the gang in one rack when it can", racked(2, 2),
         [("r0-n0", 4)], [gpus(2, 8)], [["r1-n0", "r1-n1"]],
         topology=TopologyConstraint(preferred="rack")),
    Case("preferred topology falls back to the fewest racks", racked(3, 2),
         [("r0-n0", 8), ("r1-n0", 4)], [gpus(3, 8)], [["r2-n0", "r2-n1", "r0-n1"]],
         topology=TopologyConstraint(preferred="rack")),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_placement_table(case: Case) -> None:
    pool = NodePool(case.nodes)
    for i, (name, held) in enumerate(case.held):
        if held:
            pool.reserve(f"other-{i}", [gpus(1, held)], Placement((1,), ((name,),)))
    before = pool.usage()
    result = pool.place(case.groups, case.topology)
    assert pool.usage() == before, "place() must not reserve anything"
    if case.code is None:
        assert [list(n) for n in placed(result).nodes] == case.expect
        assert placed(result).counts == tuple(len(n) for n in case.expect or [])
    else:
        failure = failed(result)
        assert failure.code == case.code
        for text in case.message_has:
            assert text in failure.message, failure.message


# ---------------------------------------------------------------- packing over time
def test_packing_keeps_a_whole_node_free_for_a_big_gang() -> None:
    pool = NodePool([node("a"), node("b")])
    admit(pool, "small-1", [gpus(1, 4)])
    admit(pool, "small-2", [gpus(1, 4)])
    # Spreading the two small pods would have left no node with 8 free GPUs.
    assert placed(pool.place([gpus(1, 8)])).nodes == (("b",),)


def test_reserve_release_and_usage() -> None:
    pool = NodePool([node("a", pods=110), node("b")])
    groups = [gpus(2, 4, cpu=1)]
    placement = admit(pool, "job", groups)
    assert placement.nodes == (("a", "a"),)
    assert pool.reserved("job") == {"a": {GPU: 8000, "cpu": 2000, "pods": 2000}}
    assert pool.usage() == {"a": {GPU: 8000, "cpu": 2000, "pods": 2000}}
    pool.release("job")
    pool.release("job")
    assert pool.usage() == {} and pool.reserved("job") == {}
    assert placed(pool.place([gpus(2, 8)])).counts == (2,)


def test_reserve_rejects_a_placement_of_another_shape() -> None:
    pool = NodePool([node("a")])
    with pytest.raises(ValueError, match="2 pod groups but 1"):
        pool.reserve("job", [gpus(1, 1)], Placement((1, 1), (("a",), ("a",))))


def test_pod_group_rejects_min_above_count() -> None:
    with pytest.raises(ValueError, match="min_count 3 must be between 0 and count 2"):
        gpus(2, 1, min_count=3)


def test_node_update_keeps_reservations() -> None:
    pool = NodePool([node("a"), node("b")])
    admit(pool, "job", [gpus(1, 6)])
    pool.upsert(node("a", cordoned=True))
    assert pool.usage()["a"][GPU] == 6000
    assert placed(pool.place([gpus(1, 2)])).nodes == (("b",),)
    pool.upsert(node("a"))
    assert placed(pool.place([gpus(1, 2)])).nodes == (("a",),), "free capacity survives"
    pool.remove("a")
    assert pool.reserved("job") == {"a": {GPU: 6000, "pods": 1000}}
    assert [n.name for n in pool.nodes()] == ["b"]
    pool.upsert(node("a"))
    assert failed(pool.place([gpus(2, 8)])).code == PendingCode.NO_NODE_FITS
    pool.release("job")
    assert placed(pool.place([gpus(2, 8)])).counts == (2,)


def test_freed_capacity_is_a_what_if() -> None:
    pool = NodePool([node("a"), node("b")])
    admit(pool, "victim", [gpus(2, 8)])
    assert failed(pool.place([gpus(1, 8)])).code == PendingCode.NO_NODE_FITS
    freed = pool.reserved("victim")
    assert placed(pool.place([gpus(1, 8)], freed=freed)).nodes == (("a",),)
    half = {"b": {GPU: 8000, "pods": 1000}}
    assert placed(pool.place([gpus(1, 8)], freed=half)).nodes == (("b",),)
    assert failed(pool.place([gpus(2, 8)], freed=half)).code == PendingCode.NO_NODE_FITS
    assert pool.usage() == freed, "freed capacity is for one call only"


def test_freed_capacity_counts_under_required_topology() -> None:
    pool = NodePool(racked(2, 2))
    admit(pool, "victim", [gpus(2, 8)], TopologyConstraint(required="rack"))
    admit(pool, "other", [gpus(2, 8)], TopologyConstraint(required="rack"))
    freed = pool.reserved("victim")
    result = placed(pool.place([gpus(2, 8)], TopologyConstraint(required="rack"), freed=freed))
    assert sorted(result.nodes[0]) == sorted(freed)


def test_fits_ever_looks_at_allocatable_not_free() -> None:
    pool = NodePool([node("a", cordoned=True), node("b", gpus=4, labels={"gpu": "a100"})])
    admit(pool, "job", [gpus(1, 4, selector={"gpu": "a100"})])
    assert pool.fits_ever(gpus(1, 8))  # the cordoned node could take it one day
    assert pool.fits_ever(gpus(1, 4, selector={"gpu": "a100"}))
    assert not pool.fits_ever(gpus(1, 8, selector={"gpu": "a100"}))
    assert not pool.fits_ever(gpus(1, 9))


def test_same_nodes_in_any_order_give_the_same_answer() -> None:
    nodes = racked(4, 4)
    forward, backward = NodePool(nodes), NodePool(reversed(nodes))
    for i, pool in enumerate((forward, backward)):
        pool.reserve(f"x{i}", [gpus(1, 3)], Placement((1,), (("r2-n1",),)))
    groups = [gpus(5, 2, name="a"), gpus(3, 8, name="b")]
    for topology in (None, TopologyConstraint(required="rack"),
                     TopologyConstraint(preferred="block")):
        assert forward.place(groups, topology) == backward.place(groups, topology)


# ---------------------------------------------------------------- properties
@st.composite
def clusters(draw: st.DrawFn) -> list[Node]:
    count = draw(st.integers(1, 10))
    out = []
    for i in range(count):
        out.append(node(
            f"n{i}",
            gpus=draw(st.sampled_from([0, 4, 8])),
            cpu=draw(st.sampled_from([8, 32])),
            pods=draw(st.sampled_from([None, 2, 110])),
            labels={"rack": f"r{draw(st.integers(0, 2))}"} if draw(st.booleans()) else {},
            cordoned=draw(st.integers(0, 9)) == 0,
            health=draw(st.sampled_from(["healthy"] * 6 + ["degraded", "unhealthy"])),
        ))
    return out


@st.composite
def gangs(draw: st.DrawFn) -> tuple[list[PodGroup], TopologyConstraint | None]:
    groups = []
    for g in range(draw(st.integers(1, 3))):
        count = draw(st.integers(1, 6))
        groups.append(gpus(count, draw(st.sampled_from([0, 1, 2, 4, 8])),
                           min_count=draw(st.integers(1, count)), name=f"g{g}",
                           cpu=draw(st.sampled_from([0, 1, 8]))))
    topology = draw(st.sampled_from([None, TopologyConstraint(required="rack"),
                                     TopologyConstraint(preferred="rack")]))
    return groups, topology


def _fits_node_by_node(pool: NodePool, nodes: list[Node], group: PodGroup) -> int:
    """Reference count: pods of one group that fit, computed pod by pod on each node."""
    usage = pool.usage()
    total = 0
    for n in nodes:
        if n.unschedulable or n.health == NodeHealth.UNHEALTHY:
            continue
        free = {r: a - usage.get(n.name, {}).get(r, 0) for r, a in n.allocatable.items()}
        need = dict(group.requests)
        if "pods" in free:
            need["pods"] = 1000
        if any(free.get(r, 0) < a for r, a in need.items()):
            continue
        total += min(free.get(r, 0) // a for r, a in need.items()) if need else group.count
    return total


@property_settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters(), st.lists(gangs(), min_size=1, max_size=8), st.randoms())
def test_random_gangs_never_overcommit(nodes: list[Node],
                                       jobs: list[tuple[list[PodGroup], Any]],
                                       rnd: Any) -> None:
    pool = NodePool(nodes)
    by_name = {n.name: n for n in nodes}
    for j, (groups, topology) in enumerate(jobs):
        before = pool.usage()
        if len(groups) == 1 and topology is None:
            expected = _fits_node_by_node(pool, nodes, groups[0])
        result = pool.place(groups, topology)
        assert pool.place(groups, topology) == result, "place() is deterministic"
        assert pool.usage() == before, "place() reserves nothing"
        if isinstance(result, PlacementFailure):
            assert result.code in (PendingCode.NO_NODE_FITS, PendingCode.TOPOLOGY_UNSATISFIABLE)
            assert result.message.startswith(("needs", "pod set"))
            if len(groups) == 1 and topology is None:
                assert expected < groups[0].min_count
            continue
        for group, count, names in zip(groups, result.counts, result.nodes, strict=True):
            assert group.min_count <= count <= group.count and len(names) == count
            for name in names:
                assert not by_name[name].unschedulable
                assert by_name[name].health != NodeHealth.UNHEALTHY
        if len(groups) == 1 and topology is None:
            assert result.counts[0] == min(groups[0].count, expected), "partial count maximal"
        if topology is not None and topology.required:
            racks = {by_name[n].labels.get("rack") for names in result.nodes for n in names}
            assert len(racks) == 1 and None not in racks
        pool.reserve(f"job-{j}", groups, result)
        if len(groups) == 1 and topology is None:
            again = pool.place(groups, freed=pool.reserved(f"job-{j}"))
            assert isinstance(again, Placement), "freeing a job's pods makes room for it again"
            assert again.counts[0] >= result.counts[0]
        for name, used in pool.usage().items():
            for resource, amount in used.items():
                allocatable = by_name[name].allocatable
                if resource == "pods" and "pods" not in allocatable:
                    continue
                assert amount <= allocatable.get(resource, 0), (name, resource)
        if rnd.random() < 0.3:
            pool.release(f"job-{rnd.randrange(j + 1)}")


def test_freed_capacity_counts_under_preferred_topology_in_a_full_rack() -> None:
    # Every rack is full; what a victim would free is the only room, in a rack that has
    # none without it. A preferred topology must still spill onto it.
    pool = NodePool(racked(2, 1))
    whole = gpus(1, 8)
    admit(pool, "a", [whole])
    admit(pool, "b", [whole])
    freed = pool.reserved("a")
    two = gpus(2, 4)
    result = placed(pool.place([two], TopologyConstraint(preferred="rack"), freed=freed))
    assert set(result.nodes[0]) == set(freed)


def test_a_long_lived_pool_places_as_a_fresh_one_after_every_change() -> None:
    """Tables a pool keeps per version (each rack's room, in order) are brought up to date
    from the nodes that changed; a pool built anew with the same reservations never
    disagrees with it, whatever mix of reservations, releases, cordons and frees."""
    import random

    for seed in range(30):
        rng = random.Random(seed)
        nodes = racked(racks=6, per_rack=4)
        pool = NodePool(nodes)
        held: dict[str, tuple[list[PodGroup], Placement]] = {}
        current = {n.name: n for n in nodes}
        probes = [([gpus(c, p)], TopologyConstraint(required=level))
                  for c, p in ((1, 8), (2, 4), (4, 8), (3, 2)) for level in ("rack", "block")]
        probes.append(([gpus(2, 8)], TopologyConstraint(preferred="rack")))
        for step in range(40):
            draw = rng.random()
            if draw < 0.55:
                groups = [gpus(rng.choice((1, 2, 3, 4)), rng.choice((1, 2, 4, 8)))]
                level = rng.choice((None, "rack", "block"))
                topology = TopologyConstraint(required=level) if level else None
                result = pool.place(groups, topology)
                if isinstance(result, Placement):
                    name = f"j{step}"
                    pool.reserve(name, groups, result)
                    held[name] = (groups, result)
            elif draw < 0.85 and held:
                name = rng.choice(sorted(held))
                pool.release(name)
                del held[name]
            else:
                n = current[rng.choice(sorted(current))]
                current[n.name] = n.model_copy(update={"unschedulable": not n.unschedulable})
                pool.upsert(current[n.name])
            fresh = NodePool(current.values())
            for name, (groups, result) in held.items():
                fresh.reserve(name, groups, result)
            for groups, topology in probes:
                assert pool.place(groups, topology) == fresh.place(groups, topology), (
                    seed, step, groups, topology)
