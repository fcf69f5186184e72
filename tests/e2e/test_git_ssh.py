"""A private git repository cloned with a team's ssh key, end to end on the local plane.

The repository is served "over ssh" by an ``ssh`` program on the control plane's PATH
(``tests/gitssh.py``) that runs git's remote command here and records the key file git
gave it: the control plane resolves the ref with the key at submit and clones the commit
with it, the key file is private while git runs and gone after, and the key's value is in
no answer or log. Another team naming the secret, or a secret of another type, is refused.
"""

from __future__ import annotations

import base64
import hashlib
import os
import secrets
import subprocess
from pathlib import Path

import httpx
import pytest

from tests.e2e.conftest import ControlPlane, running
from tests.e2e.test_secrets import _client, _setup
from tests.gitssh import FAKE_KEY, GIT, bare_repo, calls, fake_ssh

pytestmark = pytest.mark.slow


def _b64(data: str) -> str:
    return base64.b64encode(data.encode()).decode()


def test_a_private_repository_is_cloned_with_a_teams_ssh_key(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bin_dir, log = fake_ssh(tmp_path / "ssh")
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    bare, commit = bare_repo(tmp_path, {"version.txt": "private v1\n"})
    key = FAKE_KEY % secrets.token_hex(16)
    repo = f"ssh://git.example{bare}"
    with running(ControlPlane(tmp_path / "home")) as plane:
        alice_key, bob_key = _setup(plane)
        url = str(plane.api.base_url).rstrip("/")
        with _client(url, alice_key) as alice, _client(url, bob_key) as bob:
            for body in ({"name": "deploy", "team": "team-a", "type": "ssh",
                          "data": {"ssh-privatekey": _b64(key)}},
                         {"name": "plain", "team": "team-a", "data": {"A": _b64("x")}}):
                made = alice.post("/v1/secrets", json=body)
                assert made.status_code == 201, made.text

            def job(name: str, queue: str, secret: str) -> dict[str, object]:
                return {"name": name, "queue": queue,
                        "git": {"repo": repo, "ref": "main", "sshKeySecret": secret},
                        "podSets": [{"name": "w", "resources": {"cpu": "100m"}, "command": [
                            "python3", "-c", "print(open('version.txt').read().strip())"]}]}

            # Another team: the answer a secret that does not exist gets.
            theirs = bob.post("/v1/jobs", json=job("theirs", "qb", "team-a/deploy"))
            missing = bob.post("/v1/jobs", json=job("theirs", "qb", "team-a/no-such"))
            assert theirs.status_code == missing.status_code == 404, theirs.text
            refusals = [answer.json()["error"] for answer in (theirs, missing)]
            assert refusals[0] | {"message": refusals[0]["message"].replace("deploy", "X")} \
                == refusals[1] | {"message": refusals[1]["message"].replace("no-such", "X")}
            assert refusals[0]["field"] == "git.sshKeySecret"
            wrong = alice.post("/v1/jobs", json=job("wrong", "qa", "plain"))
            assert wrong.status_code == 400, wrong.text
            assert wrong.json()["error"]["field"] == "git.sshKeySecret"
            assert "not ssh" in wrong.json()["error"]["message"]
            assert calls(log) == []  # nothing refused reached git

            submitted = alice.post("/v1/jobs", json=job("private", "qa", "deploy"))
            assert submitted.status_code == 201, submitted.text
            assert submitted.json()["spec"]["git"]["commit"] == commit  # resolved at submit
            done = plane.wait_for("private", "Succeeded", "Failed")
            logs = alice.get("/v1/jobs/private/logs").text
            assert done["status"] == "Succeeded", logs
            assert logs == "private v1\n"
            described = alice.get("/v1/jobs/private").text

            # A retry of a keyed submit is the same request even if the branch moved since:
            # the key covers what was sent, and the answer is the first one's job.
            keyed = {"Idempotency-Key": "retry-1"}
            first = alice.post("/v1/jobs", json=job("keyed", "qa", "deploy"), headers=keyed)
            assert first.status_code == 201, first.text
            work = tmp_path / "work"
            (work / "version.txt").write_text("private v2\n")
            subprocess.run([*GIT, "-C", str(work), "commit", "-qam", "v2"], check=True)
            subprocess.run(["git", "-C", str(work), "push", "-q", str(bare), "main"],
                           check=True)
            retry = alice.post("/v1/jobs", json=job("keyed", "qa", "deploy"), headers=keyed)
            assert retry.status_code == 200, retry.text
            assert retry.json()["spec"]["git"]["commit"] == commit
            moved = alice.post("/v1/jobs", json=job("moved", "qa", "deploy"))
            assert moved.status_code == 201, moved.text
            assert moved.json()["spec"]["git"]["commit"] != commit  # a new submit: new commit
        seen = calls(log)
        # One ls-remote at submit, then the clone's fetch: all with the key, private.
        assert len(seen) >= 2, seen
        digest = hashlib.sha256(key.encode()).hexdigest()
        assert {c["key"]["sha256"] for c in seen} == {digest}
        assert {c["key"]["mode"] for c in seen} == {"0o600"}
        assert all("IdentitiesOnly=yes" in c["options"] for c in seen)
        assert {c["host"] for c in seen} == {"git.example"}
        for call in seen:  # the key file is gone once git is done
            assert not Path(call["key"]["path"]).exists()
            assert not Path(call["key"]["path"]).parent.exists()
        server_log = (plane.home / "server.log").read_text()
        for text in (submitted.text, described, server_log):
            assert key.splitlines()[1] not in text
        with httpx.Client(base_url=url) as anon:
            assert anon.get("/v1/secrets").status_code == 401
