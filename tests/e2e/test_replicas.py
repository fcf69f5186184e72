"""Three replicas of the control plane on one PostgreSQL store (``phalanx up --ha``).

Real processes over real HTTP: the leader killed with SIGKILL while jobs are submitted and
running, a follower leading within the lease's bound and losing no acknowledged submit
nor starting any attempt of a pod twice; a leader frozen with SIGSTOP, resumed after
another took over, making no write.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from phalanx import Client
from phalanx.errors import PhalanxError
from phalanx.server.replicas import EXIT_LOST_LEADERSHIP
from tests.e2e.conftest import REPO, RUN_PODS_AS, py_job
from tests.leftovers import STARTUP_SECONDS, kill_pods_under
from tests.store.postgres import fresh_database, postgres_admin_url

pytestmark = [pytest.mark.slow, pytest.mark.postgres]

LEASE = 3.0  # short, so a test waits seconds for a failover, not the default's ten
# A follower leads within the lease plus a retry period of it having gone silent; the
# new leader then builds the control plane (reads the store, adopts the pods) before it
# admits. Generous on a loaded machine: the bound is a limit, never a timing.
LEADS_WITHIN = STARTUP_SECONDS


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Replica:
    index: int
    home: Path
    db: str
    port: int = field(default_factory=_free_port)
    proc: subprocess.Popen[bytes] | None = None
    lease: float = LEASE
    leader_lease: str = "store"  # serve()'s, as --leader-lease
    env: dict[str, str] = field(default_factory=dict)  # more of the environment
    pythonpath: Path | None = None  # first on the path: another version of Phalanx

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def log(self) -> Path:
        return self.home / f"replica-{self.index}.log"

    def start(self) -> None:
        code = (
            "from pathlib import Path; from phalanx.server import serve; "
            f"serve(home=Path({str(self.home)!r}), host='127.0.0.1', port={self.port}, "
            f"db={self.db!r}, run_as_user={RUN_PODS_AS!r}, grace_seconds=2, ha=True, "
            f"lease_seconds={self.lease}, leader_lease={self.leader_lease!r})"
        )
        env = {**os.environ, "PHALANX_HOME": str(self.home), **self.env}
        if self.pythonpath is not None:
            env["PYTHONPATH"] = os.pathsep.join(
                [str(self.pythonpath), *filter(None, [env.get("PYTHONPATH")])])
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-c", code], cwd=REPO, stdout=log, stderr=log, env=env)

    def ready(self) -> dict[str, Any] | None:
        """``/readyz``'s answer if this replica leads, else None."""
        try:
            answer = httpx.get(f"{self.url}/readyz", timeout=2)
        except httpx.TransportError:
            return None
        return answer.json() if answer.status_code == 200 else None

    def up(self) -> bool:
        """Whether it answers at all (``/healthz``: a follower or the leader)."""
        try:
            return self.alive() and httpx.get(f"{self.url}/healthz", timeout=2).is_success
        except httpx.TransportError:
            return False

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


@dataclass
class Replicas:
    home: Path
    members: list[Replica]

    @property
    def urls(self) -> str:
        return ",".join(r.url for r in self.members)

    def leader(self, timeout: float = LEADS_WITHIN, besides: Replica | None = None) -> Replica:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for replica in self.members:
                if replica is not besides and replica.alive() and replica.ready():
                    return replica
            time.sleep(0.1)
        raise AssertionError("no replica leads:\n" + "\n".join(
            r.log.read_text()[-2000:] for r in self.members))

    def stop(self) -> None:
        """Kill every replica still running (frozen ones too) and the pods they left."""
        for replica in self.members:
            if replica.alive():
                assert replica.proc is not None
                os.kill(replica.proc.pid, signal.SIGCONT)
                replica.proc.kill()
                replica.proc.wait(30)
        kill_pods_under(self.home)

    def all_up(self, timeout: float = LEADS_WITHIN) -> None:
        """Wait until every replica answers ``/healthz`` (a follower or the leader)."""
        deadline = time.monotonic() + timeout
        while not all(replica.up() for replica in self.members):
            assert time.monotonic() < deadline, "a replica did not start"
            time.sleep(0.1)

    def client(self) -> Client:
        return Client(url=self.urls, token=(self.home / "token").read_text().strip(),
                      timeout=30)


@contextmanager
def replicas(tmp_path: Path, count: int = 3, *, lease: float = LEASE,
             db_of: Callable[[int, str], str] | None = None, start: bool = True,
             ) -> Iterator[Replicas]:
    """``count`` replicas on a fresh database, started unless ``start`` is False;
    ``db_of(index, url)``: the URL replica ``index`` reaches the database at (through a
    relay, say)."""
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    with fresh_database(postgres_admin_url()) as db:
        group = Replicas(home, [Replica(i, home, db_of(i, db) if db_of else db, lease=lease)
                                for i in range(count)])
        try:
            if start:
                for replica in group.members:
                    replica.start()
            yield group
        finally:
            group.stop()


