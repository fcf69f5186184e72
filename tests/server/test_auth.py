"""Users, keys, tokens and who may do what, over real HTTP against a live control plane.

Two teams share the simulated cluster: alice (member of team-a, LocalQueue qa), bob
(member of team-b, qb), vera (viewer in team-a), alice's read-only key, and the
credential of alice's running job job-cred (what its pods get). The bootstrap key (the
state directory's ``token``) is the admin.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import jwt
import pytest

from phalanx.errors import AuthError
from phalanx.sdk.client import Client
from phalanx.server.jobkeys import JobKeys
from phalanx.server.keys import KeyHasher
from phalanx.server.openapi import document
from phalanx.spec.status import JobRecord
from tests.sdk.live_server import LiveServer
from tests.server.conftest import NODES
from tests.server.envelope import error

QUEUES = [
    {"kind": "ClusterQueue", "name": "cq-auth", "resourceGroups": [{
        "coveredResources": ["cpu"],
        "flavors": [{"name": "default", "resources": [{"name": "cpu", "nominalQuota": 3}]}]}]},
    {"kind": "LocalQueue", "name": "qa", "clusterQueue": "cq-auth"},
    {"kind": "LocalQueue", "name": "qb", "clusterQueue": "cq-auth"},
]
ROLES = ("anonymous", "admin", "alice", "bob", "vera", "alice-read", "alice-job")


def job(name: str, queue: str, cpu: str = "1", **extra: Any) -> dict[str, Any]:
    return {"name": name, "queue": queue, "priority": "high" if queue == "qb" else "default",
            "podSets": [{"name": "w", "resources": {"cpu": cpu}, "command": ["secret-cmd"],
                         "env": {"HF_TOKEN": "hf-real", "PHALANX_SIM_DURATION": "1h"}}],
            **extra}


def exchange(url: str, key: str) -> str:
    answer = httpx.post(f"{url}/v1/auth/token", json={"key": key}, timeout=10)
    assert answer.status_code == 200, answer.text
    token: str = answer.json()["token"]
    return token


@dataclass
class Cluster:
    server: LiveServer
    keys: dict[str, str]  # role -> API key

    def client(self, role: str, **kwargs: Any) -> httpx.Client:
        """A raw HTTP client of ``role``, with a fresh token (none for anonymous)."""
        headers = {}
        if role != "anonymous":
            headers["Authorization"] = f"Bearer {exchange(self.server.url, self.keys[role])}"
        return httpx.Client(base_url=self.server.url, headers=headers, timeout=30, **kwargs)


@pytest.fixture(scope="module")
def cluster(sim_server: LiveServer) -> Iterator[Cluster]:
    with Client(sim_server.url, sim_server.token) as admin:
        admin.apply(QUEUES)
        admin.put_team("team-a", ["qa"])
        admin.put_team("team-b", ["qb"])
        admin.put_user("alice", "member", ["team-a"])
        admin.put_user("bob", "member", ["team-b"])
        admin.put_user("vera", "viewer", ["team-a"])
        keys = {"admin": sim_server.token,
                "alice": admin.create_key("alice").key,
                "bob": admin.create_key("bob").key,
                "vera": admin.create_key("vera").key,
                "alice-read": admin.create_key("alice", scope="read").key}
    found = Cluster(sim_server, keys)
    with found.client("alice") as alice, found.client("bob") as bob:
        assert alice.post("/v1/jobs", json=job("job-a", "qa")).status_code == 201
        assert bob.post("/v1/jobs", json=job("job-b", "qb")).status_code == 201
        assert alice.post("/v1/jobs", json=job("job-cred", "qa")).status_code == 201
    keys["alice-job"] = job_credential(sim_server, "job-cred")
    yield found


def job_credential(server: LiveServer, name: str) -> str:
    """The credential the pods of job ``name``'s running attempt were given: derived as
    the control plane derives it, from the state directory's pepper (the simulated plane
    runs no pod to hand it to)."""
    deadline = time.monotonic() + 30
    with server.client() as admin:
        while (found := admin.get(f"/v1/jobs/{name}").json())["status"] != "Running":
            assert time.monotonic() < deadline, found
            time.sleep(0.05)
    # The detail adds the pods, events and the manifest (if any) to the record.
    record = JobRecord.model_validate({k: v for k, v in found.items()
                                       if k not in ("pods", "events", "manifest",
                                                    "manifestNotes")})
    return JobKeys(KeyHasher.for_home(server.home)).key_for(record, record.attempt)


# --------------------------------------------------------------------------- every route x role
OK, CREATED = 200, 201
READ = {"anonymous": 401, "admin": OK, "alice": OK, "bob": OK, "vera": OK, "alice-read": OK}
ADMIN = {"anonymous": 401, "admin": OK, "alice": 403, "bob": 403, "vera": 403,
         "alice-read": 403}


def _with(base: dict[str, int], **changes: int) -> dict[str, int]:
    return {**base, **{k.replace("_", "-"): v for k, v in changes.items()}}


# job-a is team-a's: bob (team-b) is answered as if it did not exist.
SEES_JOB_A = _with(READ, bob=404)
WRITES_JOB_A = {"anonymous": 401, "admin": OK, "alice": OK, "bob": 404, "vera": 403,
                "alice-read": 403}


PLANE_ONLY = {"anonymous": 401, "admin": 403, "alice": 403, "bob": 403, "vera": 403,
              "alice-read": 403}


NO_ARCHIVE = "0" * 64
NOT_HELD = _with(READ, admin=404, alice=404, bob=404, vera=404, alice_read=404)


def _submit(role: str) -> dict[str, Any]:
    return job(f"table-{role}", "qa")


def _manifest(role: str) -> dict[str, Any]:
    """A batch/v1 Job for queue qb (team-b's)."""
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": f"manifest-{role}",
                         "labels": {"kueue.x-k8s.io/queue-name": "qb"}},
            "spec": {"template": {"spec": {"containers": [
                {"name": "main", "command": ["true"], "resources": {"requests": {"cpu": "100m"}}},
            ]}}}}


