"""maxPendingJobs counts queued jobs from the scheduler's queues plus those held outside
them (backoff, unmet dependencies): the same numbers as a walk over every live job."""

from __future__ import annotations

import random
from pathlib import Path

from phalanx.compute.simulated import SimulatedPlane
from phalanx.control import Controller
from phalanx.spec import JobSpec, Node
from phalanx.spec.base import validate
from phalanx.spec.status import JobStatus
from phalanx.store import Store

NODES = [Node(name="n0", allocatable={"cpu": 4000, "memory": 2 ** 34})]


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def walk(ctl: Controller) -> dict[str, int]:
    counts = {name: 0 for name in ctl.state.config.cluster_queues}
    for record in ctl.state.jobs.values():
        if record.status is JobStatus.QUEUED:
            counts[record.cluster_queue] += 1
    return counts


def test_counts_match_a_walk_over_live_jobs_through_restarts_and_dependencies(
    tmp_path: Path,
) -> None:
    clock = Clock()
    plane = SimulatedPlane(NODES, clock=clock)
    ctl = Controller(Store(f"sqlite:///{tmp_path / 'state.db'}"), plane, clock=clock)
    config = ctl.state.config
    capped = config.cluster_queues["default"].model_copy(update={"max_pending_jobs": 10_000})
    ctl.service.apply_config([capped])
    rng = random.Random(7)
    seen_held = 0
    try:
        for i in range(60):
            # Finished: a dependency that already failed is still a valid one to wait for.
            deps = ([{"job": f"j{rng.randrange(i)}", "condition": "Finished"}]
                    if i and rng.random() < 0.3 else [])
            failing = rng.random() < 0.3
            ctl.service.submit_many([validate(JobSpec, {
                "name": f"j{i}", "dependsOn": deps,
                "restart": {"maxRestarts": 2, "backoff": "3s"},
                "podSets": [{"resources": {"cpu": str(rng.choice([100, 900, 1500]))},
                             "command": ["x"], "env": {
                                 "PHALANX_SIM_DURATION": f"{rng.randint(1, 4)}s",
                                 "PHALANX_SIM_EXIT_CODE": "1" if failing else "0"}}],
            })])
            for _ in range(rng.randint(0, 3)):
                ctl.step()
                clock.now += 1.0
            with ctl.state.lock:
                counted = ctl.service._pending_counts()
                assert counted is not None
                assert counted == {k: v for k, v in walk(ctl).items() if k in counted}
                seen_held += len(ctl.state.backoff) + len(ctl.state.dependencies.waiting)
        assert seen_held > 0  # the run did hold jobs outside the scheduler
    finally:
        ctl.stop()
        plane.close()
        ctl.store.close()
