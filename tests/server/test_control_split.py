"""The API reads consistent snapshots while the loop runs, and never waits on a compute plane.

A real controller and its loop thread behind the real app, over real HTTP (uvicorn
on a loopback port), on the simulated plane.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import uvicorn

from phalanx.compute.simulated import SimulatedPlane
from phalanx.control import Controller
from phalanx.server.app import create_app
from phalanx.server.auth import Authenticator
from phalanx.spec import JobSpec, Node
from phalanx.spec.resources import LocalQueue
from phalanx.spec.status import JobStatus
from phalanx.store import IdentityStore, LogStore, Store

TOKEN = "t0ken"
NODES = [Node(name=f"n{i}", allocatable={"cpu": 64, "memory": 2 ** 38}) for i in range(4)]


def job(name: str, queue: str = "default", **env: str) -> JobSpec:
    return JobSpec.model_validate({
        "name": name, "queue": queue,
        "podSets": [{"replicas": 1, "resources": {"cpu": "100m"}, "command": ["x"],
                     "env": env}],
    })


@contextmanager
def serving(controller: Controller, home: Path) -> Iterator[httpx.Client]:
    app = create_app(controller, Authenticator(home, IdentityStore(controller.store), bootstrap_key=TOKEN),
                     LogStore(home / "logs"), db_label="sqlite")
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="error"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.time() + 20
    while not server.started:
        assert time.time() < deadline, "the server did not start"
        time.sleep(0.02)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30,
                          headers={"Authorization": f"Bearer {TOKEN}"}) as client:
            yield client
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def test_queue_and_node_reads_never_fail_while_the_loop_settles_jobs(tmp_path: Path) -> None:
    """``/v1/queues`` counts the live jobs the loop deletes as they finish: it must read a
    snapshot, not iterate the loop's own table."""
    plane = SimulatedPlane(NODES, logs_root=tmp_path / "logs")
    store = Store(f"sqlite:///{tmp_path / 'state.db'}")
    controller = Controller(store, plane, tick_seconds=0.01, batch_seconds=0.0)
    # A held queue keeps many jobs live, so each read has a large table to go through while
    # the loop deletes the jobs that end; a short switch interval interleaves the threads.
    default = controller.service.config().cluster_queues["default"]
    controller.service.apply_config([
        default.model_copy(update={"name": "held", "stop_policy": "Hold"}),
        LocalQueue(name="held", cluster_queue="held"),
    ])
    controller.service.submit_many([job(f"h{i}", "held") for i in range(20000)])
    total = 4000
    controller.service.submit_many([job(f"j{i}", PHALANX_SIM_DURATION="0s")
                                    for i in range(total)])
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    errors: list[str] = []
    answered = [0]
    done = threading.Event()

    def hammer(client: httpx.Client, path: str) -> None:
        while not done.is_set():
            answer = client.get(path)
            answered[0] += 1
            if answer.status_code != 200:
                errors.append(f"{path}: {answer.status_code} {answer.text[:300]}")

    with serving(controller, tmp_path) as client:
        controller.start()
        readers = [threading.Thread(target=hammer, args=(client, path))
                   for path in ("/v1/queues", "/v1/queues", "/v1/nodes", "/v1/queues")]
        for reader in readers:
            reader.start()
        try:
            deadline = time.time() + 240
            while store.count_jobs_by_status()["Succeeded"] < total:
                assert time.time() < deadline, store.count_jobs_by_status()
                assert not errors, errors[:3]
                time.sleep(0.05)
        finally:
            done.set()
            for reader in readers:
                reader.join(timeout=30)
            controller.stop()
            sys.setswitchinterval(interval)
    assert answered[0] > 20, "the readers hardly ran: the test proves nothing"
    assert not errors, errors[:3]


class StallingPlane(SimulatedPlane):
    """A simulated plane whose ``terminate`` waits, as a cluster's API does when it is slow."""

    def __init__(self, nodes: list[Node], logs_root: Path) -> None:
        super().__init__(nodes, logs_root=logs_root)
        self.release = threading.Event()
        self.stalled = threading.Event()

    def terminate(self, job: str, attempt: int, grace_seconds: float = 10.0) -> None:
        self.stalled.set()
        self.release.wait(60)
        super().terminate(job, attempt, grace_seconds)


def test_a_stalled_plane_call_stalls_no_api_call(tmp_path: Path) -> None:
    plane = StallingPlane(NODES, tmp_path / "logs")
    store = Store(f"sqlite:///{tmp_path / 'state.db'}")
    controller = Controller(store, plane, tick_seconds=0.01, batch_seconds=0.0)
    # Should a call wait on the plane after all, the plane lets go later and the check
    # below that it had not let go yet fails, instead of the test hanging.
    release_later = threading.Timer(40, plane.release.set)
    with serving(controller, tmp_path) as client:
        controller.start()
        release_later.start()
        try:
            assert client.post("/v1/jobs", json=job("long").to_dict()).status_code == 201
            deadline = time.time() + 30
            while controller.get("long").status is not JobStatus.RUNNING:
                assert time.time() < deadline
                time.sleep(0.02)
            # The cancel is stored and answered; the loop then blocks in the plane's terminate.
            answer = client.post("/v1/jobs/long/cancel")
            assert answer.status_code == 200 and answer.json()["cancelRequested"] is True
            assert plane.stalled.wait(30), "the loop never asked the plane to stop the pods"
            for path in ("/v1/jobs", "/v1/jobs/long", "/v1/queues", "/v1/nodes", "/v1/status"):
                assert client.get(path, timeout=60).status_code == 200, path
            assert client.post("/v1/jobs", json=job("next").to_dict(),
                               timeout=60).status_code == 201
            assert client.post("/v1/jobs/next/cancel", timeout=60).status_code == 200
            # Every call above was answered while the plane still held the loop.
            assert not plane.release.is_set()
            plane.release.set()
            while controller.get("long").status is not JobStatus.CANCELLED:
                assert time.time() < deadline + 30
                time.sleep(0.02)
        finally:
            release_later.cancel()
            plane.release.set()
            controller.stop()
    assert store.get_job("long").status is JobStatus.CANCELLED
