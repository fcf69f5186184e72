"""A job's pods call the API as the job's owner: a real control plane, real pods, real HTTP.

alice (a member of team-a, LocalQueue qa) submits a job whose pod, with ``phalanx.Client()``
(and the CLI) and no login, reads its own job, submits a follow-up job to qa, and is refused another
team's job (404), admin routes and new keys (403). The credential keeps working across a
control-plane restart, stops at once when the attempt ends, and is written nowhere but
the pod's key file.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.conftest import ControlPlane, py_job, running

pytestmark = pytest.mark.slow

QUEUES = [
    {"kind": "ClusterQueue", "name": "cq", "resourceGroups": [{
        "coveredResources": ["cpu"],
        "flavors": [{"name": "default", "resources": [{"name": "cpu", "nominalQuota": 4}]}]}]},
    {"kind": "LocalQueue", "name": "qa", "clusterQueue": "cq"},
    {"kind": "LocalQueue", "name": "qb", "clusterQueue": "cq"},
]

# The pod's script: everything it tries, as one JSON line; then it waits to be released.
POD = """
import json, os, pathlib, stat, subprocess, sys, time
import phalanx
from phalanx.errors import PhalanxError
found = {}
def attempt(what, action):
    try:
        found[what] = action()
    except PhalanxError as exc:
        found[what] = exc.status_code
key_file = os.environ["PHALANX_API_KEY_FILE"]
found["keyFileMode"] = oct(stat.S_IMODE(os.stat(key_file).st_mode))
found["keyInEnv"] = any(open(key_file).read() in v for v in os.environ.values())
with phalanx.Client() as client:
    attempt("whoami", lambda: client.whoami().user)
    attempt("ownJob", lambda: client.get("parent").status)
    attempt("followUp", lambda: client.submit({
        "name": "child", "queue": "qa", "podSets": [{
            "name": "w", "resources": {"cpu": "100m"},
            "command": [sys.executable, "-c", "print('child ran')"]}]}).queue)
    attempt("otherTeamsJob", lambda: client.get("theirs").status)
    attempt("cancelOtherTeamsJob", lambda: client.cancel("theirs").status)
    attempt("applyConfig", lambda: len(client.apply([])))
    attempt("audit", lambda: len(client.audit()))
    attempt("newKey", lambda: client.create_key().id)
cli = subprocess.run([sys.executable, "-m", "phalanx.cli.main", "whoami", "--json"],
                     capture_output=True, text=True, timeout=60)
found["cliWhoami"] = [json.loads(cli.stdout)[k] for k in ("user", "key")] \
    if cli.returncode == 0 else cli.stderr
print("RESULT " + json.dumps(found), flush=True)
release = pathlib.Path(sys.argv[1])
while not release.exists():
    time.sleep(0.05)
