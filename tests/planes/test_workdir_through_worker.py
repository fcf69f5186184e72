"""A job's workdir reaches pods behind a worker: the worker fetches the archive by hash
with its plane's key, for attempts the control plane wants started there, and no other."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import yaml

from tests.planes.harness import Federation, wait_until

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def one(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Federation]:
    with Federation(tmp_path_factory.mktemp("workdir")) as federation:
        federation.start_worker("east", "--fence-after", "4s")
        yield federation


def test_the_workers_pods_start_in_a_copy_of_the_workdir(one: Federation,
                                                         tmp_path: Path) -> None:
    (tmp_path / "config.txt").write_text("lr=0.1\n")
    (tmp_path / "job.yaml").write_text(yaml.safe_dump({
        "name": "remote-reader", "workdir": ".", "podSets": [{
            "replicas": 2, "resources": {"cpu": "100m", "memory": "16Mi"},
            "command": [sys.executable, "-c", "print(open('config.txt').read().strip())"]}]}))
    submitted = one.cli("submit", "-f", str(tmp_path / "job.yaml"), "--wait", timeout=120)
    assert submitted.returncode == 0, submitted.stderr.decode()
    with one.api() as api:
        logs = api.get("/v1/jobs/remote-reader/logs").text
        assert logs.count("lr=0.1") == 2, logs
        sha = api.get("/v1/jobs/remote-reader").json()["spec"]["workdir"]["sha256"]
    # The worker's own copy (in its state directory) goes once no attempt needs it.
    wait_until(lambda: not [path for path in one.root.glob(f"**/workdirs/blobs/{sha}.tar.gz")
                            if not path.is_relative_to(one.server.home)],
               what="the worker to drop its copy of the archive")
    # With the plane's key, an archive no wanted attempt names is not to be had.
    key = (one.root / "east.key").read_text().strip()
    with httpx.Client(base_url=one.server.url, timeout=10) as raw:
        token = raw.post("/v1/auth/token", json={"key": key}).json()["token"]
        answer = raw.get(f"/v1/planes/east/workdirs/{sha}",
                         headers={"Authorization": f"Bearer {token}"})
        assert answer.status_code == 404  # its attempt ended: no longer wanted there
        other = raw.get(f"/v1/workdirs/{sha}", headers={"Authorization": f"Bearer {token}"})
        assert other.status_code == 403  # a plane key reads nothing but its plane's routes
