"""Who owns what, who may act as whom, and what a refusal tells: over real HTTP against a
live control plane of its own (its last admin is disabled here, so it is not shared).

Teams: team-a (LocalQueue qa: alice) and team-b (qb: bob). The bootstrap key is the
user admin.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from phalanx.sdk.client import Client
from tests.sdk.live_server import LiveServer
from tests.server.conftest import NODES
from tests.server.envelope import error

QUEUES = [
    {"kind": "ClusterQueue", "name": "cq-rules", "resourceGroups": [{
        "coveredResources": ["cpu"],
        "flavors": [{"name": "default", "resources": [{"name": "cpu", "nominalQuota": 4}]}]}]},
    {"kind": "LocalQueue", "name": "qa", "clusterQueue": "cq-rules"},
    {"kind": "LocalQueue", "name": "qb", "clusterQueue": "cq-rules"},
]
ACT_AS = "X-Phalanx-Act-As"


def job(name: str, queue: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "queue": queue,
            "podSets": [{"name": "w", "resources": {"cpu": "100m"}, "command": ["run"],
                         "env": {"HF_TOKEN": "hf-real", "PHALANX_SIM_DURATION": "1h"}}],
            **extra}


@dataclass
class Site:
    server: LiveServer
    keys: dict[str, str]  # user -> API key

    def api(self, user: str, **headers: str) -> httpx.Client:
        """A raw HTTP client of ``user``'s, with a fresh token."""
        answer = httpx.post(f"{self.server.url}/v1/auth/token",
                            json={"key": self.keys[user]}, timeout=10)
        assert answer.status_code == 200, answer.text
        return httpx.Client(base_url=self.server.url, timeout=30, headers={
            "Authorization": f"Bearer {answer.json()['token']}", **headers})


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    with LiveServer.simulated(tmp_path_factory.mktemp("phalanx-rules"), NODES) as server:
        with Client(server.url, server.token) as admin:
            admin.apply(QUEUES)
            admin.put_team("team-a", ["qa"])
            admin.put_team("team-b", ["qb"])
            admin.put_user("alice", "member", ["team-a"])
            admin.put_user("bob", "member", ["team-b"])
            keys = {"admin": server.token, "alice": admin.create_key("alice").key,
                    "bob": admin.create_key("bob").key}
        yield Site(server, keys)


# --------------------------------------------------------------------------- who owns a job
def test_the_local_admins_jobs_are_admins_and_a_later_user_of_the_os_name_owns_none(
    site: Site,
) -> None:
    """The bootstrap key is the user admin: a client naming an OS user (as the CLI once
    did, ``X-Phalanx-User``) changes nothing, so a user later created under that name
    finds nothing of the admin's."""
    with site.api("admin", **{"X-Phalanx-User": "root"}) as admin:
        created = admin.post("/v1/jobs", json=job("admins-own", "qb"))
        assert created.status_code == 201, created.text
        assert created.json()["user"] == "admin"
        assert admin.get("/v1/jobs/admins-own").json()["spec"]["podSets"][0]["env"][
            "HF_TOKEN"] == "hf-real"  # the admin owns it: its secrets are shown
        made = admin.post("/v1/users", json={"name": "root", "role": "member",
                                             "teams": ["team-a"]})
        assert made.status_code == 201, made.text
        site.keys["root"] = admin.post("/v1/keys", json={"user": "root"}).json()["key"]
    with site.api("root") as root:
        error(root.get("/v1/jobs/admins-own"), 404)
        error(root.post("/v1/jobs/admins-own/cancel"), 404)
        assert root.get("/v1/jobs", params={"user": "root"}).json()["items"] == []


def test_an_admin_acts_as_another_user_only_explicitly_and_audited(site: Site) -> None:
    with site.api("admin", **{ACT_AS: "alice"}) as as_alice:
        submitted = as_alice.post("/v1/jobs", json=job("acted-for-alice", "qa"))
        assert submitted.status_code == 201, submitted.text
        assert submitted.json()["user"] == "alice"
        assert as_alice.get("/v1/auth/whoami").json()["user"] == "alice"
        # Acting as a member is being one: admin routes are refused.
        assert "needs role admin; alice is a member" in error(as_alice.get("/v1/users"),
                                                               403)[1]
        error(as_alice.post("/v1/jobs", json=job("acted-in-qb", "qb")), 403)
    with site.api("admin", **{ACT_AS: "no-such-user"}) as nobody:
        assert error(nobody.get("/v1/jobs"), 400)[0] == ACT_AS
    with site.api("admin") as admin:
        entries = admin.get("/v1/audit", params={"limit": 50}).json()["items"]
    acted = [e for e in entries if e["action"] == "act-as"]
    assert acted and {(e["user"], e["target"]) for e in acted} == {("admin", "alice")}
    assert any("POST /v1/jobs" in e["detail"]["request"] for e in acted)
    submit = next(e for e in entries if e["action"] == "submit"
                  and e["target"] == "acted-for-alice")
    assert submit["user"] == "alice" and submit["detail"]["actedBy"] == "admin"
    # Anyone else is refused before the name is looked at: the answer is the same for a
    # user that exists and one that does not.
    answers = []
    for named in ("bob", "no-such-user"):
        with site.api("alice", **{ACT_AS: named}) as alice:
            refused = alice.get("/v1/jobs")
            answers.append(refused.json())
            assert "needs role admin" in error(refused, 403)[1]
    assert answers[0] == answers[1]


