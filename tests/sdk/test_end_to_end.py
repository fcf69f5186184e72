"""The SDK against a real control plane (``phalanx up``) over real HTTP."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator

import pytest

from phalanx import (
    AuthError,
    Client,
    Conflict,
    Job,
    JobStatus,
    NotFound,
    SpecError,
)
from tests.sdk.live_server import LiveServer, live_server

__all__ = ["live_server"]

pytestmark = pytest.mark.slow


def py(code: str) -> list[str]:
    return [sys.executable, "-c", code]


@pytest.fixture
def client(live_server: LiveServer) -> Iterator[Client]:
    with Client(home=live_server.home) as c:
        yield c


def test_found_through_the_state_directory(client: Client, live_server: LiveServer) -> None:
    assert client.url == live_server.url
    assert client.healthy()
    assert client.version() == "0.1.0"
    status = client.status()
    assert status.nodes >= 1 and status.jobs.keys() == {s.value for s in JobStatus}


def test_submit_wait_logs_events(client: Client) -> None:
    job = (
        Job("sdk-hello")
        .pod_set("worker", replicas=2, command=py("import os; print('rank', os.environ['RANK'])"),
                 resources={"cpu": "100m", "memory": "32Mi"})
        .kind("torch")
    )
    record = client.submit(job)
    assert record.name == "sdk-hello" and record.status is JobStatus.QUEUED
    done = client.wait("sdk-hello", timeout=60, poll=0.1)
    assert done.status is JobStatus.SUCCEEDED, done.message
    lines = sorted(client.logs("sdk-hello"))
    assert lines == ["[sdk-hello-worker-0] rank 0", "[sdk-hello-worker-1] rank 1"]
    assert list(client.logs("sdk-hello", pod=1)) == ["rank 1"]
    assert list(client.logs("sdk-hello", pod="sdk-hello-worker-0")) == ["rank 0"]
    detail = client.get("sdk-hello")
    assert detail.admission is not None and detail.exit_code == 0
    # Printed, the record says quantities as the spec did; code gets exact milli-units.
    worker = detail.spec.pod_sets[0]
    assert worker.resources == {"cpu": 100, "memory": 32 * 2**20 * 1000}
    assert "resources={'cpu': '100m', 'memory': '32Mi'}" in repr(detail), repr(detail)
    assert str(32 * 2**20 * 1000) not in str(detail)
    reasons = [e.reason for e in client.events("sdk-hello")]
    assert reasons and reasons == [e.reason for e in detail.events]
    assert [r.name for r in client.list(status="Succeeded")].count("sdk-hello") == 1
    assert "sdk-hello" not in [r.name for r in client.list(status=["Running", "Queued"])]


def test_follow_streams_while_running(client: Client) -> None:
    code = "import time\nfor i in range(3):\n    print('step', i, flush=True)\n    time.sleep(0.3)"
    client.submit({"name": "sdk-follow", "podSets": [{"name": "w", "command": py(code),
                                                      "resources": {"cpu": "100m"}}]})
    seen = []
    for line in client.logs("sdk-follow", follow=True):
        seen.append(line)
        if len(seen) == 1:
            # The first line arrives while the job still runs: streamed, not read at the end.
            assert not client.get("sdk-follow").status.terminal
    assert seen == ["step 0", "step 1", "step 2"]
    assert client.get("sdk-follow").status is JobStatus.SUCCEEDED


def test_wait_times_out_and_cancel_stops(client: Client) -> None:
    client.submit({"name": "sdk-sleep", "podSets": [{"name": "w", "replicas": 2, "command": py(
        "import time; time.sleep(120)"), "resources": {"cpu": "100m"}}]})
    with pytest.raises(TimeoutError, match="sdk-sleep"):
        client.wait("sdk-sleep", timeout=0.3, poll=0.1)
    deadline = time.monotonic() + 30
    while len([p for p in client.get("sdk-sleep").pods if p.phase == "Running"]) < 2:
        assert time.monotonic() < deadline, client.get("sdk-sleep")
        time.sleep(0.1)
    pods = client.get("sdk-sleep").pods
    assert [p.rank for p in pods] == [0, 1] and all(p.pid for p in pods)
    client.cancel("sdk-sleep")
    assert client.wait("sdk-sleep", timeout=60, poll=0.1).status is JobStatus.CANCELLED
    again = client.cancel("sdk-sleep")  # a finished job: no-op
    assert again.status is JobStatus.CANCELLED


def test_errors_come_back_as_their_classes(client: Client, live_server: LiveServer) -> None:
    with pytest.raises(NotFound):
        client.get("no-such-job")
    with pytest.raises(NotFound):
        list(client.logs("no-such-job"))
    spec = Job("sdk-dup").pod_set(command=py("pass"), resources={"cpu": "100m"}).build()
    client.submit(spec)
    with pytest.raises(Conflict):
        client.submit(spec)
    with pytest.raises(SpecError) as info:
        client.submit(spec.model_copy(update={"name": "sdk-q", "queue": "nowhere"}))
    assert info.value.field == "queue" and info.value.fix
    with pytest.raises(NotFound):
        client.get("sdk-q")  # nothing stored


@pytest.mark.parametrize("token", ["wrong-token", None])
def test_auth_is_refused_without_the_token(
    live_server: LiveServer, token: str | None, tmp_path_factory: pytest.TempPathFactory
) -> None:
    empty_home = tmp_path_factory.mktemp("no-token")
    with Client(live_server.url, token, home=empty_home) as stranger:
        assert stranger.healthy()  # /healthz is open
        with pytest.raises(AuthError) as info:
            stranger.list()
        assert info.value.fix and "token" in info.value.fix


def test_apply_and_config(client: Client) -> None:
    applied = client.apply([
        {"kind": "ClusterQueue", "name": "sdk-team", "resourceGroups": [{
            "coveredResources": ["cpu"],
            "flavors": [{"name": "default", "resources": [{"name": "cpu", "nominalQuota": 1}]}],
        }]},
        {"kind": "LocalQueue", "name": "sdk-team", "clusterQueue": "sdk-team"},
    ])
    assert [(a.kind, a.name, a.action) for a in applied] == [
        ("ClusterQueue", "sdk-team", "created"), ("LocalQueue", "sdk-team", "created"),
    ]
    names = {(d.kind, d.name) for d in client.config()}
    assert {("ClusterQueue", "sdk-team"), ("LocalQueue", "sdk-team")} <= names
    queues = client.queues()
    team = next(cq for cq in queues.cluster_queues if cq.name == "sdk-team")
    assert [(u.resource, u.nominal) for u in team.usage] == [("cpu", 1000)]  # milli-units
    # All or nothing: a LocalQueue pointing nowhere fails the whole batch.
    with pytest.raises(SpecError):
        client.apply([
            {"kind": "LocalQueue", "name": "sdk-ok", "clusterQueue": "sdk-team"},
            {"kind": "LocalQueue", "name": "sdk-bad", "clusterQueue": "missing"},
        ])
    assert "sdk-ok" not in [lq.name for lq in client.queues().local_queues]
    nodes = client.nodes()
    assert nodes and nodes[0].allocatable["cpu"] > 0


def test_list_is_ordered_and_limited(client: Client) -> None:
    for i in range(3):
        client.submit({"name": f"sdk-order-{i}", "podSets": [{"name": "w", "command": py("pass"),
                                                              "resources": {"cpu": "100m"}}]})
        time.sleep(0.01)
    names = [r.name for r in client.list() if r.name.startswith("sdk-order-")]
    assert names == ["sdk-order-2", "sdk-order-1", "sdk-order-0"]  # newest first
    assert len(client.list(limit=2)) == 2
