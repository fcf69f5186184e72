"""The simulator against outcomes worked out by hand, and its reproducibility.

Every expected number below follows from the scenario in the docstring of its
test (2 nodes x 8 GPUs); none is read back from a previous run.
"""

from __future__ import annotations

import random

import pytest

from phalanx.errors import SpecError
from phalanx.sim import FailureModel, NodeFailure, SimResult, TraceJob, simulate
from phalanx.spec import Node
from phalanx.spec.resources import HoldForLargeGangs
from tests.sim.conftest import FOUR_JOBS, RECLAIM, cohort_yaml, config, one_queue_yaml, trace


def times(result: object) -> dict[str, tuple[float | None, float | None]]:
    return {j.name: (j.first_admit, j.finish) for j in result.jobs}  # type: ignore[attr-defined]


@pytest.mark.parametrize("policy", ["config", "phalanx"])
def test_best_effort_fifo_four_jobs(two_nodes: list[Node], policy: str) -> None:
    """j1 (8 GPUs) starts at 0. j2 (16) cannot fit beside it and waits. BestEffortFIFO lets
    j3 (4) past j2 at 20 (runs 20-50); j4 (8) waits until j3 frees its node at 50 (50-90).
    j2 gets both nodes when j1 ends at 100 and runs until 150."""
    result = simulate(config(one_queue_yaml("BestEffortFIFO")), two_nodes, trace(FOUR_JOBS),
                      policy)
    assert times(result) == {"j1": (0, 100), "j2": (100, 150), "j3": (20, 50), "j4": (50, 90)}
    s = result.summary
    assert s["makespan"] == 150
    # Delays 0, 90, 0, 20; JCTs 100, 140, 30, 60.
    assert s["queueing_delay"]["mean"] == pytest.approx(27.5)
    assert s["queueing_delay"]["max"] == 90
    assert s["jct"]["mean"] == pytest.approx(82.5)
    # Busy GPU-seconds 8x100 + 16x50 + 4x30 + 8x40 = 2040 of 16 x 150 = 2400.
    assert s["gpu_utilisation"] == pytest.approx(2040 / 2400)
    assert s["goodput"] == pytest.approx(2040 / 2400)
    assert (s["completed"], s["rejected"], s["unfinished"], s["preemptions"]) == (4, 0, 0, 0)
    # The step function between events: (time, busy GPUs, pending jobs).
    series = result.series
    assert list(zip(series.t, series.busy, series.pending, strict=True)) == [
        (0, 8, 0), (10, 8, 1), (20, 12, 1), (30, 12, 2), (50, 16, 1), (90, 8, 1),
        (100, 16, 0), (150, 0, 0),
    ]
    # Jobs wait during [10, 100): busy 8x10 + 12x30 + 16x40 + 8x10 = 1160 of 16 x 90.
    assert s["utilisation_while_waiting"] == pytest.approx(1160 / 1440)
    assert s["time_with_waiting_jobs"] == pytest.approx(90 / 150)
    team = result.teams[0]
    assert (team.cluster_queue, team.jobs, team.share, team.entitlement) == ("team-a", 4, 1, 1)
    assert team.gpu_hours == pytest.approx(2040 / 3600)


@pytest.mark.parametrize(("strategy", "policy"),
                         [("StrictFIFO", "config"), ("BestEffortFIFO", "fifo")])
def test_strict_fifo_four_jobs(two_nodes: list[Node], strategy: str, policy: str) -> None:
    """Under StrictFIFO nothing passes j2: j3 and j4 wait until j2 ends at 150, then both fit
    (4 + 8 GPUs) and run 150-180 and 150-190. The ``fifo`` policy rewrites the queue to that."""
    result = simulate(config(one_queue_yaml(strategy)), two_nodes, trace(FOUR_JOBS), policy)
    assert times(result) == {"j1": (0, 100), "j2": (100, 150), "j3": (150, 180),
                             "j4": (150, 190)}
    s = result.summary
    assert s["makespan"] == 190
    assert s["queueing_delay"]["mean"] == pytest.approx((0 + 90 + 130 + 120) / 4)
    assert s["jct"]["mean"] == pytest.approx((100 + 140 + 160 + 160) / 4)
    assert s["gpu_utilisation"] == pytest.approx(2040 / (16 * 190))


