"""``phalanx backup`` of a live control plane and ``phalanx restore`` onto a new store and
state directory, on SQLite and PostgreSQL: the restored control plane has the same jobs,
takes the same API key and tokens, and hands the same secret to a job; a job that was
running when the backup was taken is found as a restart finds it, and a finished one does
not run again. Refusals: no passphrase, a wrong one, a store that is not empty."""

from __future__ import annotations

import base64
import hashlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from phalanx.defaults import TOKEN_FILE
from phalanx.server.keys import CONTROL_PLANE_ID_FILE, PEPPER_FILE
from phalanx.server.secrets import SECRET_KEYS_FILE
from phalanx.server.tokens import SIGNING_FILE
from phalanx.store.backup import PASSPHRASE_ENV, STATE_FILES
from tests.e2e.conftest import REPO, ControlPlane, py_job, running
from tests.leftovers import kill_pods_under
from tests.store.postgres import fresh_database, postgres_admin_url

QUEUES = [
    {"kind": "ClusterQueue", "name": "cq", "resourceGroups": [{
        "coveredResources": ["cpu"],
        "flavors": [{"name": "default", "resources": [{"name": "cpu", "nominalQuota": 1}]}]}]},
    {"kind": "LocalQueue", "name": "qa", "clusterQueue": "cq"},
]
SECRET_VALUE = "hf-" + "s3cr3t" * 4
USES_SECRET = ("import hashlib, os; print('DIGEST', "
               "hashlib.sha256(os.environ['HF_TOKEN'].encode()).hexdigest(), flush=True)")


@contextmanager
def _database(kind: str, home: Path) -> Iterator[str | None]:
    if kind == "sqlite":
        yield None  # the state directory's own SQLite file
        return
    with fresh_database(postgres_admin_url()) as url:
        yield url


def _phalanx(home: Path, *args: str, passphrase: str | None = "correct horse battery"
             ) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != PASSPHRASE_ENV}
    if passphrase is not None:
        env[PASSPHRASE_ENV] = passphrase
    return subprocess.run([sys.executable, "-m", "phalanx.cli", "--home", str(home), *args],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=120)


def _db_args(db: str | None) -> list[str]:
    return ["--db", db] if db else []


def _client(url: str, key: str) -> httpx.Client:
    answer = httpx.post(f"{url}/v1/auth/token", json={"key": key}, timeout=10)
    assert answer.status_code == 200, answer.text
    return httpx.Client(base_url=url, headers={"Authorization": f"Bearer {answer.json()['token']}"},
                        timeout=30)


def test_the_state_files_a_backup_holds_are_the_control_planes_own() -> None:
    assert set(STATE_FILES) == {PEPPER_FILE, SIGNING_FILE, TOKEN_FILE, SECRET_KEYS_FILE,
                                CONTROL_PLANE_ID_FILE}


@pytest.mark.parametrize("kind", ["sqlite", pytest.param("postgresql",
                                                         marks=pytest.mark.postgres)])