# (method, path) -> (the request's path, its body, the status each role gets)
TABLE: dict[tuple[str, str], tuple[str, Any, dict[str, int]]] = {
    ("get", "/v1/version"): ("/v1/version", None, READ),
    ("get", "/v1/status"): ("/v1/status", None, READ),
    ("post", "/v1/jobs"): ("/v1/jobs", _submit, {
        "anonymous": 401, "admin": CREATED, "alice": CREATED, "bob": 403, "vera": 403,
        "alice-read": 403}),
    ("post", "/v1/jobs:batch"): ("/v1/jobs:batch", lambda r: {"items": [job(f"batch-{r}", "qb")]},
                                 {"anonymous": 401, "admin": CREATED, "alice": 403,
                                  "bob": CREATED, "vera": 403, "alice-read": 403}),
    ("post", "/v1/manifests"): ("/v1/manifests", lambda r: {"items": [_manifest(r)]},
                                {"anonymous": 401, "admin": CREATED, "alice": 403,
                                 "bob": CREATED, "vera": 403, "alice-read": 403}),
    ("get", "/v1/jobs"): ("/v1/jobs", None, READ),
    ("post", "/v1/jobs:cancel"): ("/v1/jobs:cancel", {"labels": {"never": "matches"}},
                                  _with(WRITES_JOB_A, bob=OK)),
    ("delete", "/v1/jobs/{name}"): ("/v1/jobs/job-a", None, _with(WRITES_JOB_A, admin=409,
                                                                   alice=409)),
    ("get", "/v1/jobs/{name}"): ("/v1/jobs/job-a", None, SEES_JOB_A),
    ("get", "/v1/jobs/{name}/events"): ("/v1/jobs/job-a/events", None, SEES_JOB_A),
    ("post", "/v1/jobs/{name}/cancel"): ("/v1/jobs/job-a/cancel", None, WRITES_JOB_A),
    ("get", "/v1/jobs/{name}/logs"): ("/v1/jobs/job-a/logs", None, SEES_JOB_A),
    ("get", "/v1/queues"): ("/v1/queues", None, READ),
    ("get", "/v1/nodes"): ("/v1/nodes", None, READ),
    ("get", "/v1/pools"): ("/v1/pools", None, READ),
    ("get", "/v1/nodes/{name}"): ("/v1/nodes/sim-b", None, READ),
    ("post", "/v1/nodes/{name}:cordon"): ("/v1/nodes/sim-b:cordon", None, ADMIN),
    ("post", "/v1/nodes/{name}:uncordon"): ("/v1/nodes/sim-b:uncordon", None, ADMIN),
    ("post", "/v1/nodes/{name}:drain"): ("/v1/nodes/sim-b:drain", {}, ADMIN),
    ("post", "/v1/config/apply"): ("/v1/config/apply", {"documents": QUEUES}, ADMIN),
    ("post", "/v1/config/delete"): ("/v1/config/delete", {"documents": [
        {"kind": "Cohort", "name": "no-such-cohort"}]}, _with(ADMIN, admin=404)),
    ("delete", "/v1/config/{kind}/{name}"): ("/v1/config/cohort/no-such-cohort", None,
                                             _with(ADMIN, admin=404)),
    ("get", "/v1/config"): ("/v1/config", None, READ),
    ("post", "/v1/auth/token"): ("/v1/auth/token", "alice-key", {r: OK for r in ROLES}),
    ("get", "/v1/auth/whoami"): ("/v1/auth/whoami", None, READ),
    ("post", "/v1/auth/signing-key:rotate"): ("/v1/auth/signing-key:rotate", None, ADMIN),
    ("get", "/v1/users"): ("/v1/users", None, ADMIN),
    ("post", "/v1/users"): ("/v1/users", {"name": "table-user", "role": "viewer"},
                            _with(ADMIN, admin=CREATED)),
    ("put", "/v1/users/{name}"): ("/v1/users/table-set-user", {"role": "viewer"},
                                  _with(ADMIN, admin=CREATED)),
    ("post", "/v1/users/{name}:disable"): ("/v1/users/table-user:disable", None, ADMIN),
    ("post", "/v1/users/{name}:enable"): ("/v1/users/table-user:enable", None, ADMIN),
    ("get", "/v1/keys"): ("/v1/keys", None, READ),
    ("post", "/v1/keys"): ("/v1/keys", {"description": "table"}, _with(
        READ, admin=CREATED, alice=CREATED, bob=CREATED, vera=CREATED, alice_read=403)),
    ("delete", "/v1/keys/{key_id}"): ("/v1/keys/000000000000", None, _with(
        READ, admin=404, alice=404, bob=404, vera=404, alice_read=403)),
    ("get", "/v1/teams"): ("/v1/teams", None, READ),
    ("put", "/v1/teams/{name}"): ("/v1/teams/team-table", {"queues": ["qa"]}, ADMIN),
    ("delete", "/v1/teams/{name}"): ("/v1/teams/no-such-team", None, _with(ADMIN, admin=404)),
    ("get", "/v1/audit"): ("/v1/audit", None, ADMIN),
    ("get", "/v1/secrets"): ("/v1/secrets", None, READ),
    ("post", "/v1/secrets"): ("/v1/secrets", lambda r: {"name": f"table-{r}",
                                                        "data": {"K": "dg=="}}, _with(
        READ, admin=CREATED, alice=CREATED, bob=CREATED, vera=403, alice_read=403)),
    ("delete", "/v1/secrets/{name}"): ("/v1/secrets/no-such-secret", None, _with(
        READ, admin=404, alice=404, bob=404, vera=403, alice_read=403)),
    ("get", "/v1/planes"): ("/v1/planes", None, READ),
    ("post", "/v1/planes"): ("/v1/planes", {"name": "table-plane"},
                             _with(ADMIN, admin=CREATED)),
    ("get", "/v1/planes/{name}"): ("/v1/planes/no-such-plane", None, _with(
        READ, admin=404, alice=404, bob=404, vera=404, alice_read=404)),
    ("delete", "/v1/planes/{name}"): ("/v1/planes/no-such-plane", None,
                                      _with(ADMIN, admin=404)),
    ("post", "/v1/planes/{name}/cordon"): ("/v1/planes/no-such-plane/cordon",
                                           {"cordoned": True}, _with(ADMIN, admin=404)),
    ("post", "/v1/planes/{name}/drain"): ("/v1/planes/no-such-plane/drain", {},
                                          _with(ADMIN, admin=404)),
    ("post", "/v1/planes/{name}/keys"): ("/v1/planes/no-such-plane/keys", None,
                                         _with(ADMIN, admin=404)),
    # Only a key of the plane's own scope speaks for a plane: no user's key does.
    ("post", "/v1/planes/{name}/hello"): ("/v1/planes/table-plane/hello", {
        "worker": "w", "compute": "local", "fenceAfter": 60}, PLANE_ONLY),
    ("post", "/v1/planes/{name}/report"): ("/v1/planes/table-plane/report",
                                           {"worker": "w"}, PLANE_ONLY),
    ("get", "/v1/planes/{name}/desired"): ("/v1/planes/table-plane/desired?wait=0", None,
                                           PLANE_ONLY),
    ("get", "/v1/planes/{name}/exec"): ("/v1/planes/table-plane/exec?wait=0", None,
                                        PLANE_ONLY),
    ("get", "/v1/planes/{name}/workdirs/{sha256}"): (
        f"/v1/planes/table-plane/workdirs/{NO_ARCHIVE}", None, PLANE_ONLY),
    # An archive nobody uploaded: absent to every reader; a body that is not its bytes is
    # refused (400) to every writer.
    ("head", "/v1/workdirs/{sha256}"): (f"/v1/workdirs/{NO_ARCHIVE}", None, NOT_HELD),
    ("get", "/v1/workdirs/{sha256}"): (f"/v1/workdirs/{NO_ARCHIVE}", None, NOT_HELD),
    ("put", "/v1/workdirs/{sha256}"): (f"/v1/workdirs/{NO_ARCHIVE}", {}, {
        "anonymous": 401, "admin": 400, "alice": 400, "bob": 400, "vera": 403,
        "alice-read": 403}),
    ("post", "/v1/workdirs:prune"): ("/v1/workdirs:prune?dryRun=true", None, ADMIN),
    # job-a is no Ray job: whoever may reach it this way is told it has no dashboard (404),
    # as another team is told it does not exist; changes need a write key first.
    **{(method, "/v1/jobs/{name}/ray/{path}"): ("/v1/jobs/job-a/ray/api/version", None,
                                                NOT_HELD)
       for method in ("get", "head", "options")},
    **{(method, "/v1/jobs/{name}/ray/{path}"): ("/v1/jobs/job-a/ray/api/jobs/", None,
                                                _with(NOT_HELD, vera=403, alice_read=403))
       for method in ("post", "put", "patch", "delete")},
}
# A job's credential is its owner, alice, minus what admins may do, keys and changes to
# secrets (403).
TABLE = {route: (path, body, {**expected, "alice-job": 403 if "/v1/keys" in route[1] or (
                     route[1].startswith("/v1/secrets") and route[0] != "get")
                              else expected["alice"]})
         for route, (path, body, expected) in TABLE.items()}


