"""Replicas whose store cannot be reached: each reaches PostgreSQL through a TCP relay the
test cuts (as a stopped database or a cut network would).

Cut for every replica, shorter than the lease: the leader refuses writes with 503 "the
store is unavailable", is not ready, sends its planes nothing, and is ready again by itself
once the store answers, having lost nothing acknowledged. Cut for the leader alone (a
partition): a follower takes over, and the old leader writes nothing after.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import make_url

from phalanx.server.replicas import EXIT_LOST_LEADERSHIP
from tests.e2e.conftest import py_job
from tests.e2e.test_replicas import Replica, replicas
from tests.planes.harness import Gate

pytestmark = [pytest.mark.slow, pytest.mark.postgres]


@contextmanager
def relays() -> Iterator[list[Gate]]:
    """The relays ``_through`` makes, closed at the end."""
    gates: list[Gate] = []
    try:
        yield gates
    finally:
        for gate in gates:
            gate.close()


def _through(gates: list[Gate], relayed: set[int]) -> Any:
    """``db_of`` for ``replicas``: the replicas in ``relayed`` reach the database through a
    relay of their own, the others directly."""
    def db_of(index: int, url: str) -> str:
        if index not in relayed:
            return url
        parsed = make_url(url)
        gate = Gate(f"{parsed.host}:{parsed.port or 5432}")
        gates.append(gate)
        return parsed.set(host="127.0.0.1", port=gate.port).render_as_string(
            hide_password=False)
    return db_of


def _request(replica: Replica, method: str, path: str, token: str,
             body: Any = None) -> httpx.Response:
    return httpx.request(method, f"{replica.url}{path}", json=body, timeout=60,
                         headers={"Authorization": f"Bearer {token}"})


def _wait(check: Any, what: str, timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    while not (value := check()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)
    return value


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's (the pods' user): it exists
        return True
    return True


def _running(replica: Replica, token: str, name: str) -> bool:
    answer = _request(replica, "GET", f"/v1/jobs/{name}", token)
    return answer.status_code == 200 and answer.json()["status"] == "Running"


def test_a_store_that_cannot_be_reached_stops_acknowledging_until_it_answers_again(
    tmp_path: Path,
) -> None:
    # A lease long enough that the outage below ends before it runs out.
    with relays() as gates, replicas(tmp_path, 2, lease=60.0,
                                      db_of=_through(gates, {0, 1})) as group:
        leader = group.leader()
        token = (group.home / "token").read_text().strip()
        term = leader.ready()
        assert _request(leader, "POST", "/v1/jobs", token,
                        py_job("before", "import time; time.sleep(600)")).status_code == 201
        _wait(lambda: _running(leader, token, "before"), "before to run")
        pid = _request(leader, "GET", "/v1/jobs/before", token).json()["pods"][0]["pid"]

        for gate in gates:
            gate.cut()
        refused = _request(leader, "POST", "/v1/jobs", token, py_job("during", "pass"))
        assert refused.status_code == 503, refused.text
        error = refused.json()["error"]
        assert error["message"].startswith("the store is unavailable: "), error
        assert error["field"] == "db" and "send it again" in error["fix"]
        cancel = _request(leader, "POST", "/v1/jobs/before/cancel", token)
        assert cancel.status_code == 503, cancel.text
        ready = httpx.get(f"{leader.url}/readyz", timeout=30)
        assert ready.status_code == 503
        assert ready.json()["reason"].startswith("the store is unavailable: ")
        # The loop sends its planes nothing the store has not taken: the pod of the job
        # whose cancel was refused runs on through several of its steps.
        time.sleep(3)
        assert _alive(pid)
        assert leader.alive()

        for gate in gates:
            gate.heal()
        back = _wait(leader.ready, "the leader to be ready again")
        assert term is not None and back["term"] == term["term"]  # no failover: itself
        assert _request(leader, "POST", "/v1/jobs", token,
                        py_job("after", "pass")).status_code == 201
        stored = {r["name"]: r["status"] for r in
                  _request(leader, "GET", "/v1/jobs", token).json()["items"]}
        assert "during" not in stored and "after" in stored, stored  # the refused submit
        # The cancel, made in memory before the store refused it, is stored now, and only
        # then sent to the plane.
        _wait(lambda: not _alive(pid), "the cancelled job's pod to stop")
        assert _request(leader, "GET", "/v1/jobs/before", token).json()["status"] \
            == "Cancelled"
        assert "the store is unavailable" in leader.log.read_text()


def test_a_leader_cut_from_the_store_is_replaced_and_writes_nothing_after(
    tmp_path: Path,
) -> None:
    with relays() as gates, replicas(tmp_path, 3, db_of=_through(gates, {0}),
                                      start=False) as group:
        old, *others = group.members
        old.start()  # it leads first: the others start once it does
        assert group.leader() is old
        for replica in others:
            replica.start()
        token = (group.home / "token").read_text().strip()
        with group.client() as client:
            client.submit(py_job("long", "import time; time.sleep(600)"))
        _wait(lambda: _running(old, token, "long"), "long to run")

        gates[0].cut()  # the old leader, alone, no longer reaches the store
        late = _request(old, "POST", "/v1/jobs", token, py_job("late", "pass"))
        assert late.status_code == 503, late.text
        new = group.leader(besides=old)
        assert old.proc is not None and old.proc.wait(60) == EXIT_LOST_LEADERSHIP
        gates[0].heal()

        with group.client() as client:
            names = {r.name for r in client.list()}
            assert "late" not in names and "long" in names
            assert client.get("long").status.value == "Running"  # adopted, not restarted
            assert client.submit(py_job("after", "pass")).name == "after"
            assert client.wait("after", timeout=120).status.value == "Succeeded"
        assert new.ready() is not None
        assert "leadership lost" in old.log.read_text()
