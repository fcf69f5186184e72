"""Secrets end to end on the local plane: real control plane, real pods, real HTTP.

alice (team-a) stores two secrets; her job gets one as variables and the other as files,
and nothing the control plane answers, logs or stores in clear holds a value. bob (team-b)
naming team-a's secret is refused with the very answer a missing secret gets.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import secrets
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.conftest import ControlPlane, py_job, running

pytestmark = pytest.mark.slow

QUEUES = [
    {"kind": "ClusterQueue", "name": "cq", "resourceGroups": [{
        "coveredResources": ["cpu"],
        "flavors": [{"name": "default", "resources": [{"name": "cpu", "nominalQuota": 4}]}]}]},
    {"kind": "LocalQueue", "name": "qa", "clusterQueue": "cq"},
    {"kind": "LocalQueue", "name": "qb", "clusterQueue": "cq"},
]

# The pod reports digests of what it was given, never the values themselves.
POD = """
import hashlib, json, os, stat
digest = lambda b: hashlib.sha256(b).hexdigest()
files = os.environ["CREDS_DIR"]  # the secret volume's mountPath
path = os.path.join(files, "token.txt")
print("RESULT " + json.dumps({
    "envFrom": digest(os.environ["HF_TOKEN"].encode()),
    "secretEnv": digest(os.environ["MY_TOKEN"].encode()),
    "file": digest(open(path, "rb").read()),
    "fileMode": oct(stat.S_IMODE(os.stat(path).st_mode)),
    "fileOwner": os.stat(path).st_uid == os.getuid(),
    "plain": os.environ["PLAIN"],
    "files": sorted(os.listdir(files)),
    "readOnly": not os.access(files, os.W_OK),
}), flush=True)
"""


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _client(url: str, key: str) -> httpx.Client:
    token = httpx.post(f"{url}/v1/auth/token", json={"key": key}, timeout=10).json()["token"]
    return httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=30)


def _setup(plane: ControlPlane) -> tuple[str, str]:
    api = plane.api
    assert api.post("/v1/config/apply", json={"documents": QUEUES}).status_code == 200
    for team, queue in (("team-a", "qa"), ("team-b", "qb")):
        assert api.put(f"/v1/teams/{team}", json={"queues": [queue]}).status_code == 200
    keys = []
    for user, team in (("alice", "team-a"), ("bob", "team-b")):
        assert api.post("/v1/users", json={"name": user, "role": "member",
                                           "teams": [team]}).status_code == 201
        created = api.post("/v1/keys", json={"user": user})
        assert created.status_code == 201, created.text
        keys.append(created.json()["key"])
    return keys[0], keys[1]


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def _job(name: str, queue: str, env_secret: str, file_secret: str, mount: Path,
         ) -> dict[str, Any]:
    return py_job(name, POD, queue=queue, volumes=[
        {"name": "creds", "secret": {"secretName": file_secret}}], pod_set={
        "env": [{"name": "PLAIN", "value": "plain"},
                {"name": "CREDS_DIR", "value": str(mount)},
                {"name": "MY_TOKEN", "valueFrom": {"secretKeyRef": {
                    "name": file_secret, "key": "token.txt"}}}],
        "envFrom": [{"secret": env_secret}],
        "mounts": [{"name": "creds", "mountPath": str(mount)}]})


@pytest.mark.skipif(os.geteuid() != 0, reason="a secret volume is mounted in the pod's own "
                    "mount namespace, which needs a control plane running as root")
def test_a_secret_reaches_the_pod_as_env_and_file_and_nowhere_else(tmp_path: Path) -> None:
    env_value, file_value = f"env-{secrets.token_hex(12)}", f"file-{secrets.token_hex(12)}"
    mount = tmp_path / "creds"  # the mountPath: a directory of the machine, empty here
    mount.mkdir()
    with running(ControlPlane(tmp_path / "home")) as plane:
        alice_key, bob_key = _setup(plane)
        url = str(plane.api.base_url).rstrip("/")
        shown: list[str] = []
        with _client(url, alice_key) as alice, _client(url, bob_key) as bob:
            for body in ({"name": "hf", "team": "team-a", "data": {"HF_TOKEN": _b64(env_value)}},
                         {"name": "creds", "team": "team-a", "type": "file",
                          "data": {"token.txt": _b64(file_value)}}):
                created = alice.post("/v1/secrets", json=body)
                assert created.status_code == 201, created.text
                shown.append(created.text)
            listed = alice.get("/v1/secrets").json()["items"]
            assert [(s["name"], s["type"], s["keys"], s["team"]) for s in listed] == [
                ("creds", "file", ["token.txt"], "team-a"), ("hf", "env", ["HF_TOKEN"], "team-a")]
            assert bob.get("/v1/secrets").json()["items"] == []

            submitted = alice.post("/v1/jobs", json=_job("uses", "qa", "hf", "creds", mount))
            assert submitted.status_code == 201, submitted.text
            shown.append(submitted.text)
            done = plane.wait_for("uses", "Succeeded", "Failed")
            assert done["status"] == "Succeeded", plane.logs("uses")
            [line] = [x for x in plane.logs("uses").splitlines() if x.startswith("RESULT ")]
            assert json.loads(line.removeprefix("RESULT ")) == {
                "envFrom": _digest(env_value), "secretEnv": _digest(file_value),
                "file": _digest(file_value), "fileMode": "0o400", "fileOwner": True,
                "plain": "plain", "files": ["token.txt"], "readOnly": True}
            assert list(mount.iterdir()) == []  # the pod's mount, seen by nobody else

            # Another team's secret is refused as a missing one is, whatever the spelling.
            for theirs, missing in (("hf", "nope"), ("team-a/hf", "team-a/nope")):
                answers = []
                for ref in (theirs, missing):
                    refused = bob.post("/v1/jobs", json=_job(f"b-{len(answers)}", "qb", ref,
                                                             ref, mount))
                    assert refused.status_code == 404, refused.text
                    answers.append(refused.json()["error"] | {
                        "message": refused.json()["error"]["message"].replace(ref, "REF")})
                assert answers[0] == answers[1]
            for params in ({"team": "team-a"}, {}):
                deleted = [bob.delete(f"/v1/secrets/{n}", params=params) for n in ("hf", "nope")]
                assert [d.status_code for d in deleted] == [404, 404]
                assert deleted[0].json()["error"]["message"].replace("hf", "X") == \
                    deleted[1].json()["error"]["message"].replace("nope", "X")
            assert len(alice.get("/v1/secrets").json()["items"]) == 2

            shown += [alice.get(f"/v1/jobs/uses{what}").text
                      for what in ("", "/events", "/logs")]
            shown += [alice.get("/v1/jobs").text, alice.get("/v1/secrets").text]
        shown.append(plane.api.get("/v1/audit").text)
        with httpx.Client(base_url=url, timeout=30) as browser:  # the dashboard, as alice
            assert browser.post("/ui/login", data={"key": alice_key}).status_code == 303
            for page in ("/ui/", "/ui/jobs", "/ui/jobs/uses"):
                answer = browser.get(page)
                assert answer.status_code == 200, (page, answer.text[:300])
                shown.append(answer.text)
            assert "uses" in shown[-1]
        shown.append(subprocess.run(
            [sys.executable, "-m", "phalanx.cli.main", "describe", "uses", "--json"],
            env={**os.environ, "PHALANX_HOME": str(plane.home)}, capture_output=True,
            text=True, timeout=60, check=True).stdout)
        assert '"secretName": "creds"' in shown[-1] or "creds" in shown[-1]
        audit = plane.api.get("/v1/audit", params={"user": "alice"}).json()["items"]
        assert [e["target"] for e in audit if e["action"] == "secret-create"] == [
            "team-a/hf", "team-a/creds"]

        # The attempt's files go with it.
        deadline = time.monotonic() + 30
        while (plane.home / "credentials" / "uses.1").exists():
            assert time.monotonic() < deadline
            time.sleep(0.1)
        server_log = (plane.home / "server.log").read_text()
        stored = b"".join(p.read_bytes() for p in plane.home.rglob("*")
                          if p.is_file() and "logs" not in p.relative_to(plane.home).parts)
        for value in (env_value, file_value):
            for text in shown:
                assert value not in text
            assert value not in server_log
            assert value.encode() not in stored  # the store holds ciphertext only
            assert _b64(value).encode() not in stored