def _routes() -> list[tuple[str, str]]:
    return sorted((method, path) for path, operations in document()["paths"].items()
                  if path.startswith("/v1/") for method in operations)


def test_the_table_covers_every_route() -> None:
    assert sorted(TABLE) == _routes(), "a new route needs its row in TABLE"


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize("route", _routes(), ids=lambda r: f"{r[0].upper()} {r[1]}")
def test_every_route_answers_every_role_as_the_table_says(
    cluster: Cluster, route: tuple[str, str], role: str,
) -> None:
    path, body, expected = TABLE[route]
    if callable(body):
        body = body(role)
    if body == "alice-key":
        body = {"key": cluster.keys["alice"]}
    with cluster.client(role) as client:
        response = client.request(route[0].upper(), path, json=body)
    assert response.status_code == expected[role], (role, route, response.text)
    # A sentence saying what was needed, and a fix (a HEAD answer has no body to say it).
    if response.status_code in (401, 403) and route[0] != "head":
        _, message, fix = error(response, response.status_code)
        assert fix, message
    if response.status_code == 403:
        said = ("needs role admin", "needs role member or admin", "read-only key",
                "needs a team that may use it", "on jobs and queues only",
                "needs the key of compute plane")
        assert any(what in message for what in said), message


# --------------------------------------------------------------------------- teams and jobs
def test_a_member_submits_only_to_its_teams_queues(cluster: Cluster) -> None:
    with cluster.client("bob") as bob:
        _, message, fix = error(bob.post("/v1/jobs", json=job("bob-in-qa", "qa")), 403)
    assert "LocalQueue qa" in message and "team-b" in message and "qb" in message
    assert fix and "qa" in fix
    with cluster.client("admin") as admin:
        assert admin.get("/v1/jobs/bob-in-qa").status_code == 404  # nothing was stored


