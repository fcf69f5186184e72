"""``phalanx exec`` into a pod of a plane behind a worker, which only dials out: the command
runs in the pod, its output, input and exit code come back through the control plane, and
only the plane's own key opens the worker's side of a command."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import psutil
import pytest
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from tests.planes.harness import Federation, job_spec, wait_until
from tests.terminal import run_on_terminal

pytestmark = pytest.mark.timeout(180)

IDLE = "import time; time.sleep(600)"


@pytest.fixture(scope="module")
def fed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Federation]:
    # A long grace: a worker stopped for a few seconds still counts as connected.
    with Federation(tmp_path_factory.mktemp("exec"), grace="30s", lost_after="90s") as fed:
        fed.start_worker("east", "--fence-after", "60s")
        fed.start_worker("west", "--fence-after", "60s")
        fed.submit(job_spec("idle", IDLE, replicas=2, selector={"phalanx.dev/plane": "east"}))
        fed.wait_status("idle", "Running")
        yield fed


def plane_token(fed: Federation, plane: str) -> str:
    key = (fed.root / f"{plane}.key").read_text().strip()
    answer = httpx.post(f"{fed.server.url}/v1/auth/token", json={"key": key})
    assert answer.status_code == 200, answer.text
    return str(answer.json()["token"])


def test_exec_runs_in_the_pod_and_returns_its_output_and_exit_code(fed: Federation) -> None:
    done = fed.cli("exec", "idle", "--", "sh", "-c", "echo $PHALANX_JOB; exit 3")
    assert done.returncode == 3, done.stderr
    assert done.stdout == b"idle\n"
    other = fed.cli("exec", "idle", "--rank", "1", "--", "sh", "-c",
                    "echo $PHALANX_RANK; echo oops >&2")
    assert other.returncode == 0, other.stderr
    assert other.stdout == b"1\n" and other.stderr == b"oops\n"
    piped = fed.cli("exec", "idle", "-i", "--", "tr", "a-z", "A-Z",
                    stdin=b"through the worker\n")
    assert piped.returncode == 0, piped.stderr
    assert piped.stdout == b"THROUGH THE WORKER\n"
    missing = fed.cli("exec", "idle", "--", "no-such-command-here")
    assert missing.returncode == 127
    assert "cannot start 'no-such-command-here'" in missing.stderr.decode()
    assert fed.job("idle")["status"] == "Running"


def test_exec_t_gives_a_terminal_through_the_worker(fed: Federation) -> None:
    code, text = run_on_terminal(
        [sys.executable, "-m", "phalanx.cli", "exec", "idle", "-it", "--", "sh", "-i"],
        fed.cli_env(), b"tty; echo $PHALANX_JOB-on-a-terminal; exit 5\n")
    assert code == 5, text
    assert "/dev/pts/" in text and "idle-on-a-terminal" in text


def test_a_user_who_goes_away_hangs_the_command_up(fed: Federation, tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    user = subprocess.Popen(
        [sys.executable, "-m", "phalanx.cli", "exec", "idle", "--", "sh", "-c",
         f"echo $$ > {pid_file}.tmp; mv {pid_file}.tmp {pid_file}; exec sleep 120"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=fed.cli_env())
    try:
        pid = int(wait_until(lambda: pid_file.exists() and pid_file.read_text().strip(),
                             what="the command to start"))
        assert psutil.Process(pid).name() == "sleep"
    finally:
        user.kill()
        user.wait()

    def gone() -> bool:
        try:
            return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return True

    wait_until(gone, 20, what="the command to be hung up")
    assert fed.job("idle")["status"] == "Running"


def test_exec_names_a_pod_that_does_not_run(fed: Federation) -> None:
    done = fed.cli("exec", "idle", "--rank", "7", "--", "true")
    assert done.returncode != 0
    assert "has no running pod 7" in done.stderr.decode()
    fed.submit(job_spec("quick", "print('done')", selector={"phalanx.dev/plane": "west"}))
    fed.wait_status("quick", "Succeeded")
    finished = fed.cli("exec", "quick", "--", "true")
    assert finished.returncode != 0
    assert "has no running pod" in finished.stderr.decode()


def test_only_the_planes_own_key_opens_its_side_of_a_command(fed: Federation) -> None:
    base = fed.server.url.replace("http://", "ws://") + "/v1/planes/east/exec/some-session"

    def refused(token: str | None) -> tuple[int, dict[str, str]]:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        with pytest.raises(InvalidStatus) as answer:
            connect(base, additional_headers=headers, proxy=None, open_timeout=10)
        response = answer.value.response
        return response.status_code, json.loads(response.body)["error"]

    assert refused(None)[0] == 401
    assert refused("not-a-token")[0] == 401
    status, error = refused(plane_token(fed, "west"))  # another plane's key
    assert status == 403 and "compute plane west" in error["message"]
    status, error = refused(fed.server.token)  # an admin's is no plane's
    assert status == 403 and "needs the key of compute plane east" in error["message"]
    status, error = refused(plane_token(fed, "east"))  # its own: no such command waits
    assert status == 404 and error["field"] == "session"
    # The commands of a plane are its worker's to read, nobody else's.
    west = {"Authorization": f"Bearer {plane_token(fed, 'west')}"}
    answer = httpx.get(f"{fed.server.url}/v1/planes/east/exec?wait=0", headers=west)
    assert answer.status_code == 403
    with fed.api() as api:
        assert api.get("/v1/planes/east/exec?wait=0").status_code == 403


def test_a_command_the_worker_does_not_take_fails_in_seconds(fed: Federation) -> None:
    worker = fed.workers["east"].proc
    assert worker is not None
    worker.send_signal(signal.SIGSTOP)  # alive, connected for the grace, but deaf
    try:
        start = time.monotonic()
        done = fed.cli("exec", "idle", "--", "true")
        took = time.monotonic() - start
    finally:
        worker.send_signal(signal.SIGCONT)
    assert done.returncode != 0
    assert "did not take the command within 5s" in done.stderr.decode(), done.stderr
    assert took < 20
    again = fed.cli("exec", "idle", "--", "sh", "-c", "exit 4")
    assert again.returncode == 4, again.stderr
