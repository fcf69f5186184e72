"""Room bookkeeping behind placement: per-class room kept up to date, quick failures."""

from __future__ import annotations

import gc
import random

import pytest

from phalanx.scheduler import Scheduler
from phalanx.scheduler.node_classes import fit_count
from phalanx.scheduler.placement import NodePool, Placement, PlacementFailure, PodGroup
from phalanx.scheduler.types import PendingCode
from phalanx.spec import TopologyConstraint

from .strategies import cluster_queue, flavor, job, make_config
from .test_placement import gpus, node, racked

SHAPES = [gpus(1, 1), gpus(1, 8), gpus(1, 2, cpu=16), gpus(1, 4)]


def brute_room(pool: NodePool, group: PodGroup) -> tuple[int, int]:
    """(pods, nodes with room) over every usable matching node, one node at a time."""
    pods = nodes = 0
    sig = pool.index.signature(group)
    for cls, pairs, _ in sig.flat:
        for free, names in cls.buckets.items():
            n = fit_count(free, pairs, 1 << 30)
            pods += n * len(names)
            nodes += len(names) if n else 0
    return pods, nodes


@pytest.mark.parametrize("seed", range(4))
def test_room_follows_reservations_releases_and_node_changes(seed: int) -> None:
    rng = random.Random(seed)
    nodes = racked(4, 4)
    pool = NodePool(nodes)
    held: list[str] = []
    for step in range(120):
        draw = rng.random()
        if draw < 0.55:
            group = rng.choice(SHAPES)
            sized = PodGroup(group.name, rng.randint(1, 6), 1, group.requests)
            result = pool.place([sized])
            if isinstance(result, Placement):
                name = f"j{step}"
                pool.reserve(name, [sized], result)
                held.append(name)
        elif draw < 0.85 and held:
            pool.release(held.pop(rng.randrange(len(held))))
        else:
            victim = rng.choice(nodes)
            pool.upsert(node(victim.name, labels=dict(victim.labels),
                             cordoned=rng.random() < 0.5))
        for shape in SHAPES:
            pods, with_room = brute_room(pool, shape)
            assert pool.room_bound(shape) == pods
            sig = pool.index.signature(shape)
            assert pool.explain.room(sig.flat, {}) == (with_room, pods)


@pytest.mark.parametrize("topology", [None, TopologyConstraint(required="rack"),
                                      TopologyConstraint(preferred="rack")])
def test_a_group_short_of_room_fails_the_same_under_any_topology(
        topology: TopologyConstraint | None) -> None:
    pool = NodePool(racked(2, 2))
    taken = pool.place([gpus(3, 8)])
    assert isinstance(taken, Placement)
    pool.reserve("big", [gpus(3, 8)], taken)
    result = pool.place([gpus(2, 8)], topology)
    assert isinstance(result, PlacementFailure)
    assert result.code == PendingCode.NO_NODE_FITS
    assert result.message == (
        "needs 2 pods x 8 nvidia.com/gpu; 1 of 4 matching nodes have room, for 1 pods")
    # Freed capacity counts: with "big" gone the gang fits again.
    freed = pool.place([gpus(2, 8)], topology, freed=pool.reserved("big"))
    assert isinstance(freed, Placement)


def test_failure_counts_follow_cordoned_nodes() -> None:
    nodes = [node(f"n{i}") for i in range(3)]
    pool = NodePool(nodes)
    group = gpus(4, 8)
    first = pool.place([group])
    assert isinstance(first, PlacementFailure)
    assert "3 of 3 matching nodes have room, for 3 pods" in first.message
    assert "cordoned" not in first.message
    pool.upsert(node("n1", cordoned=True))
    second = pool.place([group])
    assert isinstance(second, PlacementFailure)
    assert "2 of 3 matching nodes have room, for 2 pods (1 cordoned)" in second.message
    pool.upsert(node("n1"))
    pool.remove("n2")
    third = pool.place([group])
    assert isinstance(third, PlacementFailure)
    assert "2 of 2 matching nodes have room, for 2 pods" in third.message
    assert "cordoned" not in third.message


@pytest.mark.parametrize("enabled", [True, False])
def test_a_cycle_leaves_the_collector_as_it_found_it(enabled: bool) -> None:
    config = make_config(flavor("default"), cluster_queue("team", {"default": {"cpu": 4}}))
    scheduler = Scheduler(config, [])
    scheduler.submit(job("a", "team"), priority=0, submitted_at=1.0)
    was = gc.isenabled()
    try:
        if enabled:
            gc.enable()
        else:
            gc.disable()
        scheduler.cycle()
        assert gc.isenabled() is enabled
    finally:
        if was:
            gc.enable()
        else:
            gc.disable()


@pytest.mark.parametrize("seed", range(6))
def test_one_group_domain_order_with_freed_nodes_matches_the_general_ranking(seed: int) -> None:
    """The preemption search's ranking of racks (freed nodes count as room) is the general
    ranking, computed from cached lists plus the few racks with freed nodes."""
    rng = random.Random(seed)
    pool = NodePool(racked(6, 4))
    for i in range(rng.randrange(5, 30)):  # uneven racks: some full, some partly free
        group = rng.choice(SHAPES)
        result = pool.place([group])
        if isinstance(result, Placement):
            pool.reserve(f"j{i}", [group], result)
    jobs = [f"j{i}" for i in range(30) if pool.holdings(f"j{i}")]
    compared = 0
    for _ in range(40):
        count = rng.randrange(1, 9)
        group = gpus(count, rng.choice([1, 2, 4, 8]), min_count=rng.randrange(1, count + 1))
        freed: dict[str, dict[str, int]] = {}
        for job_name in rng.sample(jobs, min(len(jobs), rng.randrange(0, 4))):
            for name, held in pool.holdings(job_name).items():
                into = freed.setdefault(name, {})
                for res, amount in held.items():
                    into[res] = into.get(res, 0) + amount
        sig = pool.index.signature(group)
        overlay = pool.index.freed_overlay(freed)
        racks = pool.domains.freed(overlay, "rack")
        for prune in (True, False):
            fast = pool.domains.rank([group], [sig], "rack", overlay, racks, prune=prune)
            general = pool.domains.general([group], [sig], "rack", racks, prune=prune)
            assert fast == general
            compared += bool(freed)
    assert compared  # some comparisons had freed nodes


def test_a_gang_that_did_not_fit_is_answered_again_until_capacity_changes() -> None:
    pool = NodePool(racked(1, 2))  # 16 GPUs
    small, big = gpus(1, 8), gpus(2, 8)
    pool.reserve("a", [small], placed_on(pool, small))
    first = pool.place([big])
    assert isinstance(first, PlacementFailure)
    assert pool.place([big]) is first  # nothing changed: the same answer, not re-walked
    pool.release("a")
    assert isinstance(pool.place([big]), Placement)  # released: looked at afresh
    pool.reserve("b", [small], placed_on(pool, small))
    again = pool.place([big])
    assert isinstance(again, PlacementFailure) and again is not first


def placed_on(pool: NodePool, group: PodGroup) -> Placement:
    result = pool.place([group])
    assert isinstance(result, Placement)
    return result
