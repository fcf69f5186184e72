"""A pod cannot act as the control plane: a real ``phalanx up`` server, real pods.

A pod reaches the API only through its attempt's credential, which acts as the job's
owner minus admin powers: here mallory, a member whose team may use only LocalQueue
``probers``, so the pod sees neither the victim (404) nor an admin route (403).

The control plane runs as root on this machine's test runs, so the state
directory's file modes alone would not stop a pod; ``--run-as-user nobody`` is
what makes them bite. The pods run the system Python from /tmp, which the
unprivileged user can reach (the repository's virtualenv may not be).
"""

from __future__ import annotations

import json
import os
import pwd
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.sdk.live_server import LiveServer

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0, reason="running pods as another user needs root"),
]

POD_USER = "nobody"
SYSTEM_PYTHON = "/usr/bin/python3"
# A token the server gets from its environment, as on Kubernetes from a Secret.
ENV_TOKEN = "token-from-the-environment"
HF_SECRET = "hf-0123456789-secret"
API_KEY_SECRET = "wandb-abcdef-secret"
CORP_SECRET = "corp-only-secret"


class ServerWithEnvToken(LiveServer):
    @property
    def env(self) -> dict[str, str]:
        return {**super().env, "PHALANX_TOKEN": ENV_TOKEN}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    try:
        pwd.getpwnam(POD_USER)
    except KeyError:
        pytest.skip(f"this machine has no {POD_USER!r} user")
    if not os.access(SYSTEM_PYTHON, os.X_OK):
        pytest.skip(f"{SYSTEM_PYTHON} is needed to run pods as {POD_USER}")
    home = tmp_path_factory.mktemp("isolation") / "home"
    home.mkdir(mode=0o755)
    home.chmod(0o755)  # an existing state directory with loose modes: `up` tightens it
    (home / "notes.txt").write_text("left here by hand\n")
    (home / "notes.txt").chmod(0o644)
    live = ServerWithEnvToken(
        home, ["--run-as-user", POD_USER, "--secret-env", "corp_*"],
    ).start()
    try:
        yield live
    finally:
        live.stop()


def _http(server: LiveServer) -> httpx.Client:
    return httpx.Client(base_url=server.url, timeout=30,
                        headers={"Authorization": f"Bearer {server.token}"})