def test_other_teams_jobs_show_as_occupancy_only(cluster: Cluster) -> None:
    with cluster.client("bob") as bob:
        listed = bob.get("/v1/jobs", params={"queue": "qa"}).json()["items"]
        hidden = [j for j in listed if j["name"].startswith("hidden-")]
        assert hidden and not any(j["name"] == "job-a" for j in listed)
        shown = hidden[-1]
        assert shown["queue"] == "qa" and shown["priority"] == 0 and shown["status"]
        assert shown["spec"]["podSets"][0]["resources"] == {"cpu": "1"}
        text = json.dumps(listed)
        assert "secret-cmd" not in text and "hf-real" not in text and "alice" not in text
        # The same hidden name in every answer, so "why is my job pending" can be followed.
        again = bob.get("/v1/jobs", params={"queue": "qa"}).json()["items"]
        assert [j["name"] for j in again] == [j["name"] for j in listed]
        # Naming the job gets what a job that does not exist gets.
        field, message, fix = error(bob.get("/v1/jobs/job-a"), 404)
        missing = error(bob.get("/v1/jobs/no-such-job"), 404)
        assert (field, message.replace("job-a", "no-such-job"), fix) == missing
        assert error(bob.post("/v1/jobs/job-a/cancel"), 404)[1] == message
        assert error(bob.get("/v1/jobs/job-a/logs"), 404)[1] == message
        # Filtered by user, the other team's jobs are left out (the filter would tell).
        assert bob.get("/v1/jobs", params={"user": "alice"}).json()["items"] == []
    with cluster.client("vera") as vera:  # team-a's viewer sees team-a's job in full
        mine = vera.get("/v1/jobs/job-a").json()
        assert mine["user"] == "alice" and mine["spec"]["podSets"][0]["command"] == ["secret-cmd"]
        assert mine["spec"]["podSets"][0]["env"]["HF_TOKEN"] == "<redacted>"
    with cluster.client("alice") as alice:  # its submitter sees its secrets
        assert alice.get("/v1/jobs/job-a").json()["spec"]["podSets"][0]["env"][
            "HF_TOKEN"] == "hf-real"


