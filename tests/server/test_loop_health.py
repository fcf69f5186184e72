"""The loop says whether it is stepping, counts its failed steps, and a finished job keeps
its pods' own end time."""

from __future__ import annotations

import time
from pathlib import Path

from phalanx.compute.base import PodState
from phalanx.compute.simulated import SimulatedPlane
from phalanx.control import Controller
from phalanx.spec import JobSpec, Node
from phalanx.spec.status import JobStatus
from phalanx.store import Store

NODES = [Node(name="n0", allocatable={"cpu": 4, "memory": 2 ** 34})]


class BrokenPlane(SimulatedPlane):
    """A plane whose observation fails once ``broken`` is set, as a cluster that went away."""

    broken = False

    def observe(self) -> list[PodState]:
        if self.broken:
            raise ConnectionError("the cluster does not answer")
        return super().observe()


def wait_for(check: object, what: str, seconds: float = 20) -> None:
    deadline = time.monotonic() + seconds
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, what
        time.sleep(0.01)


def test_health_follows_the_loop(tmp_path: Path) -> None:
    plane = BrokenPlane(NODES)
    controller = Controller(Store(f"sqlite:///{tmp_path / 's.db'}"), plane, tick_seconds=0.01)
    healthy, why = controller.loop.health()
    assert not healthy and "not running" in why
    controller.start()
    try:
        wait_for(lambda: controller.loop.last_success is not None, "a first step")
        assert controller.loop.health(stale_after=30)[0]
        plane.broken = True
        errors = controller.metrics.loop_errors
        wait_for(lambda: errors._value.get() >= 3, "failed steps counted")
        time.sleep(0.05)
        healthy, why = controller.loop.health(stale_after=0.01)
        assert not healthy and "failed since" in why, why
        plane.broken = False
        wait_for(lambda: controller.loop.failures_in_a_row == 0, "a good step again")
        assert controller.loop.health(stale_after=30)[0]
    finally:
        controller.stop()


def test_a_finished_job_keeps_its_pods_end_time(tmp_path: Path) -> None:
    """The loop looks late (here: one step long after the pod ended); the record keeps the
    pod's end, not the moment the loop noticed."""
    now = [1000.0]
    epoch = time.time() - now[0]  # the plane reports epoch times, as every plane does
    plane = SimulatedPlane(NODES, clock=lambda: now[0])
    controller = Controller(Store(f"sqlite:///{tmp_path / 's.db'}"), plane,
                            clock=lambda: now[0] + epoch)
    controller.submit(JobSpec.model_validate({
        "name": "short", "podSets": [{"command": ["x"], "env": {"PHALANX_SIM_DURATION": "5s"}}]}))
    controller.step()
    controller.step()
    started = controller.get("short").started_at
    assert started is not None
    now[0] += 45  # stopped for 40 s after the pod's end
    controller.step()
    record = controller.get("short")
    assert record.status is JobStatus.SUCCEEDED
    assert record.finished_at is not None
    assert record.started_at is not None
    assert abs(record.finished_at - record.started_at - 5) < 0.5


def test_healthz_tells_the_truth_over_http(tmp_path: Path) -> None:
    from tests.server.test_control_split import serving

    plane = BrokenPlane(NODES)
    controller = Controller(Store(f"sqlite:///{tmp_path / 's.db'}"), plane, tick_seconds=0.01)
    with serving(controller, tmp_path) as client:
        answer = client.get("/healthz")
        assert answer.status_code == 503
        assert "not running" in answer.json()["error"]["message"]
        controller.start()
        try:
            wait_for(lambda: controller.loop.last_success is not None, "a first step")
            answer = client.get("/healthz")
            assert answer.status_code == 200 and answer.json()["status"] == "ok"
            metrics = client.get("/metrics").text
            assert "phalanx_control_loop_errors_total 0.0" in metrics
        finally:
            controller.stop()
        assert client.get("/healthz").status_code == 503
