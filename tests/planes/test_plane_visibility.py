"""Which cluster each job is on, and what a silent cluster holds: the job's plane in the API,
the SDK, ``phalanx jobs``/``describe``/``status`` and ``phalanx plane``, with simulated
planes behind real workers over real HTTP; a partition makes one silent."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator

import pytest

from phalanx.sdk import Client
from tests.planes.harness import Federation, Gate, sim_job, two_simulated_planes, wait_until

pytestmark = pytest.mark.timeout(240)

class Two:
    def __init__(self, federation: Federation, gate: Gate) -> None:
        self.fed = federation
        self.gate = gate

    def phalanx(self, *args: str) -> str:
        # Wide enough that no table cell wraps.
        done = subprocess.run([sys.executable, "-m", "phalanx.cli.main", *args],
                              env={**self.fed.server.env, "COLUMNS": "300"},
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr + done.stdout
        return done.stdout

    def rows(self, *args: str) -> list[list[str]]:
        return [line.split() for line in self.phalanx(*args).splitlines()]


@pytest.fixture(scope="module")
def two(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Two]:
    root = tmp_path_factory.mktemp("visible")
    with two_simulated_planes(root) as (federation, gate):
        yield Two(federation, gate)


def test_a_job_names_its_plane_in_the_api_the_sdk_and_the_cli(two: Two) -> None:
    fed = two.fed
    fed.submit(sim_job("placed", 2))
    fed.submit(sim_job("waits", 2))  # over the quota with "placed": placed nowhere
    job = fed.wait_status("placed", "Running")
    wait_until(lambda: fed.job("waits")["pendingMessage"], what="waits' pending reason")
    assert job["plane"] == "gcp-a"
    assert job["admission"]["podSets"][0]["nodes"][0].startswith("gcp-a.")
    listed = {j["name"]: j for j in fed.api().get("/v1/jobs").json()["items"]}
    assert listed["placed"]["plane"] == "gcp-a"
    assert listed["waits"]["plane"] is None
    with Client(fed.server.url, fed.server.token) as client:
        assert client.get("placed").plane == "gcp-a"
        assert client.get("waits").plane is None
        assert {r.name: r.plane for r in client.list()} == {"placed": "gcp-a", "waits": None}

    # Two planes: `phalanx jobs` has a PLANE column, as `phalanx nodes` has.
    rows = two.rows("jobs")
    assert rows[0][:5] == ["NAME", "QUEUE", "USER", "STATUS", "PLANE"]
    shown = {row[0]: row[4] for row in rows[1:]}
    assert shown == {"placed": "gcp-a", "waits": "-"}
    as_json = {j["name"]: j for j in json.loads(two.phalanx("jobs", "--json"))}
    assert as_json["placed"]["plane"] == "gcp-a" and "plane" not in as_json["waits"]
    described = [" ".join(line.split()) for line in two.phalanx("describe", "placed")
                 .splitlines()]
    assert "Plane gcp-a" in described
    assert json.loads(two.phalanx("describe", "placed", "--json"))["plane"] == "gcp-a"
    assert not any(line.startswith("Plane") for line in
                   two.phalanx("describe", "waits").splitlines())
    fed.api().post("/v1/jobs/waits/cancel")


def test_status_breaks_the_cluster_down_by_plane(two: Two) -> None:
    two.fed.wait_status("placed", "Running")
    status = json.loads(two.phalanx("status", "--json"))
    planes = {p["name"]: p for p in status["planes"]}
    assert set(planes) == {"gcp-a", "onprem"}
    assert planes["gcp-a"]["phase"] == "connected"
    assert planes["gcp-a"]["nodes"] == 4 and planes["gcp-a"]["jobs"] == ["placed"]
    assert planes["gcp-a"]["used"]["cpu"] == "16"
    assert planes["gcp-a"]["allocatable"]["cpu"] == "32"
    assert planes["onprem"]["cordoned"] is True and planes["onprem"]["jobs"] == []
    assert planes["onprem"].get("used", {}) == {}
    rows = two.rows("status")
    header = rows.index(["PLANE", "STATE", "NODES", "JOBS", "CPU", "USED/ALLOC", "HOLDS"])
    table = {row[0]: row for row in rows[header + 1:]}
    assert table["gcp-a"][:5] == ["gcp-a", "connected", "4", "1", "16/32"]
    assert table["onprem"][:6] == ["onprem", "connected,", "cordoned", "4", "0", "0/32"]


def test_a_silent_plane_says_what_it_holds_and_its_jobs_keep_their_quota(two: Two) -> None:
    fed = two.fed
    fed.wait_status("placed", "Running")
    two.gate.cut()
    try:
        wait_until(lambda: fed.plane("gcp-a")["phase"] == "silent", what="gcp-a to go silent")
        silent = fed.plane("gcp-a")
        assert silent["jobs"] == ["placed"] and silent["used"]["cpu"] == "16"
        assert silent["lostAfter"] == 60 and silent["silentFor"] >= 1
        assert fed.job("placed")["status"] == "Running"

        line = next(" ".join(row) for row in two.rows("describe", "placed")
                    if row and row[0] == "Plane")
        assert line.startswith("Plane gcp-a (worker silent for ")
        assert "the job keeps its quota until 1m of silence" in line
        listed = two.phalanx("plane", "list")
        assert "1 job keeping their quota (cpu=16" in " ".join(listed.split())
        described = two.phalanx("plane", "describe", "gcp-a")
        assert "Holds: 1 job keeping their quota (cpu=16" in described
        assert "until the plane is lost after 1m of silence" in " ".join(described.split())
        status = {p["name"]: p for p in json.loads(two.phalanx("status", "--json"))["planes"]}
        assert status["gcp-a"]["phase"] == "silent"
        assert status["gcp-a"]["used"]["cpu"] == "16"  # the quota is kept
        table = {row[0]: row for row in two.rows("status") if row}
        assert table["gcp-a"][1] == "silent"
        # The quota the silent plane's job keeps still counts: of the team's 24 CPUs, 8
        # are free, and a 2-node job (16) waits although onprem has the nodes.
        fed.api().post("/v1/planes/onprem/cordon", json={"cordoned": False})
        fed.submit(sim_job("over", 2))
        waiting = wait_until(lambda: "free of" in ((j := fed.job("over"))["pendingMessage"]
                                                   or "") and j, what="over's reason")
        assert waiting["status"] == "Queued" and waiting["plane"] is None
        assert "8 free of 24 cpu" in waiting["pendingMessage"]
        fed.api().post("/v1/jobs/over/cancel")
        fed.api().post("/v1/planes/onprem/cordon", json={"cordoned": True})
    finally:
        two.gate.heal()
    wait_until(lambda: fed.plane("gcp-a")["phase"] == "connected", what="gcp-a to come back")
    assert fed.job("placed")["status"] == "Running"
    line = next(" ".join(row) for row in two.rows("describe", "placed")
                if row and row[0] == "Plane")
    assert line == "Plane gcp-a"
