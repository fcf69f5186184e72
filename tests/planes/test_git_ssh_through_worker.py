"""A private git repository cloned behind a worker with an ssh key secret: the key travels
with the attempt in the desired state, the worker's plane clones with it (a private file
while git runs, gone after), and once the attempt ends neither the desired state, the
worker's state directory nor its log holds the key."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import secrets
from pathlib import Path

import httpx
import pytest

from tests.gitssh import FAKE_KEY, bare_repo, calls, fake_ssh
from tests.planes.harness import Federation, job_spec, wait_until

pytestmark = pytest.mark.timeout(180)


def test_a_worker_clones_with_the_key_and_keeps_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bin_dir, log = fake_ssh(tmp_path / "ssh")
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    bare, commit = bare_repo(tmp_path, {"version.txt": "far v1\n"})
    key = FAKE_KEY % secrets.token_hex(16)
    marker = key.splitlines()[1]
    with Federation(tmp_path, grace="30s", lost_after="90s") as fed:
        worker = fed.start_worker("east", "--fence-after", "60s")
        with fed.api() as api:
            created = api.post("/v1/secrets", json={
                "name": "deploy", "type": "ssh",
                "data": {"ssh-privatekey": base64.b64encode(key.encode()).decode()}})
            assert created.status_code == 201, created.text
        spec = job_spec("far", "print(open('version.txt').read().strip())")
        spec["git"] = {"repo": f"ssh://git.example{bare}", "ref": "main",
                       "sshKeySecret": "deploy"}
        submitted = fed.submit(spec)
        assert submitted["spec"]["git"]["commit"] == commit
        done = fed.wait_status("far", "Succeeded", "Failed")
        with fed.api() as api:
            logs = api.get("/v1/jobs/far/logs").text
        assert done["status"] == "Succeeded", logs + worker.log()
        assert logs == "far v1\n"

        seen = calls(log)
        assert len(seen) >= 2, seen  # the control plane's ls-remote, the worker's fetch
        assert {c["key"]["sha256"] for c in seen} == {hashlib.sha256(key.encode()).hexdigest()}
        assert {c["key"]["mode"] for c in seen} == {"0o600"}
        clones = [c for c in seen if str(worker.state_dir) in c["key"]["path"]]
        assert clones, seen  # the worker cloned, with a key file of its own state directory
        assert not any(Path(c["key"]["path"]).exists() for c in seen)

        key_file = (fed.root / "east.key").read_text().strip()
        token = httpx.post(f"{fed.server.url}/v1/auth/token",
                           json={"key": key_file}).json()["token"]

        def desired_without_it() -> bool:
            answer = httpx.get(f"{fed.server.url}/v1/planes/east/desired",
                               params={"wait": 0},
                               headers={"Authorization": f"Bearer {token}"})
            assert answer.status_code == 200, answer.text
            return marker not in answer.text and "far" not in json.dumps(
                answer.json().get("attempts", []))

        wait_until(desired_without_it, what="the desired state to drop the attempt")
        assert not any(marker.encode() in p.read_bytes()
                       for p in worker.state_dir.rglob("*")
                       if p.is_file() and "logs" not in p.parts)
        assert marker not in worker.log()
        assert marker not in (fed.server.home / "server.log").read_text()