def test_reclaim_preemption_restart_from_zero(two_nodes: list[Node]) -> None:
    """phalanx policy: a1 (0) and a2 (1, borrowing team b's quota) fill the cluster. b1 asks
    for team b's nominal 8 GPUs at 10, so a2, the borrower admitted last, is preempted after
    9 s. b1 runs 10-40; a2 starts over at 40 and ends at 140. a2 keeps its first admission
    time, so its queueing delay stays 0."""
    result = simulate(config(cohort_yaml()), two_nodes, trace(RECLAIM), "phalanx")
    assert times(result) == {"a1": (0, 100), "a2": (1, 140), "b1": (10, 40)}
    assert {j.name: j.preemptions for j in result.jobs} == {"a1": 0, "a2": 1, "b1": 0}
    s = result.summary
    assert s["preemptions"] == 1
    assert s["wasted_gpu_hours"] == pytest.approx(8 * 9 / 3600)
    # Busy: 800 (a1) + 72 (a2's lost run) + 800 (a2 again) + 240 (b1) over 16 x 140.
    assert s["gpu_utilisation"] == pytest.approx(1912 / 2240)
    assert s["goodput"] == pytest.approx(1840 / 2240)
    teams = {t.cluster_queue: t for t in result.teams}
    assert teams["team-a"].preemptions == 1
    assert teams["team-a"].entitlement == teams["team-b"].entitlement == 0.5
    assert teams["team-a"].share == pytest.approx(1672 / 1912)
    assert teams["team-b"].share == pytest.approx(240 / 1912)


def test_reclaim_preemption_resume(two_nodes: list[Node]) -> None:
    """As above, but a2 keeps the 9 s it ran: 91 s left from 40, so it ends at 131."""
    result = simulate(config(cohort_yaml()), two_nodes, trace(RECLAIM), "phalanx",
                      restart="resume")
    assert times(result) == {"a1": (0, 100), "a2": (1, 131), "b1": (10, 40)}
    assert result.summary["wasted_gpu_hours"] == 0
    assert result.summary["gpu_utilisation"] == pytest.approx(1840 / (16 * 131))
    # Both of a2's runs are work kept: all 1840 GPU-seconds are goodput.
    assert result.summary["goodput"] == pytest.approx(1840 / (16 * 131))


def test_fifo_policy_neither_borrows_nor_preempts(two_nodes: list[Node]) -> None:
    """fifo: a2 may not borrow, so it waits for a1's quota (100-200); b1 runs in its own
    quota at once (10-40)."""
    result = simulate(config(cohort_yaml()), two_nodes, trace(RECLAIM), "fifo")
    assert times(result) == {"a1": (0, 100), "a2": (100, 200), "b1": (10, 40)}
    s = result.summary
    assert (s["preemptions"], s["makespan"]) == (0, 200)
    assert s["queueing_delay"]["mean"] == pytest.approx(99 / 3)
    assert s["gpu_utilisation"] == pytest.approx(1840 / 3200)


def test_queues_as_written_borrow_without_reclaiming(two_nodes: list[Node]) -> None:
    """The queues file has no reclaimWithinCohort, so a2 borrows (1-101) and b1 waits for
    free GPUs at 100 instead of preempting it."""
    result = simulate(config(cohort_yaml()), two_nodes, trace(RECLAIM), "config")
    assert times(result) == {"a1": (0, 100), "a2": (1, 101), "b1": (100, 130)}
    assert result.summary["preemptions"] == 0


@pytest.mark.parametrize(("restart", "finish", "busy", "capacity"), [
    # restart: 800 (other job) + 240 (lost) + 800 (again); capacity 16 x 180 - 8 x 50.
    ("restart", 180, 1840, 2480),
    # resume: 70 s left at 80; 800 + 240 + 560 over 16 x 150 - 8 x 50.
    ("resume", 150, 1600, 2000),
])
def test_node_failure_evicts_and_requeues(two_nodes: list[Node], restart: str, finish: float,
                                          busy: float, capacity: float) -> None:
    """Two 8-GPU jobs of 100 s fill both nodes at 0. gpu-0 fails at 30 for 50 s: its job is
    evicted and can only run again when gpu-0 is back at 80 (the other node is busy)."""
    failures = FailureModel(schedule=[NodeFailure(30, "gpu-0", 50)])
    jobs = trace("submit,duration,gpus,team,name\n0,100,8,team-a,j1\n0,100,8,team-a,j2\n")
    result = simulate(config(one_queue_yaml()), two_nodes, jobs, restart=restart,  # type: ignore[arg-type]
                      failures=failures)
    evicted = [j for j in result.jobs if j.evictions]
    kept = [j for j in result.jobs if not j.evictions]
    assert len(evicted) == len(kept) == 1
    assert (evicted[0].first_admit, evicted[0].finish, evicted[0].evictions) == (0, finish, 1)
    assert (kept[0].first_admit, kept[0].finish) == (0, 100)
    s = result.summary
    assert (s["node_failures"], s["evictions"], s["makespan"]) == (1, 1, finish)
    assert s["gpu_utilisation"] == pytest.approx(busy / capacity)
    cap = dict(zip(result.series.t, result.series.capacity, strict=True))
    assert (cap[0], cap[30], cap[80]) == (16, 8, 16)


