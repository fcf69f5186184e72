"""Jobs that wait for other jobs (dependsOn): a real controller on the simulated plane,
stepped by the test, with its store on disk (restarts reopen it)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from phalanx.compute.simulated import SimulatedPlane
from phalanx.control import Controller
from phalanx.control.dependencies import WAITING, cycle_in
from phalanx.errors import SpecError
from phalanx.spec import JobSpec, Node
from phalanx.spec.base import validate
from phalanx.spec.resources import Dependency, LocalQueue
from phalanx.spec.status import JobStatus
from phalanx.store import Store

NODES = [Node(name="n0", allocatable={"cpu": 4000, "memory": 2 ** 34})]


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def job(name: str, *deps: Any, cpu: str = "1", run: str | None = "1s", exit_code: int = 0,
        queue: str = "default") -> JobSpec:
    env = {"PHALANX_SIM_EXIT_CODE": str(exit_code)}
    if run is not None:
        env["PHALANX_SIM_DURATION"] = run
    return validate(JobSpec, {
        "name": name, "queue": queue, "dependsOn": list(deps),
        "podSets": [{"resources": {"cpu": cpu}, "command": ["x"], "env": env}],
    })


@contextmanager
def controller(tmp_path: Path, clock: Clock) -> Iterator[Controller]:
    plane = SimulatedPlane(NODES, clock=clock)
    ctl = Controller(Store(f"sqlite:///{tmp_path / 'state.db'}"), plane, clock=clock)
    try:
        yield ctl
    finally:
        ctl.state.persist()
        ctl.store.close()
        plane.close()


def run_until(ctl: Controller, clock: Clock, done: Any, steps: int = 50) -> None:
    for _ in range(steps):
        ctl.step()
        if done():
            return
        clock.now += 0.5
    raise AssertionError("the condition was not reached")


def status(ctl: Controller, name: str) -> JobStatus:
    return ctl.service.get(name).status


def test_two_step_pipeline_runs_in_order(tmp_path: Path) -> None:
    clock = Clock()
    with controller(tmp_path, clock) as ctl:
        # Submitted dependent first: a submission may name its jobs in any order.
        ctl.service.submit_many([job("train", "prep"), job("prep", run="2s")])
        ctl.step()
        train = ctl.service.get("train")
        assert status(ctl, "prep") is JobStatus.STARTING
        assert train.status is JobStatus.QUEUED and train.pending_code == WAITING
        assert train.pending_message == "waiting for job prep to succeed"
        assert ctl.state.scheduler.pending_reason("train") is None  # not offered to it
        run_until(ctl, clock, lambda: status(ctl, "prep") is JobStatus.SUCCEEDED)
        prep_end = next(e.time for e in ctl.service.events_of("prep")
                        if e.reason == "Succeeded")
        run_until(ctl, clock, lambda: status(ctl, "train") is JobStatus.SUCCEEDED)
        train = ctl.service.get("train")
        assert train.admitted_at is not None and train.admitted_at >= prep_end
        reasons = [e.reason for e in ctl.service.events_of("train")]
        assert reasons.index("DependenciesMet") < reasons.index("Admitted")


def test_waiting_job_holds_no_quota_and_blocks_no_strict_fifo_head(tmp_path: Path) -> None:
    clock = Clock()
    with controller(tmp_path, clock) as ctl:
        default = ctl.service.config().cluster_queues["default"]
        ctl.service.apply_config([
            default.model_copy(update={"name": "strict", "queueing_strategy": "StrictFIFO"}),
            LocalQueue(name="strict", cluster_queue="strict"),
        ])
        ctl.service.submit(job("long", run=None, cpu="1"))
        # The whole node, waiting: were it offered to the scheduler it would be the head
        # that cannot fit and StrictFIFO would hold every job behind it.
        ctl.service.submit(job("big", "long", cpu="4", queue="strict"))
        ctl.service.submit(job("small", cpu="1", queue="strict"))
        run_until(ctl, clock, lambda: status(ctl, "small") is not JobStatus.QUEUED)
        assert status(ctl, "big") is JobStatus.QUEUED
        queues = {q.name: q for q in ctl.service.queues().cluster_queues}
        assert queues["strict"].pending == 0  # big is waiting, not pending in the scheduler


def test_failed_dependency_fails_its_dependents_and_finished_runs_anyway(
    tmp_path: Path,
) -> None:
    clock = Clock()
    with controller(tmp_path, clock) as ctl:
        ctl.service.submit_many([
            job("prep", exit_code=3), job("train", "prep"), job("evaluate", "train"),
            job("report", {"job": "prep", "condition": "Finished"}),
        ])
        run_until(ctl, clock, lambda: status(ctl, "report") is JobStatus.SUCCEEDED)
        assert status(ctl, "prep") is JobStatus.FAILED
        train, evaluate = ctl.service.get("train"), ctl.service.get("evaluate")
        assert train.status is evaluate.status is JobStatus.FAILED
        assert train.message.startswith("job prep it depends on ended Failed")
        assert evaluate.message.startswith("job train it depends on ended Failed")
        assert train.attempt == evaluate.attempt == 0  # never ran


def test_cancelled_dependency_fails_dependents(tmp_path: Path) -> None:
    clock = Clock()
    with controller(tmp_path, clock) as ctl:
        ctl.service.submit_many([job("prep", run=None), job("train", "prep")])
        ctl.step()
        ctl.service.cancel("prep")
        run_until(ctl, clock, lambda: status(ctl, "train") is JobStatus.FAILED)
        assert "ended Cancelled" in ctl.service.get("train").message


def test_cycle_and_unknown_dependency_are_refused_naming_the_field(tmp_path: Path) -> None:
    clock = Clock()
    with controller(tmp_path, clock) as ctl:
        with pytest.raises(SpecError) as cycle:
            ctl.service.submit_many([job("a", "c"), job("b", "a"), job("c", "b"),
                                     job("d")])
        assert cycle.value.field == "items[0].dependsOn[0]"
        assert "a -> c -> b -> a" in cycle.value.message
        with pytest.raises(SpecError) as unknown:
            ctl.service.submit_many([job("a"), job("b", "a", "nope")])
        assert unknown.value.field == "items[1].dependsOn[1]"
        assert "'nope' does not exist" in unknown.value.message
        with pytest.raises(SpecError) as single:
            ctl.service.submit(job("b", "nope"))
        assert single.value.field == "dependsOn[0]"
        assert ctl.store.list_jobs() == []  # all or nothing


def test_dependency_that_already_failed_is_refused_and_one_that_succeeded_is_met(
    tmp_path: Path,
) -> None:
    clock = Clock()
    with controller(tmp_path, clock) as ctl:
        ctl.service.submit_many([job("bad", exit_code=1), job("good")])
        run_until(ctl, clock, lambda: status(ctl, "bad").terminal
                  and status(ctl, "good").terminal)
        with pytest.raises(SpecError) as refused:
            ctl.service.submit(job("after-bad", "bad"))
        assert refused.value.field == "dependsOn[0]" and "Finished" in (refused.value.fix or "")
        ctl.service.submit(job("after-any", {"job": "bad", "condition": "Finished"}))
        ctl.service.submit(job("after-good", "good"))
        run_until(ctl, clock, lambda: status(ctl, "after-good") is JobStatus.SUCCEEDED
                  and status(ctl, "after-any") is JobStatus.SUCCEEDED)


def test_restart_keeps_waiting_jobs_waiting_and_releases_them_later(tmp_path: Path) -> None:
    clock = Clock()
    with controller(tmp_path, clock) as ctl:
        default = ctl.service.config().cluster_queues["default"]
        ctl.service.apply_config([
            default.model_copy(update={"name": "held", "stop_policy": "Hold"}),
            LocalQueue(name="held", cluster_queue="held"),
        ])
        ctl.service.submit_many([job("prep", queue="held"), job("train", "prep"),
                                 job("other", run=None)])
        ctl.step()
    with controller(tmp_path, clock) as ctl:  # a new control plane on the same store
        ctl.step()
        train = ctl.service.get("train")
        assert train.status is JobStatus.QUEUED and train.pending_code == WAITING
        assert "train" not in ctl.state.scheduler.admitted_jobs()
        assert ctl.state.dependencies.waiting == {"train": {"prep": "Succeeded"}}
        held = ctl.service.config().cluster_queues["held"]
        ctl.service.apply_config([held.model_copy(update={"stop_policy": "None"})])
        run_until(ctl, clock, lambda: status(ctl, "train") is JobStatus.SUCCEEDED)


def test_cycle_search_follows_only_the_submitted_jobs() -> None:
    def deps(**edges: list[str]) -> dict[str, list[Dependency]]:
        return {name: [Dependency(job=d) for d in targets] for name, targets in edges.items()}

    assert cycle_in(deps(a=["b"], b=["c"], c=[])) is None
    assert cycle_in(deps(a=["b", "outside"], b=[])) is None
    assert cycle_in(deps(a=["b"], b=["c"], c=["b"])) == ["b", "c", "b"]