"""


def _exchange(url: str, key: str) -> httpx.Response:
    return httpx.post(f"{url}/v1/auth/token", json={"key": key}, timeout=10)


def _bearer(url: str, token: str) -> httpx.Client:
    return httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=10)


def _result(plane: ControlPlane, name: str, timeout: float = 60) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for line in plane.logs(name).splitlines():
            if line.startswith("RESULT "):
                found: dict[str, Any] = json.loads(line.removeprefix("RESULT "))
                return found
        assert plane.job(name)["status"] in ("Queued", "Admitted", "Starting", "Running"), \
            plane.logs(name)
        time.sleep(0.1)
    raise AssertionError(f"{name} printed no result: {plane.logs(name)}")


def _setup(plane: ControlPlane) -> str:
    """Queues, teams, alice and her key; another team's job. Alice's API key."""
    api = plane.api
    assert api.post("/v1/config/apply", json={"documents": QUEUES}).status_code == 200
    for team, queue in (("team-a", "qa"), ("team-b", "qb")):
        assert api.put(f"/v1/teams/{team}", json={"queues": [queue]}).status_code == 200
    assert api.post("/v1/users", json={"name": "alice", "role": "member",
                                       "teams": ["team-a"]}).status_code == 201
    created = api.post("/v1/keys", json={"user": "alice"})
    assert created.status_code == 201, created.text
    theirs = py_job("theirs", "import time; time.sleep(300)", queue="qb")
    assert api.post("/v1/jobs", json=theirs).status_code == 201
    key: str = created.json()["key"]
    return key


def test_a_pod_acts_as_its_owner_until_its_attempt_ends(tmp_path: Path) -> None:
    release = tmp_path / "release"
    with running(ControlPlane(tmp_path / "home")) as plane:
        alice_key = _setup(plane)
        url = str(plane.api.base_url).rstrip("/")
        token = _exchange(url, alice_key).json()["token"]
        parent = py_job("parent", POD, queue="qa")
        parent["podSets"][0]["command"].append(str(release))
        with _bearer(url, token) as alice:
            submitted = alice.post("/v1/jobs", json=parent)
            assert submitted.status_code == 201, submitted.text
        found = _result(plane, "parent")
        assert found == {
            "keyFileMode": "0o600", "keyInEnv": False, "whoami": "alice", "ownJob": "Running",
            "followUp": "qa", "otherTeamsJob": 404, "cancelOtherTeamsJob": 404,
            "applyConfig": 403, "audit": 403, "newKey": 403,
            "cliWhoami": ["alice", "job/parent/1"],  # the CLI finds it too, no login
        }, plane.logs("parent")
        child = plane.wait_for("child", "Succeeded", "Failed")
        assert child["status"] == "Succeeded" and child["user"] == "alice"
        assert "child ran" in plane.logs("child")
        assert plane.job("theirs")["status"] == "Running"  # the refused cancel did nothing

        key_file = plane.home / "credentials" / "parent.1" / "api-key"
        assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
        key = key_file.read_text()
        before_restart = _exchange(url, key)
        assert before_restart.status_code == 200, before_restart.text
        job_token = before_restart.json()["token"]

        # A restart of the control plane: the running attempt's credential still acts.
        plane.stop()
        plane.start()
        url = str(plane.api.base_url).rstrip("/")
        assert plane.job("parent")["status"] == "Running"
        with _bearer(url, job_token) as pod:
            assert pod.get("/v1/jobs/parent").status_code == 200
        assert _exchange(url, key).status_code == 200

        release.touch()
        assert plane.wait_for("parent", "Succeeded", "Failed")["status"] == "Succeeded"
        with _bearer(url, job_token) as pod:
            refused = pod.get("/v1/jobs/parent")
        assert refused.status_code == 401 and "has ended" in refused.text, refused.text
        assert _exchange(url, key).status_code == 401
        deadline = time.monotonic() + 30
        while key_file.exists():  # gone with the attempt's bookkeeping
            assert time.monotonic() < deadline
            time.sleep(0.1)

        # Written nowhere but the pod's file: not in the job, its events, logs or the store.
        shown = [plane.api.get(f"/v1/jobs/{name}{what}").text
                 for name in ("parent", "child") for what in ("", "/events", "/logs")]
        shown.append(plane.api.get("/v1/audit").text)
        described = subprocess.run(
            [sys.executable, "-m", "phalanx.cli.main", "describe", "parent", "--json"],
            env={**os.environ, "PHALANX_HOME": str(plane.home)}, capture_output=True,
            text=True, timeout=60, check=True).stdout
        assert '"parent"' in described
        stored = b"".join(p.read_bytes() for p in plane.home.rglob("*") if p.is_file())
        for text in (*shown, described):
            assert key not in text
        assert key.encode() not in stored
        audit = plane.api.get("/v1/audit", params={"user": "alice"}).json()["items"]
        assert any(e["action"] == "submit" and e["target"] == "child"
                   and e["detail"].get("key") == "job/parent/1" for e in audit), audit


def test_a_cancelled_attempts_tokens_are_refused_at_once(tmp_path: Path) -> None:
    """Refused while its pods are still stopping: checked at every request, not at expiry."""
    stubborn = ("import signal, time; signal.signal(signal.SIGTERM, lambda *_: None); "
                "time.sleep(300)")
    plane = ControlPlane(tmp_path / "home", grace=30)
    with running(plane):
        plane.submit(py_job("long", stubborn))
        plane.wait_for("long", "Running")
        key = (plane.home / "credentials" / "long.1" / "api-key").read_text()
        url = str(plane.api.base_url).rstrip("/")
        token = _exchange(url, key).json()["token"]
        with _bearer(url, token) as pod:
            assert pod.get("/v1/jobs/long").status_code == 200
            # Submitted through the bootstrap key, the job's owner is the admin: its pod
            # sees every job but opens no admin route.
            assert pod.get("/v1/jobs").status_code == 200
            assert pod.get("/v1/audit").status_code == 403
            assert plane.api.post("/v1/jobs/long/cancel").status_code == 200
            refused = pod.get("/v1/jobs/long")
        assert refused.status_code == 401, refused.text
        assert plane.job("long")["status"] == "Running"  # its pod ignores SIGTERM for 30 s
        assert _exchange(url, key).status_code == 401