def synthetic(n: int, seed: int) -> list[TraceJob]:
    """A busy three-team trace: many arrivals at the same instants, gangs up to a whole node."""
    rng = random.Random(seed)
    jobs = []
    for i in range(n):
        jobs.append(TraceJob(f"s{i}", float(rng.randrange(0, 4000, 20)),
                             float(rng.randrange(10, 600)), rng.choice([1, 1, 2, 4, 8]),
                             rng.choice(["team-a", "team-b", "team-c"]), row=i + 2))
    return sorted(jobs, key=lambda j: (j.submit, j.row))


def three_teams() -> str:
    from tests.sim.conftest import FLAVOR, cluster_queue

    return (FLAVOR + "---\nkind: Cohort\nname: lab\n---\n"
            + "---\n".join(cluster_queue(t, n, cohort="lab")
                           for t, n in (("team-a", 16), ("team-b", 8), ("team-c", 8))))


@pytest.mark.parametrize("policy", ["phalanx", "fifo"])
def test_same_trace_twice_same_result(policy: str) -> None:
    from phalanx.sim import racked_nodes

    jobs = synthetic(400, seed=11)
    nodes = racked_nodes(4, 8, 2)
    cfg = config(three_teams())
    failures = FailureModel(rate_per_day=20, repair_seconds=300, seed=5)
    first = simulate(cfg, nodes, jobs, policy, failures=failures)
    second = simulate(cfg, nodes, list(jobs), policy, failures=failures)
    assert first.fingerprint() == second.fingerprint()
    assert first.summary["completed"] == 400
    assert first.summary["node_failures"] > 0
    if policy == "phalanx":
        assert first.summary["preemptions"] > 0
    else:
        assert first.summary["preemptions"] == 0
    # Another failure seed is another history: the fingerprint does see the difference.
    other = simulate(cfg, nodes, jobs, policy,
                     failures=FailureModel(rate_per_day=20, repair_seconds=300, seed=6))
    assert other.fingerprint() != first.fingerprint()


def test_borrowing_and_preemption_beat_strict_fifo_on_a_busy_trace() -> None:
    from phalanx.sim import racked_nodes

    jobs = synthetic(400, seed=3)
    nodes = racked_nodes(4, 8, 2)
    cfg = config(three_teams())
    fifo = simulate(cfg, nodes, jobs, "fifo").summary
    phalanx = simulate(cfg, nodes, jobs, "phalanx").summary
    assert phalanx["queueing_delay"]["mean"] < fifo["queueing_delay"]["mean"]
    assert phalanx["makespan"] <= fifo["makespan"]
    for s in (fifo, phalanx):
        # Every job ran once to completion: busy time covers at least all the trace's work.
        assert s["completed"] == 400
        work = sum(j.gpu_seconds for j in jobs)
        assert s["goodput"] * s["gpus"] * s["makespan"] == pytest.approx(work)


def test_job_too_big_for_its_quota_is_rejected_not_stuck(two_nodes: list[Node]) -> None:
    """Under fifo team a can never hold more than its nominal 8 GPUs: a 16-GPU job is reported
    rejected with the scheduler's reason, and the rest of the trace still runs."""
    jobs = trace("submit,duration,gpus,team,name\n0,10,16,team-a,big\n5,10,8,team-b,small\n")
    result = simulate(config(cohort_yaml()), two_nodes, jobs, "fifo")
    by_name = {j.name: j for j in result.jobs}
    assert "can never get more than 8" in by_name["big"].rejected
    assert by_name["big"].first_admit is None
    assert (by_name["small"].first_admit, by_name["small"].finish) == (5, 15)
    assert (result.summary["rejected"], result.summary["completed"]) == (1, 1)
    # With borrowing the same job fits the cohort and runs.
    assert simulate(config(cohort_yaml()), two_nodes, jobs, "phalanx").summary["rejected"] == 0


def test_unknown_team_names_row_and_column(two_nodes: list[Node]) -> None:
    jobs = trace("submit,duration,gpus,team\n0,10,1,team-a\n3,10,1,team-z\n")
    with pytest.raises(SpecError) as err:
        simulate(config(one_queue_yaml()), two_nodes, jobs)
    assert err.value.field == "trace row 3, column team"
    assert "team-a" in (err.value.fix or "")