def test_jobs_record_who_submitted_them_and_mine_lists_them(cluster: Cluster) -> None:
    with Client(cluster.server.url, cluster.keys["alice"]) as alice:
        alice.submit(job("mine-1", "qa", cpu="100m"))
        me = alice.whoami()
        assert (me.user, me.role, me.teams, me.queues) == ("alice", "member", ["team-a"], ["qa"])
        names = [r.name for r in alice.list(user=me.user)]
    assert "mine-1" in names and "job-a" in names and "job-b" not in names


def test_a_member_cancels_only_what_it_sees(cluster: Cluster) -> None:
    with cluster.client("admin") as admin:
        for name, queue in (("sel-a", "qa"), ("sel-b", "qb")):
            admin.post("/v1/jobs", json=job(name, queue, cpu="100m", labels={"sel": "x"}))
    with cluster.client("alice") as alice:
        cancelled = alice.post("/v1/jobs:cancel", json={"labels": {"sel": "x"}}).json()
    assert [j["name"] for j in cancelled["items"]] == ["sel-a"]
    with cluster.client("admin") as admin:
        assert admin.get("/v1/jobs/sel-b").json()["status"] == "Queued"


# --------------------------------------------------------------------------- keys and tokens
def test_a_revoked_key_and_its_tokens_are_refused_at_once(cluster: Cluster) -> None:
    with Client(cluster.server.url, cluster.server.token) as admin:
        created = admin.create_key("alice", description="to revoke")
        assert created.key.startswith(f"phx_{created.id}_")
        listed = {k.id: k for k in admin.keys("alice")}
        assert created.id in listed and "key" not in listed[created.id].to_dict()
    token = exchange(cluster.server.url, created.key)
    headers = {"Authorization": f"Bearer {token}"}
    assert httpx.get(f"{cluster.server.url}/v1/auth/whoami", headers=headers).status_code == 200
    with Client(cluster.server.url, cluster.keys["alice"]) as alice:
        alice.revoke_key(created.id)  # a member revokes its own keys
    refused = httpx.get(f"{cluster.server.url}/v1/auth/whoami", headers=headers)
    _, message, _ = error(refused, 401)
    assert "revoked" in message
    again = httpx.post(f"{cluster.server.url}/v1/auth/token", json={"key": created.key})
    assert error(again, 401)[1] == "the API key is wrong, expired or revoked"


