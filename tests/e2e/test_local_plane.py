"""The embedded control plane end to end: real HTTP, real processes, real signals."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import psutil
import pytest

from tests.e2e.conftest import ControlPlane, apply_one_cpu_queue, example_job, py_job

pytestmark = pytest.mark.slow

# Tests whose jobs have names of their own, end (or are cancelled) within the test and
# change no configuration share the module's control plane (``shared_plane``); those that
# list every job, apply queues or restart the plane start their own (``plane``).


def test_gang_runs_to_success_with_logs_and_events(plane: ControlPlane) -> None:
    code = "import os; print('rank', os.environ['RANK'], 'of', os.environ['WORLD_SIZE'])"
    record = plane.submit(py_job("two", code, replicas=2))
    assert record["status"] == "Queued"
    job = plane.wait_for("two", "Succeeded")
    assert job["attempt"] == 1 and job["exitCode"] == 0
    assert [p["count"] for p in job["admission"]["podSets"]] == [2]
    reasons = [e["reason"] for e in job["events"]]
    for expected in ("Submitted", "Admitted", "Succeeded"):
        assert expected in reasons
    logs = plane.logs("two")
    assert "[two-worker-0] rank 0 of 2" in logs and "[two-worker-1] rank 1 of 2" in logs
    assert plane.logs("two", pod="1").strip() == "rank 1 of 2"
    listed = plane.api.get("/v1/jobs").json()["items"]
    assert [j["name"] for j in listed] == ["two"]


def test_hello_gang_example_meets_at_barrier(shared_plane: ControlPlane) -> None:
    plane = shared_plane
    plane.submit(example_job("hello-gang.yaml"))
    job = plane.wait_for("hello-gang", "Succeeded", "Failed", timeout=90)
    assert job["status"] == "Succeeded", plane.logs("hello-gang")
    assert "barrier passed with 4 ranks" in plane.logs("hello-gang")


FAIL_FIRST_ATTEMPT = (
    "import os, sys, time\n"
    "if os.environ['PHALANX_ATTEMPT'] == '1':\n"
    "    if os.environ['RANK'] == '1': sys.exit(3)\n"
    "    open(os.environ['PIDFILE'], 'w').write(str(os.getpid())); time.sleep(60)\n"
    "print('attempt', os.environ['PHALANX_ATTEMPT'], 'ok')\n"
)


def test_failing_rank_fails_gang_and_restarts_within_budget(
    shared_plane: ControlPlane, tmp_path: Path
) -> None:
    plane = shared_plane
    pidfile = tmp_path / "rank0.pid"
    spec = py_job("flaky", FAIL_FIRST_ATTEMPT, replicas=2,
                  pod_set={"env": {"PIDFILE": str(pidfile)}},
                  restart={"maxRestarts": 1, "backoff": "500ms"})
    plane.submit(spec)
    job = plane.wait_for("flaky", "Succeeded", "Failed", timeout=60)
    assert job["status"] == "Succeeded"
    assert job["attempt"] == 2 and job["userRestarts"] == 1 and job["systemRestarts"] == 0
    reasons = [e["reason"] for e in job["events"]]
    assert reasons.index("Failed") < reasons.index("Requeued") < reasons.index("Succeeded")
    # rank 0 of the failed attempt was stopped with its gang, not left running
    assert not psutil.pid_exists(int(pidfile.read_text()))


def test_restart_budget_spent_fails_the_job(shared_plane: ControlPlane) -> None:
    plane = shared_plane
    plane.submit(py_job("broken", "import sys; sys.exit(7)", restart={"maxRestarts": 1,
                                                                       "backoff": "100ms"}))
    job = plane.wait_for("broken", "Failed", timeout=30)
    assert job["exitCode"] == 7 and job["userRestarts"] == 1 and job["attempt"] == 2
    assert "budget" in job["message"]


TREE = (
    "import os, subprocess, sys, time\n"
    "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'])\n"
    "open(os.environ['PIDFILE'], 'w').write(f'{os.getpid()} {child.pid}')\n"
    "time.sleep(120)\n"
)


def test_cancel_kills_the_whole_process_tree(shared_plane: ControlPlane, tmp_path: Path) -> None:
    plane = shared_plane
    pidfile = tmp_path / "pids"
    plane.submit(py_job("tree", TREE, pod_set={"env": {"PIDFILE": str(pidfile)}}))
    plane.wait_for("tree", "Running")
    deadline = time.time() + 20
    while not pidfile.exists() or len(pidfile.read_text().split()) < 2:
        assert time.time() < deadline
        time.sleep(0.1)
    pids = [int(p) for p in pidfile.read_text().split()]
    assert all(psutil.pid_exists(p) for p in pids)
    response = plane.api.post("/v1/jobs/tree/cancel")
    assert response.status_code == 200
    job = plane.wait_for("tree", "Cancelled", timeout=30)
    assert "CancelRequested" in [e["reason"] for e in job["events"]]
    deadline = time.time() + 10
    while any(psutil.pid_exists(p) and psutil.Process(p).status() != "zombie" for p in pids):
        assert time.time() < deadline, "processes survived the cancel"
        time.sleep(0.1)


def test_high_priority_job_preempts_low_priority_one(plane: ControlPlane) -> None:
    apply_one_cpu_queue(plane)
    sleeper = "import time; time.sleep(120)"
    plane.submit(py_job("low", sleeper, queue="small", priority="low",
                        pod_set={"resources": {"cpu": "1"}}))
    plane.wait_for("low", "Running")
    plane.submit(py_job("high", "print('high ran')", queue="small", priority="high",
                        pod_set={"resources": {"cpu": "1"}}))
    high = plane.wait_for("high", "Succeeded", timeout=60)
    low = plane.job("low")
    assert low["preemptions"] == 1
    assert "Preempted" in [e["reason"] for e in low["events"]]
    assert high["admittedAt"] >= next(e["time"] for e in low["events"] if e["reason"] == "Preempted")
    # the low job went back to the queue and runs again once high is done
    plane.wait_for("low", "Running", timeout=30)
    assert plane.job("low")["attempt"] == 2


COUNTED = (
    "import os, time\n"
    "open(os.environ['RUNS'], 'a').write('run\\n')\n"
    "time.sleep(4)\n"
    "print('finished')\n"
)


def test_control_plane_restart_readopts_running_pods(plane: ControlPlane, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    plane.submit(py_job("survivor", COUNTED, pod_set={"env": {"RUNS": str(runs)}}))
    plane.wait_for("survivor", "Running")
    plane.stop(signal.SIGKILL)  # no clean shutdown
    plane.start()
    job = plane.wait_for("survivor", "Succeeded", timeout=30)
    assert runs.read_text().count("run") == 1  # ran once, not twice
    assert job["attempt"] == 1
    assert "Adopted" in [e["reason"] for e in job["events"]]
    assert "finished" in plane.logs("survivor")


def test_follow_streams_logs_while_running(shared_plane: ControlPlane) -> None:
    plane = shared_plane
    code = "import time\nfor i in range(3):\n    print('tick', i, flush=True); time.sleep(1)\n"
    plane.submit(py_job("ticker", code))
    seen: list[tuple[float, str]] = []
    with plane.api.stream("GET", "/v1/jobs/ticker/logs", params={"follow": "true"}) as response:
        assert response.status_code == 200
        for line in response.iter_lines():
            seen.append((time.time(), line))
    assert [line for _, line in seen] == ["tick 0", "tick 1", "tick 2"]
    assert seen[-1][0] - seen[0][0] > 1.0  # lines arrived as they were written


def test_max_runtime_fails_the_job(shared_plane: ControlPlane) -> None:
    plane = shared_plane
    plane.submit(py_job("slow", "import time; time.sleep(60)", maxRuntime="1s"))
    job = plane.wait_for("slow", "Failed", timeout=30)
    assert "maxRuntime" in job["message"]
    assert "DeadlineExceeded" in [e["reason"] for e in job["events"]]


def test_requests_without_the_token_are_refused(refusing_plane: ControlPlane) -> None:
    import httpx

    plane = refusing_plane
    url = str(plane.api.base_url)
    for headers in ({}, {"Authorization": "Bearer wrong"}):
        response = httpx.get(url + "/v1/jobs", headers=headers)
        assert response.status_code == 401
        assert response.json()["error"]["type"] == "AuthError"
    assert httpx.get(url + "/healthz").status_code == 200
    assert (plane.home / "token").stat().st_mode & 0o777 == 0o600


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"name": "x", "podSets": [{"resourcez": {}}]}, "podSets[0].resourcez"),
        ({"name": "x", "podSets": [{"resources": {"cpu": "lots"}}]}, "podSets[0].resources.cpu"),
        ({"name": "x", "queue": "nope", "podSets": [{}]}, "queue"),
        ({"name": "x", "priority": "urgent", "podSets": [{}]}, "priority"),
        ({"name": "x", "podSets": [{"resources": {"cpu": "100000"}}]}, "podSets[0]"),
        ({"name": "Not_A_Name", "podSets": [{}]}, "name"),
    ],
)
def test_bad_input_is_rejected_naming_the_field(
    refusing_plane: ControlPlane, spec: dict[str, object], field: str
) -> None:
    plane = refusing_plane
    response = plane.api.post("/v1/jobs", json=spec)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["type"] == "SpecError"
    assert error["field"].startswith(field), error
    assert error["fix"]
    assert plane.api.get("/v1/jobs").json()["items"] == []


def test_duplicate_name_conflicts_and_keeps_the_first(shared_plane: ControlPlane) -> None:
    plane = shared_plane
    plane.submit(py_job("dup", "print(1)"))
    response = plane.api.post("/v1/jobs", json=py_job("dup", "print(2)"))
    assert response.status_code == 409
    assert response.json()["error"]["field"] == "name"
    assert "print(1)" in json.dumps(plane.job("dup")["spec"])