def test_gangs_split_into_node_sized_pods(two_nodes: list[Node]) -> None:
    from phalanx.sim import Simulator

    sim = Simulator(config(one_queue_yaml()), two_nodes, trace(FOUR_JOBS))
    assert [sim.pods_for(g) for g in (1, 4, 8, 12, 16)] == [(1, 1), (1, 4), (1, 8), (2, 6),
                                                            (2, 8)]


def test_bad_arguments() -> None:
    nodes = [Node.model_validate({"name": "cpu-only", "allocatable": {"cpu": 8}})]
    with pytest.raises(SpecError) as err:
        simulate(config(one_queue_yaml()), nodes, trace(FOUR_JOBS))
    assert err.value.field == "nodes"
    with pytest.raises(SpecError) as err:
        simulate(config(one_queue_yaml()), nodes, trace(FOUR_JOBS), "lifo")
    assert err.value.field == "--policy"


def test_periodic_scheduling_defers_cycles_to_the_next_tick(two_nodes: list[Node]) -> None:
    """A cycle every 15 s: j1 arrives at 0 (a tick) and starts at once. j3's arrival at 20 is
    seen at 30, with j4 (arriving at 30): j3 runs 30-60, j4 waits until the cycle at 60
    (j3 ended exactly then) and runs 60-100. j1 and j4 end at 100, a tick after which the
    cycle at 105 starts j2 (105-155)."""
    result = simulate(config(one_queue_yaml()), two_nodes, trace(FOUR_JOBS), tick=15)
    assert times(result) == {"j1": (0, 100), "j2": (105, 155), "j3": (30, 60), "j4": (60, 100)}
    s = result.summary
    assert (s["makespan"], s["tick_seconds"]) == (155, 15)
    assert s["queueing_delay"]["mean"] == pytest.approx((0 + 95 + 10 + 30) / 4)
    # Finished jobs free their GPUs at their own time, not at the tick.
    assert s["gpu_utilisation"] == pytest.approx(2040 / (16 * 155))
    # Cycles ran at 0, 15, 30, 60, 105 only.
    assert s["cycles"] == 5
    with pytest.raises(SpecError) as err:
        simulate(config(one_queue_yaml()), two_nodes, trace(FOUR_JOBS), tick=-1)
    assert err.value.field == "tick"


def test_reclaim_preemption_keeps_progress_up_to_the_last_checkpoint(
        two_nodes: list[Node]) -> None:
    """As the restart case, with a checkpoint every 4 s: a2 (started at 1) saved at 5 and 9,
    so at 10 it keeps 8 s and loses 1 s on 8 GPUs; 92 s are left at 40 and it ends at 132."""
    result = simulate(config(cohort_yaml()), two_nodes, trace(RECLAIM), "phalanx",
                      checkpoint_every=4)
    assert times(result) == {"a1": (0, 100), "a2": (1, 132), "b1": (10, 40)}
    assert result.summary["wasted_gpu_hours"] == pytest.approx(8 * 1 / 3600)
    assert result.summary["lost_to_preemption_gpu_hours"] == pytest.approx(8 * 1 / 3600)
    # Goodput is the work kept: a2's 8 saved seconds count with its last run (92 s), so it
    # is the utilisation less the second lost, not the last runs alone (1776 GPU-seconds).
    s = result.summary
    capacity = 16 * 132
    assert s["goodput"] == pytest.approx((800 + 800 + 240) / capacity)
    assert s["goodput"] == pytest.approx(s["gpu_utilisation"]
                                         - s["wasted_gpu_hours"] * 3600 / capacity)


def test_a_trace_job_checkpoint_interval_beats_the_runs(two_nodes: list[Node]) -> None:
    """a2 saves every 3 s itself (at 4, 7, 10 from its start at 1): at 10 it keeps 9 s."""
    jobs = trace(RECLAIM.replace("name\n", "name,checkpoint_every\n").replace(
        "a1\n", "a1,\n").replace("a2\n", "a2,3\n").replace("b1\n", "b1,\n"))
    result = simulate(config(cohort_yaml()), two_nodes, jobs, "phalanx", checkpoint_every=4)
    assert times(result) == {"a1": (0, 100), "a2": (1, 131), "b1": (10, 40)}
    assert result.summary["wasted_gpu_hours"] == 0