def test_a_member_cannot_revoke_anothers_key(cluster: Cluster) -> None:
    with Client(cluster.server.url, cluster.server.token) as admin:
        bobs = admin.create_key("bob", description="bob's")
    with cluster.client("alice") as alice:
        error(alice.delete(f"/v1/keys/{bobs.id}"), 404)
        error(alice.post("/v1/keys", json={"user": "bob"}), 403)
    assert exchange(cluster.server.url, bobs.key)


def test_a_disabled_user_is_refused_at_once(cluster: Cluster) -> None:
    with Client(cluster.server.url, cluster.server.token) as admin:
        admin.put_user("dora", "member", ["team-a"])
        key = admin.create_key("dora").key
        token = exchange(cluster.server.url, key)
        headers = {"Authorization": f"Bearer {token}"}
        admin.set_user_disabled("dora")
        assert "disabled" in error(httpx.get(f"{cluster.server.url}/v1/jobs",
                                             headers=headers), 401)[1]
        error(httpx.post(f"{cluster.server.url}/v1/auth/token", json={"key": key}), 401)
        admin.set_user_disabled("dora", False)
    assert exchange(cluster.server.url, key)


def test_an_expired_key_does_not_exchange(cluster: Cluster) -> None:
    with Client(cluster.server.url, cluster.server.token) as admin:
        key = admin.create_key("alice", expires_in=0.5).key
    assert exchange(cluster.server.url, key)
    time.sleep(0.7)
    error(httpx.post(f"{cluster.server.url}/v1/auth/token", json={"key": key}), 401)


def _b64(data: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(data).encode()).decode().rstrip("=")


