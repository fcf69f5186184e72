"""A control plane whose state directory (``PHALANX_HOME``) fills up, on a real 20 MiB tmpfs:
writes answer 507 naming the free space, nothing half-written is kept, ``/healthz`` is not
ready, the log says so, and all is well again once space is freed. A local pod whose disk
fills fails as "disk full", not as lost.

Mounting needs root (or CAP_SYS_ADMIN); elsewhere these tests are skipped, saying why.
"""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest

from tests.sdk.live_server import LiveServer
from tests.server.conftest import NODES
from tests.server.envelope import error

pytestmark = pytest.mark.slow

SIZE = "20m"
QUEUE = {"kind": "LocalQueue", "name": "full-q", "clusterQueue": "default"}


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 20 MiB tmpfs, unmounted afterwards."""
    where = tmp_path / "disk"
    where.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={SIZE}", "tmpfs", str(where)],
                             capture_output=True, text=True, check=False)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip() or 'refused'}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def fill(disk: Path) -> Path:
    """Write a file until the disk has no space left; the file, to delete later."""
    filler = disk / "filler"
    block = b"\0" * (1 << 16)
    with filler.open("wb", buffering=0) as out:
        while True:
            try:
                out.write(block)
            except OSError as exc:
                assert exc.errno == errno.ENOSPC
                break
    with contextlib.suppress(OSError), filler.open("ab", buffering=0) as out:
        while out.write(b"\0"):  # the last bytes, a byte at a time
            pass
    return filler


def job(name: str, **pod_set: Any) -> dict[str, Any]:
    return {"name": name, "podSets": [{"name": "w", "command": ["x"], **pod_set}]}


def wait_for(check: Any, what: str, timeout: float = 60) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.2)
    raise AssertionError(f"never: {what}")


def test_a_full_state_directory_answers_507_and_recovers(small_disk: Path) -> None:
    server = LiveServer.simulated(small_disk, NODES)
    with server, server.client() as api:
        assert api.post("/v1/jobs", json=job("before")).status_code == 201
        filler = fill(small_disk)
        try:
            for path, body in (("/v1/jobs", job("during")),
                               ("/v1/jobs:batch", {"items": [job("during-batch")]}),
                               ("/v1/config/apply", {"documents": [QUEUE]})):
                _, message, fix = error(api.post(path, json=body), 507)
                assert message.startswith("no space left in PHALANX_HOME (")
                assert "bytes free)" in message and fix and "free space" in fix
            health = httpx.get(server.url + "/healthz", timeout=10)
            assert health.status_code == 503
            assert "no space left in PHALANX_HOME" in health.json()["error"]["message"]
        finally:
            filler.unlink()
        # Space is back: ready again, the refused jobs were never kept, new ones are.
        wait_for(lambda: httpx.get(server.url + "/healthz", timeout=10).status_code == 200,
                 "healthz ready again")
        assert api.get("/v1/jobs/during").status_code == 404
        assert api.get("/v1/jobs/during-batch").status_code == 404
        assert api.post("/v1/jobs", json=job("during")).status_code == 201
        assert api.get("/v1/jobs/before").status_code == 200
        assert all(q["name"] != "full-q" for q in api.get("/v1/queues").json()["localQueues"])
        log = (server.home / "server.log").read_text(errors="replace")
    assert "space is back in PHALANX_HOME" in log and "3 writes were refused" in log, log[-6000:]
    assert "Traceback" not in log


def test_a_local_pod_whose_disk_fills_fails_as_disk_full(small_disk: Path) -> None:
    server = LiveServer(small_disk / "home", ["--run-as-user", str(os.geteuid())])
    with server, server.client() as api:
        body = {"name": "writer", "restart": {"maxSystemRestarts": 0}, "podSets": [
            {"name": "w", "command": ["sh", "-c", "sleep 2; echo done"],
             "resources": {"cpu": "100m"}}]}
        assert api.post("/v1/jobs", json=body).status_code == 201
        pid = wait_for(lambda: next((p["pid"] for p in api.get("/v1/jobs/writer").json()
                                     .get("pods", []) if p.get("pid")), None), "pod started")
        filler = fill(small_disk)
        try:
            # The supervisor cannot write the pod's log nor its exit record; the plane sees
            # it gone while the disk is still full.
            wait_for(lambda: not psutil.pid_exists(pid), "pod ended", timeout=30)
            time.sleep(3)  # a few ticks of the control loop, the disk still full
        finally:
            filler.unlink()
        record = wait_for(lambda: (r := api.get("/v1/jobs/writer").json())["status"] == "Failed"
                          and r, "the job failed")
    assert "DiskFull" in record["message"] and "disk full" in record["message"], record
