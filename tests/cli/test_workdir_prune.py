"""Pruning the uploaded workdirs, with real uploads through a real control plane
(``phalanx up``) and the real CLI: an archive no live job names and unused for the
retention goes, with its owners' markers; one a queued or running job names stays; an
archive used within the retention stays; only an admin may ask; a pruned directory is
uploaded again at its next submit."""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from pathlib import Path

import httpx
import pytest

from phalanx import Client
from phalanx.compute.simulated import SimulatedPlane
from phalanx.control.controller import Controller
from phalanx.control.retention import WorkdirPruner
from phalanx.store import Store
from phalanx.store.workdirs import WorkdirStore
from tests.cli.test_workdir import cli
from tests.compute.test_simulated import NODES
from tests.sdk.live_server import LiveServer

pytestmark = pytest.mark.slow
DAY = 86400.0


def _project(where: Path, text: str) -> Path:
    where.mkdir()
    (where / "data.txt").write_text(text)
    return where


def _age(store: WorkdirStore, sha256: str, days: float) -> None:
    """As if the archive was last used ``days`` ago."""
    then = time.time() - days * DAY
    os.utime(store.path(sha256), (then, then))


def test_unused_archives_are_pruned_and_needed_ones_kept(tmp_path: Path) -> None:
    with LiveServer(tmp_path / "home", ["--run-as-user", str(os.geteuid()),
                                        "--workdir-retention", "3d"]) as server:
        store = WorkdirStore.for_home(server.home)
        with Client(server.url, token=server.token) as client:
            unused = client.upload_workdir(_project(tmp_path / "unused", "old\n"))
            needed = client.upload_workdir(_project(tmp_path / "needed", "live\n"))
            recent = client.upload_workdir(_project(tmp_path / "recent", "new\n"))
            spec = {"name": "holds", "workdir": needed.to_dict(), "podSets": [{
                "resources": {"cpu": "100m"},
                "command": [sys.executable, "-c", "import time; time.sleep(300)"]}]}
            with server.client() as http:
                made = http.post("/v1/jobs", json=spec)
                assert made.status_code == 201, made.text
            for archive in (unused, needed):
                _age(store, archive.sha256, 5)
            _age(store, recent.sha256, 1)
            markers = [p for p in (store.root / "owners").rglob(unused.sha256)]
            assert markers  # the uploader's marker, which goes with the archive

            looked = cli(server, "workdirs", "prune", "--dry-run", "--json")
            assert looked.exit_code == 0, looked.output
            report = json.loads(looked.stdout)
            assert [a["sha256"] for a in report["removed"]] == [unused.sha256]
            assert report["keptInUse"] == 1 and report["keptRecent"] == 1
            assert report["olderThan"] == 3 * DAY and report["dryRun"] is True
            assert store.has(unused.sha256)  # a dry run removes nothing

            pruned = cli(server, "workdirs", "prune", "--json")
            assert pruned.exit_code == 0, pruned.output
            report = json.loads(pruned.stdout)
            assert [a["sha256"] for a in report["removed"]] == [unused.sha256]
            assert report["removedBytes"] == unused.size > 0
            assert not store.has(unused.sha256)
            assert not any(p.exists() for p in markers)
            assert store.has(needed.sha256) and store.has(recent.sha256)
            with server.client() as http:
                assert http.head(f"/v1/workdirs/{unused.sha256}").status_code == 404
                assert http.head(f"/v1/workdirs/{needed.sha256}").status_code == 200

            # A shorter --older-than reaches the recent one too; the live job's stays.
            shown = cli(server, "workdirs", "prune", "--older-than", "12h")
            assert shown.exit_code == 0, shown.output
            assert "removed 1 archive(s)" in shown.output, shown.output
            assert not store.has(recent.sha256) and store.has(needed.sha256)

            # Pruned, the directory is packed and uploaded again when it is next used.
            again = client.upload_workdir(tmp_path / "unused")
            assert again.sha256 == unused.sha256 and store.has(unused.sha256)

            # Once its job has ended, the archive it named goes too.
            client.cancel("holds")
            assert client.wait("holds", timeout=60).status.value == "Cancelled"
            _age(store, needed.sha256, 5)
            with server.client() as http:
                answer = http.post("/v1/workdirs:prune")
                assert answer.status_code == 200, answer.text
                assert [a["sha256"] for a in answer.json()["removed"]] == [needed.sha256]

            # A member may not prune: it is the administrator's.
            with server.client() as http:
                assert http.put("/v1/teams/t", json={"queues": ["default"]}).status_code \
                    == 200
                assert http.post("/v1/users", json={"name": "m", "role": "member",
                                                    "teams": ["t"]}).status_code == 201
                key = http.post("/v1/keys", json={"user": "m"}).json()["key"]
            token = httpx.post(f"{server.url}/v1/auth/token", json={"key": key}).json()["token"]
            refused = httpx.post(f"{server.url}/v1/workdirs:prune",
                                 headers={"Authorization": f"Bearer {token}"})
            assert refused.status_code == 403, refused.text
            bad = cli(server, "workdirs", "prune", "--older-than", "soon")
            assert bad.exit_code != 0 and "olderThan" in bad.output


def test_the_background_prunes_at_most_once_an_hour(tmp_path: Path) -> None:
    """The loop's pass: due at once, then not again within the hour, whatever it finds."""
    store = WorkdirStore(tmp_path / "workdirs")
    data = b"archive bytes"
    sha = hashlib.sha256(data).hexdigest()
    now = [time.time()]
    controller = Controller(Store(f"sqlite:///{tmp_path / 's.db'}"),
                            SimulatedPlane(NODES, clock=lambda: now[0]), workdirs=store,
                            workdir_retention=7 * DAY, clock=lambda: now[0])
    pruner = controller.workdirs
    assert isinstance(pruner, WorkdirPruner)

    def upload_old() -> None:
        assert store.upload(sha, 1 << 20).put([data]) == len(data)
        _age(store, sha, 10)

    upload_old()
    report = pruner.due()
    assert report is not None and [a.sha256 for a in report.removed] == [sha]
    upload_old()
    now[0] += 600
    assert pruner.due() is None and store.has(sha)  # ten minutes later: not yet
    now[0] += 3000
    report = pruner.due()
    assert report is not None and not store.has(sha)
    assert Controller(Store(f"sqlite:///{tmp_path / 't.db'}"), SimulatedPlane(NODES),
                      workdirs=store, workdir_retention=0).workdirs.due() is None  # type: ignore[union-attr]