def test_tampered_unsigned_and_foreign_tokens_are_refused(cluster: Cluster) -> None:
    token = exchange(cluster.server.url, cluster.keys["vera"])
    header, payload, signature = token.split(".")
    claims = jwt.decode(token, options={"verify_signature": False})
    forged = {**claims, "role": "admin", "sub": "admin"}
    candidates = {
        "payload changed, signature kept": f"{header}.{_b64(forged)}.{signature}",
        "alg none": f"{_b64({'alg': 'none', 'typ': 'JWT'})}.{_b64(forged)}.",
        "alg none, signature kept": f"{_b64({'alg': 'none'})}.{_b64(forged)}.{signature}",
        "signed with another key": jwt.encode(forged, "not-the-key-" + "x" * 32, algorithm="HS256"),
        "signature cut": f"{header}.{payload}.",
    }
    for what, bad in candidates.items():
        response = httpx.get(f"{cluster.server.url}/v1/users",
                             headers={"Authorization": f"Bearer {bad}"})
        assert response.status_code == 401, what
        assert error(response, 401)[1] == "the token is not one this control plane signed"
    good = httpx.get(f"{cluster.server.url}/v1/auth/whoami",
                     headers={"Authorization": f"Bearer {token}"})
    assert good.json()["user"] == "vera"


def test_a_key_is_never_taken_as_a_token(cluster: Cluster) -> None:
    response = httpx.get(f"{cluster.server.url}/v1/jobs",
                         headers={"Authorization": f"Bearer {cluster.keys['alice']}"})
    fix = error(response, 401)[2]
    assert fix and "/v1/auth/token" in fix


def _from(address: str) -> httpx.Client:
    return httpx.Client(transport=httpx.HTTPTransport(local_address=address), timeout=10)


def test_failed_exchanges_are_limited_by_what_they_try_and_never_refuse_a_correct_key(
    cluster: Cluster,
) -> None:
    """A guesser sending keys no one has gets 10 failures from its address, then 429 until
    its bucket refills (10 a minute); any correct key from that address still exchanges
    (a pod's failures never lock out its neighbours). Wrong secrets for a real key's id
    count against that key from every address, and never refuse the key itself."""
    url = cluster.server.url
    attempts = 40
    statuses = []
    started = time.perf_counter()
    with _from("127.0.0.3") as guesser:
        for i in range(attempts):
            key = f"phx_{i:012x}_{'x' * 43}"
            statuses.append(guesser.post(f"{url}/v1/auth/token", json={"key": key}).status_code)
        took = time.perf_counter() - started
        print(f"\n{attempts} guesses in {took:.2f}s: {statuses.count(401)} answered 401, "
              f"{statuses.count(429)} 429 (not audited)")
        assert statuses[:10] == [401] * 10  # the burst
        assert statuses.count(401) <= 11 and statuses.count(429) >= attempts - 11
        refused = guesser.post(f"{url}/v1/auth/token", json={"key": f"phx_{0:012x}_{'y' * 43}"})
        assert "too many failed key exchanges for address 127.0.0.3" in error(refused, 429)[1]
        for role in ("alice", "admin", "alice-job", "bob"):  # other principals, same address
            answer = guesser.post(f"{url}/v1/auth/token", json={"key": cluster.keys[role]})
            assert answer.status_code == 200, (role, answer.text)
    with _from("127.0.0.4") as elsewhere:  # another address's unknown key: its own bucket
        error(elsewhere.post(f"{url}/v1/auth/token", json={"key": "phx_x"}), 401)

    with Client(url, cluster.server.token) as admin:
        tried = admin.create_key("alice", description="guessed")
    wrong = f"phx_{tried.id}_{'z' * 43}"
    answers = []
    for i in range(12):  # from as many addresses: the key's id is what is limited
        with _from(f"127.0.1.{i + 1}") as guesser:
            answers.append(guesser.post(f"{url}/v1/auth/token", json={"key": wrong}))
    assert [a.status_code for a in answers[:10]] == [401] * 10
    assert f"too many failed key exchanges for key {tried.id}" in error(answers[11], 429)[1]
    with _from("127.0.1.1") as owner:
        assert owner.post(f"{url}/v1/auth/token", json={"key": tried.key}).status_code == 200


