"""``phalanx exec`` and ``phalanx attach`` against a real control plane and real pods."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from tests.e2e.conftest import ControlPlane, py_job, running
from tests.terminal import run_on_terminal

pytestmark = pytest.mark.slow

# Writes its process group where the test can read it, then idles until stopped (by its
# control plane's fixture, which kills the pods it left: an hour is only a cap).
IDLE = ("import os, time; path = os.environ['PGID_FILE'] + '.' + os.environ['RANK'];"
        " open(path + '.tmp', 'w').write(str(os.getpgid(0))); os.rename(path + '.tmp', path);"
        " time.sleep(3600)")


def phalanx(plane: ControlPlane, *args: str, stdin: bytes | None = None,
            timeout: float = 60) -> subprocess.CompletedProcess[bytes]:
    """The real CLI in a process of its own, as a user runs it."""
    return subprocess.run(
        [sys.executable, "-m", "phalanx.cli", *args], input=stdin, capture_output=True,
        timeout=timeout, env={**os.environ, **cli_env(plane)},
    )


def cli_env(plane: ControlPlane) -> dict[str, str]:
    info = json.loads((plane.home / "server.json").read_text())
    return {"PHALANX_URL": info["url"], "PHALANX_HOME": str(plane.home),
            "PHALANX_TOKEN": (plane.home / "token").read_text().strip()}


def start_idle_job(plane: ControlPlane, tmp_path: Path, name: str = "idle") -> Path:
    pgid_file = tmp_path / f"{name}.pgid"
    plane.submit(py_job(name, IDLE, replicas=2,
                        pod_set={"env": {"GREETING": "hello from the pod",
                                         "PGID_FILE": str(pgid_file)}}))
    plane.wait_for(name, "Running")
    deadline = time.time() + 30
    ranks = [Path(f"{pgid_file}.{rank}") for rank in (0, 1)]
    while not all(p.exists() for p in ranks) and time.time() < deadline:
        time.sleep(0.05)
    return pgid_file


@pytest.fixture(scope="module")
def idle(shared_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The job ``idle`` running on ``shared_plane`` (started once: the commands exec'd in
    it leave its pods as they were); its ranks' process groups are in this file + .RANK."""
    return start_idle_job(shared_plane, tmp_path_factory.mktemp("idle"))


def test_exec_runs_in_the_pods_environment_and_group(shared_plane: ControlPlane,
                                                     idle: Path) -> None:
    plane, pgid_file = shared_plane, idle
    done = phalanx(plane, "exec", "idle", "--pod", "1", "--", "sh", "-c",
                   "echo $GREETING; echo $PHALANX_POD_NAME; ps -o pgid= -p $$")
    assert done.returncode == 0, done.stderr
    greeting, pod, pgid = done.stdout.decode().split("\n")[:3]
    assert greeting == "hello from the pod"
    assert pod == "idle-worker-1"
    # The exec'd shell is in its pod's process group, so stopping the pod stops it.
    assert int(pgid) == int(Path(f"{pgid_file}.1").read_text())
    assert int(pgid) != int(Path(f"{pgid_file}.0").read_text())
    assert plane.job("idle")["status"] == "Running"


def test_exec_returns_the_exit_code_and_stderr(shared_plane: ControlPlane, idle: Path) -> None:
    plane = shared_plane
    done = phalanx(plane, "exec", "idle", "--", "sh", "-c", "echo oops >&2; exit 7")
    assert done.returncode == 7
    assert done.stderr.decode().strip() == "oops" and done.stdout == b""
    missing = phalanx(plane, "exec", "idle", "--", "no-such-command-here")
    assert missing.returncode == 127
    assert "cannot start 'no-such-command-here'" in missing.stderr.decode()


def test_exec_passes_stdin_with_i(shared_plane: ControlPlane, idle: Path) -> None:
    plane = shared_plane
    done = phalanx(plane, "exec", "idle", "-i", "--", "sh", "-c", "tr a-z A-Z; exit 3",
                   stdin=b"piped through the pod\n")
    assert done.returncode == 3, done.stderr
    assert done.stdout == b"PIPED THROUGH THE POD\n"


def test_exec_it_gives_an_interactive_terminal(shared_plane: ControlPlane, idle: Path) -> None:
    plane = shared_plane
    code, text = run_on_terminal(
        [sys.executable, "-m", "phalanx.cli", "exec", "idle", "-it", "--", "sh", "-i"],
        {**os.environ, **cli_env(plane)}, b"tty; echo $GREETING; exit 5\n")
    assert code == 5, text
    assert "/dev/pts/" in text and "hello from the pod" in text