def test_min_runtime_protects_the_young_borrower_and_takes_the_older_job(
        two_nodes: list[Node]) -> None:
    """minRuntime 9.5 s: at 10 a2 has run 9 s and is protected; a1 has run 10 and is not, so
    b1 reclaims from a1, which runs again from 40 to 140 (a2 ends at 101)."""
    result = simulate(config(cohort_yaml()), two_nodes, trace(RECLAIM), "phalanx",
                      min_runtime=9.5)
    assert times(result) == {"a1": (0, 140), "a2": (1, 101), "b1": (10, 40)}
    assert {j.name: j.preemptions for j in result.jobs} == {"a1": 1, "a2": 0, "b1": 0}
    assert result.summary["wasted_gpu_hours"] == pytest.approx(8 * 10 / 3600)


def test_a_preemptor_held_back_by_min_runtime_runs_once_the_protection_ends(
        two_nodes: list[Node]) -> None:
    """minRuntime 15 s: both of team a's jobs are protected at 10. a1's protection ends at
    15 (no event happens then: the simulator wakes for it), so b1 reclaims from a1 at 15."""
    result = simulate(config(cohort_yaml()), two_nodes, trace(RECLAIM), "phalanx",
                      min_runtime=15)
    assert times(result) == {"a1": (0, 145), "a2": (1, 101), "b1": (15, 45)}


# Two 8-GPU nodes; a stream of 8-GPU jobs, one every 500 s for 1000 s each, keeps one node
# busy at every instant; "big" (16 GPUs) arrives at 1.
STREAM = "submit,duration,gpus,team,name\n0,1000,8,team-a,s-0\n1,100,16,team-a,big\n" + "".join(
    f"{500 * k},1000,8,team-a,s-{k}\n" for k in range(1, 6))


def test_reserve_after_keeps_the_room_a_big_gang_waits_for(two_nodes: list[Node]) -> None:
    jobs = trace(STREAM)
    plain = simulate(config(one_queue_yaml()), two_nodes, jobs)
    reserved = simulate(config(one_queue_yaml()), two_nodes, jobs, reserve_after=60.0)

    def start(result: SimResult, name: str) -> float | None:
        return next(o.first_admit for o in result.jobs if o.name == name)

    # Without: each arrival takes the node just freed, and big waits for the stream's end.
    assert start(plain, "big") == 3500
    # With: at 500 big holds a reservation (s-0 is expected to end at 3600, the default run
    # time, nothing having finished yet); s-1 would run past that, so it waits, and big
    # starts when s-0 ends at 1000.
    assert start(reserved, "big") == 1000
    assert start(reserved, "s-1") == 1100
    assert reserved.summary["reserve_after"] == 60.0


def test_reserve_after_that_no_job_reaches_changes_no_decision(two_nodes: list[Node]) -> None:
    jobs = trace(STREAM)
    plain = simulate(config(one_queue_yaml()), two_nodes, jobs)
    late = simulate(config(one_queue_yaml()), two_nodes, jobs, reserve_after=86400.0)
    assert late.fingerprint() == plain.fingerprint()


def test_hold_for_large_gangs_keeps_smaller_jobs_from_passing_a_big_head(
        two_nodes: list[Node]) -> None:
    jobs = trace(STREAM)
    plain = config(one_queue_yaml())
    cq = plain.cluster_queues["team-a"].model_copy(
        update={"hold_for_large_gangs": HoldForLargeGangs(min_gpus=9, after=60.0)})
    held = simulate(plain.merged([cq]), two_nodes, jobs)

    def start(name: str) -> float | None:
        return next(o.first_admit for o in held.jobs if o.name == name)

    # Without the setting big waits for the stream's end (3500, as above). With it, big (16
    # GPUs) has waited past 60 s when s-1 arrives at 500, so s-1 waits behind it; big starts
    # when s-0 ends at 1000, s-1 when big ends.
    assert start("big") == 1000
    assert start("s-1") == 1100


@pytest.mark.parametrize("enabled", [True, False])
def test_a_replay_leaves_the_garbage_collector_as_it_found_it(two_nodes: list[Node],
                                                               enabled: bool) -> None:
    """The replay pauses the collector (its passes over the scheduler's state free
    nothing) and gives it back as it was, with the same result either way."""
    import gc

    was = gc.isenabled()
    try:
        (gc.enable if enabled else gc.disable)()
        result = simulate(config(one_queue_yaml("BestEffortFIFO")), two_nodes,
                          trace(FOUR_JOBS), "phalanx")
        assert gc.isenabled() is enabled
    finally:
        (gc.enable if was else gc.disable)()
    assert times(result) == {"j1": (0, 100), "j2": (100, 150), "j3": (20, 50), "j4": (50, 90)}