def test_a_restored_control_plane_has_the_same_jobs_keys_and_secrets(
        tmp_path: Path, kind: str) -> None:
    old_home, new_home = tmp_path / "old", tmp_path / "new"
    backup_file = tmp_path / "phalanx.backup"
    with _database(kind, old_home) as old_db, _database(kind, new_home) as new_db:
        with running(ControlPlane(old_home, db=old_db)) as old:
            api = old.api
            assert api.post("/v1/config/apply", json={"documents": QUEUES}).status_code == 200
            assert api.put("/v1/teams/team-a", json={"queues": ["qa"]}).status_code == 200
            assert api.post("/v1/users", json={"name": "alice", "role": "member",
                                               "teams": ["team-a"]}).status_code == 201
            alice_key = api.post("/v1/keys", json={"user": "alice"}).json()["key"]
            url = str(api.base_url).rstrip("/")
            with _client(url, alice_key) as alice:
                created = alice.post("/v1/secrets", json={
                    "name": "hf", "team": "team-a",
                    "data": {"HF_TOKEN": base64.b64encode(SECRET_VALUE.encode()).decode()}})
                assert created.status_code == 201, created.text
                old_token = alice.headers["Authorization"]
                for spec in (py_job("done", "print('once', flush=True)", queue="qa"),
                             py_job("long", "import time; time.sleep(600)", queue="qa"),
                             py_job("waiting", "print('later')", queue="qa")):
                    spec["podSets"][0]["resources"] = {"cpu": "1"}
                    assert alice.post("/v1/jobs", json=spec).status_code == 201
                    if spec["name"] == "done":
                        old.wait_for("done", "Succeeded")
                old.wait_for("long", "Running")
                attempts = {n: old.job(n)["attempt"] for n in ("done", "long")}
                assert old.job("waiting")["status"] == "Queued"  # the one CPU is taken

            # Taken while the control plane runs: one snapshot of the store, and the keys.
            made = _phalanx(old_home, "backup", str(backup_file), *_db_args(old_db))
            assert made.returncode == 0, made.stderr
            assert oct(backup_file.stat().st_mode & 0o777) == "0o600"
            assert SECRET_VALUE.encode() not in backup_file.read_bytes()
            assert b"alice" not in backup_file.read_bytes()  # encrypted, not only the keys
            old.stop(signal.SIGKILL)  # the old machine is lost, with its pods
        kill_pods_under(old_home)

        # Without a passphrase, or with another one, nothing is restored.
        bare = _phalanx(new_home, "restore", str(backup_file), *_db_args(new_db),
                        passphrase=None)
        assert bare.returncode == 2 and "--passphrase-file" in bare.stderr, bare.stderr
        wrong = _phalanx(new_home, "restore", str(backup_file), *_db_args(new_db),
                         passphrase="wrong")
        assert wrong.returncode == 2 and "passphrase" in wrong.stderr, wrong.stderr
        assert not any((new_home / name).exists() for name in STATE_FILES)

        restored = _phalanx(new_home, "restore", str(backup_file), *_db_args(new_db))
        assert restored.returncode == 0, restored.stderr
        for name in STATE_FILES:
            assert (new_home / name).read_text() == (old_home / name).read_text(), name
        # A second restore onto the now filled store is refused, naming --db.
        again = _phalanx(new_home, "restore", str(backup_file), *_db_args(new_db))
        assert again.returncode == 2 and "--db" in again.stderr, again.stderr

        with running(ControlPlane(new_home, db=new_db)) as new:
            url = str(new.api.base_url).rstrip("/")
            # A token the old control plane signed is good here: the same signing keys.
            assert httpx.get(f"{url}/v1/auth/whoami", headers={"Authorization": old_token},
                             timeout=10).json()["user"] == "alice"
            with _client(url, alice_key) as alice:  # the same API key (hash and pepper)
                names = {j["name"]: j for j in alice.get("/v1/jobs").json()["items"]}
                assert set(names) == {"done", "long", "waiting"}
                assert names["done"]["status"] == "Succeeded"
                # The job that ran when the backup was taken lost its pods with the old
                # machine: found as a restart finds it, it runs again as a new attempt.
                long = new.wait_for("long", "Running", timeout=90)
                assert long["attempt"] == attempts["long"] + 1, long
                done = new.job("done")  # finished: never run again
                assert (done["status"], done["attempt"]) == ("Succeeded", attempts["done"])

                cancel = alice.post("/v1/jobs/long/cancel")
                assert cancel.status_code in (200, 202), cancel.text
                new.wait_for("waiting", "Succeeded", timeout=90)
                # The secret decrypts with the restored key and reaches a job.
                spec = py_job("uses", USES_SECRET, queue="qa", pod_set={
                    "envFrom": [{"secret": "hf"}]})
                assert alice.post("/v1/jobs", json=spec).status_code == 201
                assert new.wait_for("uses", "Succeeded", "Failed")["status"] == "Succeeded"
                digest = hashlib.sha256(SECRET_VALUE.encode()).hexdigest()
                assert f"DIGEST {digest}" in new.logs("uses")