def test_exec_needs_a_running_pod(shared_plane: ControlPlane) -> None:
    plane = shared_plane
    plane.submit(py_job("quick", "print('done')"))
    plane.wait_for("quick", "Succeeded")
    done = phalanx(plane, "exec", "quick", "--", "true")
    assert done.returncode != 0
    assert "has no running pod" in done.stderr.decode()
    unknown = phalanx(plane, "exec", "nobody", "--", "true")
    assert unknown.returncode != 0 and "nobody" in unknown.stderr.decode()


def test_exec_route_needs_the_token(shared_plane: ControlPlane, idle: Path) -> None:
    plane = shared_plane
    url = cli_env(plane)["PHALANX_URL"].replace("http://", "ws://")
    with pytest.raises(InvalidStatus) as refused:
        connect(f"{url}/v1/jobs/idle/exec?command=true", proxy=None)
    assert refused.value.response.status_code == 401
    assert json.loads(refused.value.response.body)["error"]["field"] == "Authorization"


def test_attach_follows_the_pods_output(shared_plane: ControlPlane) -> None:
    plane = shared_plane
    code = "import time\nfor i in range(3):\n    print('tick', i, flush=True); time.sleep(0.3)"
    plane.submit(py_job("ticker", code))
    plane.wait_for("ticker", "Running", "Succeeded")
    done = phalanx(plane, "attach", "ticker")
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode().split("\n")[:3] == ["tick 0", "tick 1", "tick 2"]


class QuietControlPlane(ControlPlane):
    """A control plane started without interactivity (``phalanx up --no-interactive``)."""

    def serve_args(self) -> str:
        return super().serve_args() + ", interactive=False"


@pytest.fixture
def quiet_plane(tmp_path: Path) -> Iterator[ControlPlane]:
    with running(QuietControlPlane(tmp_path / "home")) as cp:
        yield cp


def test_exec_is_refused_where_interactivity_is_off(
    quiet_plane: ControlPlane, tmp_path: Path,
) -> None:
    start_idle_job(quiet_plane, tmp_path)
    done = phalanx(quiet_plane, "exec", "idle", "--", "true")
    assert done.returncode != 0
    assert "running commands in pods is turned off" in done.stderr.decode()
    env = cli_env(quiet_plane)
    url = env["PHALANX_URL"].replace("http://", "ws://")
    with pytest.raises(InvalidStatus) as refused:
        connect(f"{url}/v1/jobs/idle/exec?command=true", proxy=None,
                additional_headers={"Authorization": f"Bearer {env['PHALANX_TOKEN']}"})
    assert refused.value.response.status_code == 403
    error = json.loads(refused.value.response.body)["error"]
    assert error["type"] == "Forbidden" and "enableRunInteractivity" in error["fix"]


def test_a_member_execs_in_their_own_job_with_their_key(
        plane: ControlPlane, tmp_path: Path) -> None:
    """A member's key is exchanged for a token before the WebSocket's handshake, as every
    other call does: `--token KEY`, PHALANX_TOKEN and a login context all reach the pod."""
    api = plane.api
    queues = [
        {"kind": "ClusterQueue", "name": "cq", "resourceGroups": [{
            "coveredResources": ["cpu"], "flavors": [{"name": "default", "resources": [
                {"name": "cpu", "nominalQuota": 4}]}]}]},
        {"kind": "LocalQueue", "name": "qa", "clusterQueue": "cq"}]
    assert api.post("/v1/config/apply", json={"documents": queues}).status_code == 200
    assert api.put("/v1/teams/team-a", json={"queues": ["qa"]}).status_code == 200
    assert api.post("/v1/users", json={"name": "alice", "role": "member",
                                       "teams": ["team-a"]}).status_code == 201
    created = api.post("/v1/keys", json={"user": "alice"})
    assert created.status_code == 201, created.text
    key = created.json()["key"]
    spec = tmp_path / "mine.yaml"
    spec.write_text(json.dumps(py_job("mine", "import time; time.sleep(120)", queue="qa")))
    env = {**cli_env(plane), "PHALANX_TOKEN": key,
           "PHALANX_CREDENTIALS": str(tmp_path / "credentials.json")}

    def as_alice(*args: str) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run([sys.executable, "-m", "phalanx.cli", *args],
                              capture_output=True, timeout=60, env={**os.environ, **env})

    submitted = as_alice("submit", "-f", str(spec))
    assert submitted.returncode == 0, submitted.stderr
    assert plane.wait_for("mine", "Running")["user"] == "alice"
    done = as_alice("exec", "mine", "--", "sh", "-c", "echo in $PHALANX_JOB")
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode().strip() == "in mine"
    del env["PHALANX_TOKEN"]
    flagged = as_alice("--token", key, "exec", "mine", "--", "true")
    assert flagged.returncode == 0, flagged.stderr