# --------------------------------------------------------------------------- the last admin
def test_a_taken_user_name_is_refused_not_overwritten(site: Site) -> None:
    with site.api("admin") as admin:
        taken = admin.post("/v1/users", json={"name": "alice", "role": "viewer"})
        field, message, fix = error(taken, 409)
        assert (field, message) == ("name", "user alice already exists")
        assert fix and "phalanx users set alice" in fix
        alice = next(u for u in admin.get("/v1/users").json()["items"] if u["name"] == "alice")
        assert (alice["role"], alice["teams"]) == ("member", ["team-a"])
        changed = admin.put("/v1/users/alice", json={"role": "member",
                                                     "teams": ["team-a", "team-b"]})
        assert changed.status_code == 200 and changed.json()["teams"] == ["team-a", "team-b"]
        admin.put("/v1/users/alice", json={"role": "member", "teams": ["team-a"]})


def test_the_last_admin_cannot_be_disabled_or_demoted_and_a_disabled_admins_raw_key_is_refused(
    site: Site,
) -> None:
    url = site.server.url
    raw = {"Authorization": f"Bearer {site.server.token}"}  # the bootstrap key, unexchanged
    with site.api("admin") as admin:
        _, message, fix = error(admin.post("/v1/users/admin:disable"), 409)
        assert "admin is the last enabled admin" in message and fix and "--role admin" in fix
        error(admin.put("/v1/users/admin", json={"role": "viewer"}), 409)
        assert admin.get("/v1/users").json()["items"][0] == {
            **admin.get("/v1/users").json()["items"][0], "role": "admin", "disabled": False}
        admin.post("/v1/users", json={"name": "ada", "role": "admin"})
        site.keys["ada"] = admin.post("/v1/keys", json={"user": "ada"}).json()["key"]
        assert admin.post("/v1/users/admin:disable").status_code == 200
    assert "user admin is disabled" in error(httpx.get(f"{url}/v1/jobs", headers=raw), 401)[1]
    error(httpx.post(f"{url}/v1/auth/token", json={"key": site.server.token}), 401)
    with site.api("ada") as ada:
        error(ada.post("/v1/users/ada:disable"), 409)  # now ada is the last
        assert ada.post("/v1/users/admin:enable").status_code == 200
    assert httpx.get(f"{url}/v1/jobs", headers=raw).status_code == 200


# --------------------------------------------------------------------------- what refusals tell
def _without(name: str, body: dict[str, Any]) -> str:
    return re.sub(re.escape(name), "NAME", str(body))


def test_another_teams_job_names_answer_as_unavailable_names_and_unknown_dependencies(
    site: Site,
) -> None:
    with site.api("bob") as bob:
        assert bob.post("/v1/jobs", json=job("bobs-job", "qb")).status_code == 201
    with site.api("alice") as alice:
        assert alice.post("/v1/jobs", json=job("alices-job", "qa")).status_code == 201
        own = alice.post("/v1/jobs", json=job("alices-job", "qa"))
        assert "already exists" in error(own, 409)[1]  # its own: said as it is
        clash = alice.post("/v1/jobs", json=job("bobs-job", "qa"))
        reserved = alice.post("/v1/jobs", json=job("hidden-0123abcd", "qa"))
        assert error(clash, 409)[1] == "the job name 'bobs-job' is not available"
        assert _without("bobs-job", clash.json()) == _without("hidden-0123abcd",
                                                              reserved.json())
        batch = alice.post("/v1/jobs:batch", json={"items": [job("fresh-1", "qa"),
                                                             job("bobs-job", "qa")]})
        assert error(batch, 409)[0] == "items[1].name"
        listed = alice.get("/v1/jobs").json()["items"]
        assert "bobs-job" not in str(listed)  # nor in the hidden job's admission
        error(alice.get("/v1/jobs/fresh-1"), 404)

        hidden = alice.post("/v1/jobs", json=job("after-b", "qa", dependsOn=["bobs-job"]))
        unknown = alice.post("/v1/jobs", json=job("after-b", "qa", dependsOn=["no-such"]))
        assert error(hidden, 400)[0] == "dependsOn[0]"
        assert _without("bobs-job", hidden.json()) == _without("no-such", unknown.json())
        own_dep = alice.post("/v1/jobs", json=job("after-a", "qa", dependsOn=["alices-job"]))
        assert own_dep.status_code == 201, own_dep.text


def test_the_dashboards_resubmit_answers_another_teams_job_as_a_missing_one(
    site: Site,
) -> None:
    with httpx.Client(base_url=site.server.url, timeout=30) as ui:
        assert ui.post("/ui/login", data={"key": site.keys["alice"]}).status_code == 303
        match = re.search(r'name="csrf" value="([^"]+)"', ui.get("/ui/").text)
        assert match is not None
        hidden = ui.post("/ui/jobs/bobs-job/resubmit", data={"csrf": match.group(1)})
        missing = ui.post("/ui/jobs/no-such-job/resubmit", data={"csrf": match.group(1)})
    assert hidden.status_code == missing.status_code == 404
    assert hidden.text.replace("bobs-job", "NAME") == missing.text.replace("no-such-job", "NAME")