def _marking_job(name: str, marks: Path, seconds: float, replicas: int = 2) -> dict[str, Any]:
    """A gang whose pods each append one line to a file of their own when they start."""
    code = ("import os, time\n"
            f"path = os.path.join({str(marks)!r}, os.environ['PHALANX_POD_NAME'])\n"
            "with open(path, 'a') as f: f.write(os.environ['PHALANX_ATTEMPT'] + '\\n')\n"
            f"time.sleep({seconds})\n")
    return py_job(name, code, replicas=replicas)


def test_the_leader_killed_mid_burst_loses_no_submit_and_starts_no_pod_twice(
    tmp_path: Path,
) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    with replicas(tmp_path) as group:
        first = group.leader()
        acknowledged: list[str] = []
        failures: list[str] = []
        killed = threading.Event()

        def submit_burst() -> None:
            with group.client() as client:
                for i in range(24):
                    try:
                        client.submit(_marking_job(f"burst-{i}", marks, 1.5))
                        acknowledged.append(f"burst-{i}")
                    except PhalanxError as exc:  # unacknowledged: may or may not exist
                        failures.append(f"burst-{i}: {exc}")
                    if i == 8:
                        killed.wait(60)

        burst = threading.Thread(target=submit_burst)
        burst.start()
        with group.client() as client:
            deadline = time.monotonic() + 60
            while not any(r.status.value == "Running" for r in client.list()):
                assert time.monotonic() < deadline, "no job started before the kill"
                time.sleep(0.1)
        assert first.proc is not None
        first.proc.kill()  # SIGKILL: no handover, the lease runs out
        first.proc.wait(30)
        killed.set()
        second = group.leader(besides=first)
        assert second.ready() is not None
        burst.join(180)
        assert not burst.is_alive()

        with group.client() as client:
            for name in acknowledged:
                job = client.wait(name, timeout=120)
                assert job.status.value == "Succeeded", (name, job.status)
            terms = second.ready()
        # Submits after the kill were acknowledged: the client waited the election out.
        assert any(int(name.split("-")[1]) > 8 for name in acknowledged), failures
        assert terms is not None and terms["term"] >= 2
        started = {path.name: path.read_text().split() for path in marks.iterdir()}
        for name in acknowledged:
            pods = {pod: lines for pod, lines in started.items() if pod.startswith(f"{name}-")}
            assert len(pods) == 2, (name, pods)
            # No attempt of a pod started twice (the old and the new leader both launching
            # it). A new attempt may follow when the kill cut a gang's launch short (some
            # pods started, not all): the local plane then restarts the gang, as after a
            # lone control plane's kill -9.
            assert all(len(set(lines)) == len(lines) for lines in pods.values()), (name, pods)


def test_a_frozen_leader_resumed_after_a_takeover_writes_nothing_and_sigterm_hands_over(
    tmp_path: Path,
) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    with replicas(tmp_path) as group:
        old = group.leader()
        token = (group.home / "token").read_text().strip()
        with group.client() as client:
            client.submit(_marking_job("long", marks, 600, replicas=1))
            deadline = time.monotonic() + 60
            while client.get("long").status.value != "Running":
                assert time.monotonic() < deadline, "long never ran"
                time.sleep(0.1)
        assert old.proc is not None
        os.kill(old.proc.pid, signal.SIGSTOP)
        new = group.leader(besides=old)
        # Sent to the frozen leader itself: its kernel takes the connections, and it
        # handles them once resumed, under the term it lost.
        answers: dict[str, Any] = {}

        def send(what: str, method: str, path: str, body: Any = None) -> None:
            try:
                answers[what] = httpx.request(
                    method, f"{old.url}{path}", json=body, timeout=60,
                    headers={"Authorization": f"Bearer {token}"}).status_code
            except httpx.TransportError as exc:  # it exited before answering
                answers[what] = type(exc).__name__

        senders = [
            threading.Thread(target=send, args=("submit", "POST", "/v1/jobs",
                                                _marking_job("late", marks, 1, 1))),
            threading.Thread(target=send, args=("cancel", "POST", "/v1/jobs/long/cancel")),
        ]
        for sender in senders:
            sender.start()
        time.sleep(1.0)  # the requests wait in the frozen process's socket
        os.kill(old.proc.pid, signal.SIGCONT)
        for sender in senders:
            sender.join(90)
        assert old.proc.wait(60) == EXIT_LOST_LEADERSHIP
        assert answers["submit"] != 201 and answers["cancel"] != 200, answers

        with group.client() as client:
            assert "late" not in {r.name for r in client.list()}
            assert client.get("long").status.value == "Running"
            assert new.ready() is not None
            client.submit(_marking_job("after", marks, 0.2, replicas=1))
            assert client.wait("after", timeout=120).status.value == "Succeeded"
        assert "leadership lost" in old.log.read_text()

        # A planned stop: SIGTERM releases the lease, and the last replica takes it.
        new_term = new.ready()
        assert new.proc is not None and new_term is not None
        new.proc.send_signal(signal.SIGTERM)
        assert new.proc.wait(60) == 0
        last = group.leader(besides=new)
        assert last is not old
        last_term = last.ready()
        assert last_term is not None and last_term["term"] == new_term["term"] + 1