# --------------------------------------------------------------------------- audit
def test_changes_are_audited_with_who_when_and_where(cluster: Cluster) -> None:
    since = time.time()
    with Client(cluster.server.url, cluster.keys["alice"]) as alice:
        alice.submit(job("audited", "qa", cpu="100m"))
        alice.cancel("audited")
        alice.create_key(description="audited key")
    with Client(cluster.server.url, cluster.server.token) as admin:
        admin.cordon("sim-a")
        admin.uncordon("sim-a")
        entries = admin.audit(since=since)
        alices = admin.audit(since=since, user="alice")
    seen = [(e.user, e.action, e.target) for e in entries]
    assert any(e.action == "login" for e in alices)
    assert ("alice", "submit", "audited") in seen and ("alice", "cancel", "audited") in seen
    assert any(user == "alice" and action == "key-create" for user, action, _ in seen)
    # The bootstrap key is the user admin, whoever runs the SDK.
    assert ("admin", "cordon", "sim-a") in seen and ("admin", "uncordon", "sim-a") in seen
    assert all(e.client == "127.0.0.1" and since <= e.time <= time.time() for e in entries)
    assert {e.user for e in alices} == {"alice"}
    submit = next(e for e in entries if e.action == "submit")
    assert submit.detail["queues"] == ["qa"] and submit.detail["jobs"] == ["audited"]


# --------------------------------------------------------------------------- token lifetime
@pytest.fixture(scope="module")
def short_lived(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with LiveServer.simulated(tmp_path_factory.mktemp("phalanx-ttl"), NODES,
                              "--token-ttl", "2s") as server:
        yield server


def test_an_expired_token_is_refused_and_the_sdk_refreshes_unnoticed(
    short_lived: LiveServer,
) -> None:
    token = exchange(short_lived.url, short_lived.token)
    headers = {"Authorization": f"Bearer {token}"}
    assert httpx.get(f"{short_lived.url}/v1/queues", headers=headers).status_code == 200
    with Client(short_lived.url, short_lived.token) as client:
        assert client.auth is not None
        client.queues()
        deadline = time.monotonic() + 5
        calls = 0
        while time.monotonic() < deadline:  # 5 s of calls across two and more lifetimes
            client.queues()
            calls += 1
            time.sleep(0.1)
        exchanges = client.auth.exchanges
    _, message, _ = error(httpx.get(f"{short_lived.url}/v1/queues", headers=headers), 401)
    assert message == "the token has expired"
    assert calls > 30 and exchanges >= 3  # refreshed before each token's end


def test_the_sdk_takes_a_token_too_and_retries_a_refused_one_once(
    short_lived: LiveServer,
) -> None:
    with Client(short_lived.url, exchange(short_lived.url, short_lived.token)) as client:
        assert client.auth is None and client.whoami().user == "admin"
        time.sleep(2.2)
        with pytest.raises(AuthError, match="expired"):
            client.whoami()  # a bare token cannot be refreshed


def test_only_the_submitter_or_an_admin_runs_commands_in_a_jobs_pods(cluster: Cluster) -> None:
    from websockets.exceptions import InvalidStatus
    from websockets.sync.client import connect

    base = cluster.server.url
    with Client(base, cluster.server.token) as admin:
        admin.put_user("amy", "member", ["team-a"])
        amy = admin.create_key("amy").key

    def answer(key: str, name: str) -> int:
        token = exchange(base, key)
        try:
            with connect(f"{base.replace('http', 'ws', 1)}/v1/jobs/{name}/exec?command=true",
                         proxy=None, additional_headers={"Authorization": f"Bearer {token}"}):
                return 101
        except InvalidStatus as refused:
            return int(refused.response.status_code)

    assert answer(amy, "job-a") == 403  # a teammate sees the job, not its pods' secrets
    assert answer(cluster.keys["bob"], "job-a") == 404  # another team's: as if it did not exist
    assert answer(cluster.keys["bob"], "no-such-job") == 404
    assert answer(cluster.keys["vera"], "job-a") == 403  # a viewer changes nothing
    assert answer(cluster.keys["alice-read"], "job-a") == 403
    # Its submitter and an admin get past the checks to the plane, which cannot exec here.
    assert answer(cluster.keys["alice"], "job-a") == 400
    assert answer(cluster.keys["admin"], "job-a") == 400
