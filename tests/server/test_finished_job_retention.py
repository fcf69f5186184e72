"""Finished jobs and their logs are deleted once older than the server's finished-job TTL, by
the control loop in the background, in batches; live jobs and recent ones stay."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from phalanx.compute.simulated import SimulatedPlane
from phalanx.control import Controller
from phalanx.errors import NotFound
from phalanx.spec import JobSpec, Node
from phalanx.spec.status import JobStatus
from phalanx.store import LogStore, Store
from phalanx.store.pools import PoolPhase, PoolRecord, PoolStore

NODES = [Node(name="n0", allocatable={"cpu": 64, "memory": 2 ** 36})]


def job(name: str) -> JobSpec:
    return JobSpec.model_validate({
        "name": name,
        "podSets": [{"resources": {"cpu": "100m"}, "command": ["x"],
                     "env": {"PHALANX_SIM_DURATION": "0s"}}],
    })


class Clock:
    """Starts at the real time: the simulated plane stamps pods' ends with it."""

    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


def test_old_finished_jobs_and_their_logs_are_collected_in_batches(tmp_path: Path) -> None:
    clock = Clock()
    logs = LogStore(tmp_path / "logs")
    store = Store(f"sqlite:///{tmp_path / 'phalanx.db'}")
    plane = SimulatedPlane(NODES, logs_root=logs.root, clock=clock)
    controller = Controller(store, plane, clock=clock, logs=logs, finished_ttl=3600.0,
                            collect_batch=2)
    try:
        for i in range(5):
            controller.submit(job(f"old-{i}"))
        for _ in range(20):
            controller.step()
            if all(controller.get(f"old-{i}").status.terminal for i in range(5)):
                break
        assert all(controller.get(f"old-{i}").status is JobStatus.SUCCEEDED for i in range(5))
        for i in range(5):
            logs.append(f"old-{i}", "old-0-worker-0", b"line\n")
        clock.now += 7200.0
        controller.submit(job("recent"))
        while not controller.get("recent").status.terminal:
            controller.step()
        controller.submit(job("live"))  # queued or running: never collected
        pools = PoolStore(store)  # old-0's node pool history, and live's
        for name, owner in (("old-0-1", "old-0"), ("live-1", "live")):
            pools.insert(PoolRecord(name=name, job=owner, attempt=1, flavor="f",
                                    provider="local", config_hash="h",
                                    state=PoolPhase.DELETED, node_count=1,
                                    price_per_node_hour=0.0, created_at=0.0, updated_at=0.0))

        deleted = controller.collect_finished()
        assert pools.of_job("old-0") == [] and len(pools.of_job("live")) == 1

        assert sorted(deleted) == [f"old-{i}" for i in range(5)]
        for i in range(5):
            with pytest.raises(NotFound):
                controller.get(f"old-{i}")
            assert logs.pods(f"old-{i}") == []
        assert controller.get("recent").status is JobStatus.SUCCEEDED
        assert not controller.get("live").status.terminal
        controller.submit(job("old-0"))  # the name is free again
    finally:
        controller.stop()
        plane.close()
        store.close()


def test_without_a_ttl_nothing_is_collected(tmp_path: Path) -> None:
    clock = Clock()
    store = Store(f"sqlite:///{tmp_path / 'phalanx.db'}")
    plane = SimulatedPlane(NODES)
    controller = Controller(store, plane, clock=clock, finished_ttl=None)
    try:
        controller.submit(job("kept"))
        while not controller.get("kept").status.terminal:
            controller.step()
        clock.now += 10 * 365 * 86400.0
        assert controller.collect_finished() == []
        assert controller.get("kept").status is JobStatus.SUCCEEDED
    finally:
        controller.stop()
        plane.close()
        store.close()


def test_up_finished_ttl_collects_over_real_http(tmp_path: Path) -> None:
    from tests.sdk.live_server import LiveServer

    nodes = "nodes:\n  - name: sim-a\n    allocatable: {cpu: 8, memory: 32Gi}\n"
    with LiveServer.simulated(tmp_path, nodes, "--finished-ttl", "1s") as server, \
            server.client(timeout=10) as api:
        body = {"name": "brief", "podSets": [
            {"resources": {"cpu": "100m"}, "env": {"PHALANX_SIM_DURATION": "0s"}}]}
        assert api.post("/v1/jobs", json=body).status_code == 201
        deadline = time.monotonic() + 30
        while api.get("/v1/jobs/brief").status_code != 404:
            assert time.monotonic() < deadline, "the finished job was never collected"
            time.sleep(0.2)


def test_the_collector_forgets_idempotency_keys_after_a_day_even_without_a_ttl(
    tmp_path: Path,
) -> None:
    clock = Clock()
    store = Store(f"sqlite:///{tmp_path / 'phalanx.db'}")
    plane = SimulatedPlane(NODES)
    controller = Controller(store, plane, clock=clock, finished_ttl=None)
    try:
        _, replayed = controller.service.submit_keyed([job("keyed")], batch=False, key="retry-1")
        assert not replayed and store.get_request("retry-1") is not None
        clock.now += 3600.0
        assert controller.collector.forget_requests() == 0  # a retry an hour later still replays
        clock.now += 24 * 3600.0
        assert controller.collector.forget_requests() == 1
        assert store.get_request("retry-1") is None
        assert controller.get("keyed").name == "keyed"
    finally:
        controller.stop()
        plane.close()
        store.close()
