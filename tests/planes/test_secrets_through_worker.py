"""A job's secrets through a worker: the values reach the pod on the worker's local plane,
and once the attempt ends neither the desired state, the worker's state directory nor its
log holds them."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import secrets
from pathlib import Path

import httpx
import pytest

from tests.planes.harness import Federation, job_spec, wait_until

pytestmark = pytest.mark.timeout(180)

POD = """
import hashlib, json, os
digest = lambda b: hashlib.sha256(b).hexdigest()
path = os.path.join(os.environ["CREDS_DIR"], "TOKEN")  # the secret volume's mountPath
print("RESULT " + json.dumps({"env": digest(os.environ["TOKEN"].encode()),
                              "file": digest(open(path, "rb").read())}), flush=True)
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="a secret volume is mounted in the pod's own "
                    "mount namespace, which needs a worker running as root")
def test_a_secret_reaches_a_pod_behind_a_worker_which_keeps_nothing(tmp_path: Path) -> None:
    value = f"through-{secrets.token_hex(12)}"
    mount = tmp_path / "creds"
    mount.mkdir()
    with Federation(tmp_path, grace="30s", lost_after="90s") as fed:
        worker = fed.start_worker("east", "--fence-after", "60s")
        with fed.api() as api:
            created = api.post("/v1/secrets", json={
                "name": "tok", "type": "env",
                "data": {"TOKEN": base64.b64encode(value.encode()).decode()}})
            assert created.status_code == 201, created.text
        spec = job_spec("far", POD)
        spec["volumes"] = [{"name": "creds", "secret": {"secretName": "tok"}}]
        spec["podSets"][0].update({
            "envFrom": [{"secret": "tok"}],
            "env": {"CREDS_DIR": str(mount)},
            "mounts": [{"name": "creds", "mountPath": str(mount)}],
        })
        fed.submit(spec)
        done = fed.wait_status("far", "Succeeded", "Failed")
        with fed.api() as api:
            logs = api.get("/v1/jobs/far/logs").text
        assert done["status"] == "Succeeded", logs
        [line] = [x for x in logs.splitlines() if x.startswith("RESULT ")]
        digest = hashlib.sha256(value.encode()).hexdigest()
        assert json.loads(line.removeprefix("RESULT ")) == {"env": digest, "file": digest}

        key = (fed.root / "east.key").read_text().strip()
        token = httpx.post(f"{fed.server.url}/v1/auth/token", json={"key": key}).json()["token"]

        def desired_without_it() -> bool:
            answer = httpx.get(f"{fed.server.url}/v1/planes/east/desired",
                               params={"wait": 0},
                               headers={"Authorization": f"Bearer {token}"})
            assert answer.status_code == 200, answer.text
            return value not in answer.text and "far" not in json.dumps(
                answer.json().get("attempts", []))

        wait_until(desired_without_it, what="the desired state to drop the attempt")

        def worker_holds_nothing() -> bool:
            return not any(value.encode() in p.read_bytes()
                           for p in worker.state_dir.rglob("*")
                           if p.is_file() and "logs" not in p.parts)

        wait_until(worker_holds_nothing, what="the worker to drop the attempt's secrets")
        assert value not in worker.log()
        assert value not in (fed.server.home / "server.log").read_text()