def _job(name: str, code: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    return {"name": name, "podSets": [{
        "name": "worker", "resources": {"cpu": "100m"},
        "command": [SYSTEM_PYTHON, "-c", code], "workingDir": "/tmp",
        "env": {"PATH": "/usr/bin:/bin", **(env or {})},
    }]}


def _wait(http: httpx.Client, name: str, *statuses: str, timeout: float = 60) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        job: dict[str, Any] = http.get(f"/v1/jobs/{name}").json()
        if job["status"] in statuses:
            return job
        assert time.monotonic() < deadline, f"{name} is {job['status']}, not {statuses}"
        time.sleep(0.1)


def _log(http: httpx.Client, name: str) -> str:
    response = http.get(f"/v1/jobs/{name}/logs")
    assert response.status_code == 200, response.text
    return response.text


VICTIM = "import time; print('victim says: private output', flush=True); time.sleep(300)"

PROBE = """
import json, os, urllib.error, urllib.request
home, url = {home!r}, {url!r}
found = {{"uid": os.getuid(), "job": os.environ.get("PHALANX_JOB"),
         "controlPlaneEnv": sorted(k for k in os.environ if k in (
             "PHALANX_HOME", "PHALANX_TOKEN", "PHALANX_URL"))}}
def attempt(what, action):
    try:
        action()
        found[what] = "read"
    except OSError as exc:
        found[what] = type(exc).__name__
attempt("token", lambda: open(os.path.join(home, "token")).read())
attempt("otherLog", lambda: open(os.path.join(home, "logs", "victim", "victim-worker-0.log")).read())
attempt("listing", lambda: os.listdir(home))
attempt("database", lambda: open(os.path.join(home, "phalanx.db"), "rb").read(16))
key_file = os.environ.get("PHALANX_API_KEY_FILE", "")
found["keyFile"] = [os.stat(key_file).st_uid, oct(os.stat(key_file).st_mode & 0o777)]
exchange = urllib.request.Request(
    os.environ["PHALANX_URL"] + "/v1/auth/token", method="POST",
    data=json.dumps({{"key": open(key_file).read()}}).encode(),
    headers={{"Content-Type": "application/json"}})
token = json.load(urllib.request.urlopen(exchange, timeout=10))["token"]
for what, method, path in (("apiGet", "GET", "/v1/jobs/victim"),
                           ("apiCancel", "POST", "/v1/jobs/victim/cancel"),
                           ("apiOwnJob", "GET", "/v1/jobs/prober"),
                           ("apiAudit", "GET", "/v1/audit")):
    request = urllib.request.Request(url + path, method=method,
                                     headers={{"Authorization": "Bearer " + token}})
    try:
        found[what] = urllib.request.urlopen(request, timeout=10).status
    except urllib.error.HTTPError as exc:
        found[what] = exc.code
print("PROBE " + json.dumps(found), flush=True)
"""


def _member_token(http: httpx.Client, url: str) -> str:
    """A token of mallory, a member whose team may use LocalQueue probers alone."""
    applied = http.post("/v1/config/apply", json={"documents": [
        {"kind": "LocalQueue", "name": "probers", "clusterQueue": "default"}]})
    assert applied.status_code == 200, applied.text
    assert http.put("/v1/teams/probers", json={"queues": ["probers"]}).status_code == 200
    assert http.post("/v1/users", json={"name": "mallory", "role": "member",
                                        "teams": ["probers"]}).status_code == 201
    key = http.post("/v1/keys", json={"user": "mallory"}).json()["key"]
    token: str = httpx.post(f"{url}/v1/auth/token", json={"key": key}).json()["token"]
    return token


def test_a_pod_reaches_the_api_as_its_owner_and_not_the_state_directory(
        server: LiveServer) -> None:
    with _http(server) as http:
        assert http.post("/v1/jobs", json=_job("victim", VICTIM)).status_code == 201
        _wait(http, "victim", "Running")
        deadline = time.monotonic() + 30
        while "private output" not in _log(http, "victim"):  # its log exists on disk
            assert time.monotonic() < deadline, _log(http, "victim")
            time.sleep(0.1)
        probe = PROBE.format(home=str(server.home), url=server.url)
        submitted = httpx.post(f"{server.url}/v1/jobs",
                               json={**_job("prober", probe), "queue": "probers"},
                               headers={"Authorization": "Bearer "
                                        + _member_token(http, server.url)})
        assert submitted.status_code == 201, submitted.text
        job = _wait(http, "prober", "Succeeded", "Failed")
        output = _log(http, "prober")
        assert job["status"] == "Succeeded", output
        [line] = [x for x in output.splitlines() if x.startswith("PROBE ")]
        found = json.loads(line.removeprefix("PROBE "))
        assert found["uid"] == pwd.getpwnam(POD_USER).pw_uid
        assert found["job"] == "prober"  # the distributed environment is still there
        # The API's URL is the pod's; the state directory and the admin key are not.
        assert found["controlPlaneEnv"] == ["PHALANX_URL"]
        assert found["keyFile"] == [pwd.getpwnam(POD_USER).pw_uid, "0o600"]
        for what in ("token", "otherLog", "listing", "database"):
            assert found[what] == "PermissionError", (what, found)
        # Exactly mallory's access: its own job, not another team's, no admin route.
        assert found["apiOwnJob"] == 200, found
        assert found["apiGet"] == 404 and found["apiCancel"] == 404, found
        assert found["apiAudit"] == 403, found
        assert http.get("/v1/jobs/victim").json()["status"] == "Running"
        http.post("/v1/jobs/victim/cancel")


def _modes(home: Path) -> dict[str, str]:
    """Every entry under ``home`` (and home itself) whose mode is not owner-only."""
    loose = {}
    for path in [home, *home.rglob("*")]:
        if path.is_symlink():
            continue
        mode = stat.S_IMODE(path.lstat().st_mode)
        wanted = 0o700 if path.is_dir() else 0o600
        if mode != wanted:
            loose[str(path.relative_to(home))] = oct(mode)
    return loose


def test_the_state_directory_is_owner_only(server: LiveServer) -> None:
    with _http(server) as http:
        assert http.post("/v1/jobs", json=_job("sleeper", VICTIM)).status_code == 201
        _wait(http, "sleeper", "Running")
        deadline = time.monotonic() + 30
        while "private output" not in _log(http, "sleeper"):
            assert time.monotonic() < deadline
            time.sleep(0.1)
        assert (server.home / "pods" / "sleeper").is_dir()  # its pod's bookkeeping is there
        assert (server.home / "logs" / "sleeper" / "sleeper-worker-0.log").is_file()
        assert (server.home / "phalanx.db").is_file()
        assert _modes(server.home) == {}
        http.post("/v1/jobs/sleeper/cancel")
    assert "tightened" in server.log()  # the loose directory found at `up` was reported


def test_secret_env_is_redacted_in_answers_but_reaches_the_pod(server: LiveServer) -> None:
    env = {"HF_TOKEN": HF_SECRET, "wandbApiKey": API_KEY_SECRET, "CORP_LOGIN": CORP_SECRET,
           "TOKENIZERS_PARALLELISM": "false", "KEYBOARD_LAYOUT": "us"}
    code = ("import os; print('pod sees', os.environ['HF_TOKEN'], os.environ['wandbApiKey'], "
            "os.environ['CORP_LOGIN'])")
    with _http(server) as http:
        # Submitted as another user (the admin acting as it): its answer shows the owner
        # the real values; the admin's own reads below do not.
        assert http.put("/v1/users/owner", json={"role": "admin"}).status_code in (200, 201)
        submitted = http.post("/v1/jobs", json=_job("secretive", code, env),
                              headers={"X-Phalanx-Act-As": "owner"})
        assert submitted.status_code == 201, submitted.text
        assert submitted.json()["spec"]["podSets"][0]["env"]["HF_TOKEN"] == HF_SECRET
        job = _wait(http, "secretive", "Succeeded", "Failed")
        answers = {
            "get": job,
            "list": next(j for j in http.get("/v1/jobs").json()["items"]
                         if j["name"] == "secretive"),
            "cancel": http.post("/v1/jobs/secretive/cancel").json(),
        }
        for where, answer in answers.items():
            shown = answer["spec"]["podSets"][0]["env"]
            assert shown["HF_TOKEN"] == "<redacted>", where
            assert shown["wandbApiKey"] == "<redacted>", where
            assert shown["CORP_LOGIN"] == "<redacted>", where  # the operator's --secret-env
            assert shown["TOKENIZERS_PARALLELISM"] == "false", where
            assert shown["KEYBOARD_LAYOUT"] == "us", where
            assert HF_SECRET not in json.dumps(answer), where
        assert job["status"] == "Succeeded", _log(http, "secretive")
        assert f"pod sees {HF_SECRET} {API_KEY_SECRET} {CORP_SECRET}" in _log(http, "secretive")
    for args in (["describe", "secretive"], ["describe", "secretive", "--json"]):
        shown = subprocess.run(
            [sys.executable, "-m", "phalanx.cli.main", *args], env=server.env,
            capture_output=True, text=True, timeout=60, check=True,
        ).stdout
        assert "secretive" in shown
        for secret in (HF_SECRET, API_KEY_SECRET, CORP_SECRET):
            assert secret not in shown, args
    detail = json.loads(shown)
    assert detail["spec"]["podSets"][0]["env"]["HF_TOKEN"] == "<redacted>"


# Under --pod-uids: what one tenant's pod tries against another's running pod.
MARKED_VICTIM = "import time; time.sleep(300)  # victim-marker"
TENANT_PROBE = """
import json, os
found = {"uid": os.getuid()}
pids = []
for pid in filter(str.isdigit, os.listdir("/proc")):
    try:
        if b"victim-" + b"marker" in open(f"/proc/{pid}/cmdline", "rb").read():
            pids.append(pid)
    except OSError:
        pass
found["victims"] = len(pids)
def attempt(what, action):
    try:
        action()
        found[what] = "read"
    except OSError as exc:
        found[what] = type(exc).__name__
for pid in pids:
    attempt("environ", lambda: open(f"/proc/{pid}/environ", "rb").read())
attempt("key", lambda: open(os.environ["VICTIM_KEY"]).read())
attempt("checkpoints", lambda: os.listdir(os.environ["VICTIM_CHECKPOINTS"]))
print("PROBE " + json.dumps(found), flush=True)
"""


def _free_uids(count: int) -> str:
    taken = {e.pw_uid for e in pwd.getpwall()}
    first = 3_950_000
    while any(u in taken for u in range(first, first + count)):
        first += count
    return f"{first}-{first + count - 1}"


def test_tenants_with_uids_of_their_own_read_nothing_of_each_other(
        tmp_path: Path) -> None:
    from phalanx.compute.base import control_plane_tag

    uids = _free_uids(2)
    first, last = (int(u) for u in uids.split("-"))
    with LiveServer(tmp_path / "home", ["--pod-uids", uids]) as server, \
            _http(server) as http:
        tag = control_plane_tag((server.home / "control-plane-id").read_text().strip())
        key = Path(f"/var/tmp/phalanx-credentials-{os.getuid()}{tag}/bob.1/api-key")
        checkpoints = Path(f"/var/tmp/phalanx-checkpoints-{os.getuid()}{tag}/bob")
        bob = _job("bob", MARKED_VICTIM, env={"DB_PASSWORD": "bobs-password"})
        assert http.post("/v1/jobs", json=bob).status_code == 201
        _wait(http, "bob", "Running")
        assert key.stat().st_uid in range(first, last + 1)
        assert stat.S_IMODE(checkpoints.stat().st_mode) == 0o700
        probe = _job("alice", TENANT_PROBE, env={"VICTIM_KEY": str(key),
                                                  "VICTIM_CHECKPOINTS": str(checkpoints)})
        assert http.post("/v1/jobs", json=probe).status_code == 201
        job = _wait(http, "alice", "Succeeded", "Failed")
        output = _log(http, "alice")
        assert job["status"] == "Succeeded", output
        [line] = [x for x in output.splitlines() if x.startswith("PROBE ")]
        found = json.loads(line.removeprefix("PROBE "))
        assert first <= found["uid"] <= last and found["uid"] != key.stat().st_uid
        assert found["victims"] >= 1, found  # bob's command was there to try
        assert (found["environ"], found["key"], found["checkpoints"]) == (
            "PermissionError", "PermissionError", "PermissionError"), found

        # Both uids held (bob, carol): dave waits, saying why, and starts once one frees.
        assert http.post("/v1/jobs", json=_job("carol", VICTIM)).status_code == 201
        _wait(http, "carol", "Running")
        assert http.post("/v1/jobs", json=_job("dave", VICTIM)).status_code == 201
        deadline = time.monotonic() + 30
        while True:
            detail = http.get("/v1/jobs/dave").json()
            if any(e["reason"] == "WaitingForPodUid" for e in detail["events"]) and (
                    detail["pods"]):
                break
            assert time.monotonic() < deadline, detail
            time.sleep(0.1)
        assert detail["status"] == "Starting"
        assert [p["reason"] for p in detail["pods"]] == ["WaitingForPodUid"]
        http.post("/v1/jobs/carol/cancel")
        _wait(http, "dave", "Running")
        for name in ("bob", "dave"):
            http.post(f"/v1/jobs/{name}/cancel")
        for name in ("bob", "dave"):
            _wait(http, name, "Cancelled")
