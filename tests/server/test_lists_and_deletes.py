"""Listing pages of jobs, labels and users, bulk cancel, and deleting jobs and queue
configuration, over real HTTP against a live control plane (simulated compute plane)."""

from __future__ import annotations

import time
import uuid
from typing import Any

import httpx
import pytest

from phalanx.spec.api import JobList
from tests.server.envelope import error

pytestmark = pytest.mark.slow


def job(name: str, queue: str = "default", labels: dict[str, str] | None = None,
        duration: str = "100ms") -> dict[str, Any]:
    return {"name": name, "queue": queue, "labels": labels or {},
            "podSets": [{"name": "w", "resources": {"cpu": "100m"},
                         "env": {"PHALANX_SIM_DURATION": duration}}]}


def queue_docs(name: str, flavor: str = "default", cohort: str | None = None,
               stop: str = "None") -> list[dict[str, Any]]:
    cq: dict[str, Any] = {
        "kind": "ClusterQueue", "name": name, "stopPolicy": stop,
        "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
            {"name": flavor, "resources": [{"name": "cpu", "nominalQuota": "1"}]}]}],
    }
    if cohort:
        cq["cohort"] = cohort
    return [cq, {"kind": "LocalQueue", "name": name, "clusterQueue": name}]




def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def wait_status(api: httpx.Client, name: str, *statuses: str) -> dict[str, Any]:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        body = api.get(f"/v1/jobs/{name}").json()
        if body["status"] in statuses:
            return body
        time.sleep(0.05)
    raise AssertionError(f"{name} never reached {statuses}: {body['status']}")


# --------------------------------------------------------------------------- listing
def test_jobs_come_in_pages_newest_first_with_a_continue_token(api: httpx.Client) -> None:
    q = unique("pages")
    assert api.post("/v1/config/apply", json={"documents": queue_docs(q, stop="Hold")}).is_success
    names = [f"{q}-{i}" for i in range(5)]
    for name in names:
        assert api.post("/v1/jobs", json=job(name, q)).status_code == 201

    first = api.get("/v1/jobs", params={"queue": q, "limit": 2})
    assert first.status_code == 200, first.text
    page = JobList.model_validate(first.json())
    assert [r.name for r in page.items] == names[::-1][:2]
    assert first.json()["remainingItemCount"] == 3
    token = first.json()["continue"]
    rest = api.get("/v1/jobs", params={"queue": q, "limit": 10, "continue": token}).json()
    assert [r["name"] for r in rest["items"]] == names[::-1][2:]
    assert rest["remainingItemCount"] == 0
    assert rest.get("continue") is None


def test_a_bad_continue_token_is_a_400_naming_it(api: httpx.Client) -> None:
    field, _, fix = error(api.get("/v1/jobs", params={"continue": "garbage!"}), 400)
    assert field == "continue"
    assert fix


def acting_as(api: httpx.Client, user: str) -> dict[str, str]:
    """Headers by which the admin acts as ``user`` (made an admin, to submit anywhere)."""
    assert api.put(f"/v1/users/{user}", json={"role": "admin"}).status_code in (200, 201)
    return {"X-Phalanx-Act-As": user}


def test_labels_and_users_filter_lists(api: httpx.Client) -> None:
    q = unique("labels")
    api.post("/v1/config/apply", json={"documents": queue_docs(q, stop="Hold")})
    api.post("/v1/jobs", json=job(f"{q}-a", q, {"team": "nlp", "app.kubernetes.io/part": "x"}),
             headers=acting_as(api, "ann"))
    api.post("/v1/jobs", json=job(f"{q}-b", q, {"team": "vision"}),
             headers=acting_as(api, "bob"))
    api.post("/v1/jobs", json=job(f"{q}-c", q))

    def names(**params: Any) -> list[str]:
        response = api.get("/v1/jobs", params={"queue": q, **params})
        assert response.status_code == 200, response.text
        return [r["name"] for r in response.json()["items"]]

    assert names(label="team=nlp") == [f"{q}-a"]
    assert names(label="team=nlp,app.kubernetes.io/part=x") == [f"{q}-a"]
    assert names(user="bob") == [f"{q}-b"]
    assert names(user="admin") == [f"{q}-c"]  # the bootstrap key's
    assert api.get(f"/v1/jobs/{q}-a").json()["user"] == "ann"


@pytest.mark.parametrize(("labels", "words"), [
    ({"bad key": "v"}, "label key"),
    ({"team": "x" * 64}, "label value"),
    ({"-lead": "v"}, "label key"),
    ({"Team": "not ok!"}, "label value"),
])
def test_labels_are_checked_like_kubernetes_labels(
    api: httpx.Client, labels: dict[str, str], words: str
) -> None:
    field, message, fix = error(api.post("/v1/jobs", json=job(unique("bad"), labels=labels)), 400)
    assert field is not None and field.startswith("labels")
    assert words in message
    assert fix


def test_a_bad_label_selector_and_act_as_header_are_400s(api: httpx.Client) -> None:
    field, _, _ = error(api.get("/v1/jobs", params={"label": "team"}), 400)
    assert field == "label"
    field, _, _ = error(api.post("/v1/jobs", json=job(unique("u")),
                                 headers={"X-Phalanx-Act-As": "a b\tc"}), 400)
    assert field == "X-Phalanx-Act-As"


# --------------------------------------------------------------------------- bulk cancel
def test_bulk_cancel_by_queue_label_and_user(api: httpx.Client) -> None:
    q = unique("bulk")
    api.post("/v1/config/apply", json={"documents": queue_docs(q, stop="Hold")})
    for i, (labels, user) in enumerate([({"run": "1"}, "ann"), ({"run": "2"}, "ann"),
                                        ({"run": "2"}, "bob"), ({}, "bob")]):
        api.post("/v1/jobs", json=job(f"{q}-{i}", q, labels), headers=acting_as(api, user))

    by_label = api.post("/v1/jobs:cancel", json={"queue": q, "labels": {"run": "2"}})
    assert by_label.status_code == 200, by_label.text
    assert sorted(r["name"] for r in by_label.json()["items"]) == [f"{q}-1", f"{q}-2"]
    by_user = api.post("/v1/jobs:cancel", json={"queue": q, "user": "ann"})
    assert [r["name"] for r in by_user.json()["items"]] == [f"{q}-0"]
    statuses = {r["name"]: r["status"] for r in
                api.get("/v1/jobs", params={"queue": q}).json()["items"]}
    assert statuses == {f"{q}-0": "Cancelled", f"{q}-1": "Cancelled", f"{q}-2": "Cancelled",
                        f"{q}-3": "Queued"}
    rest = api.post("/v1/jobs:cancel", json={"queue": q})
    assert [r["name"] for r in rest.json()["items"]] == [f"{q}-3"]


def test_bulk_cancel_needs_a_selector(api: httpx.Client) -> None:
    field, _, fix = error(api.post("/v1/jobs:cancel", json={}), 400)
    assert field == "selector"
    assert fix


# --------------------------------------------------------------------------- deleting jobs
def test_a_live_job_is_not_deleted_a_finished_one_is_and_its_name_is_free(
    api: httpx.Client,
) -> None:
    name = unique("del")
    api.post("/v1/jobs", json=job(name, duration="60s"))
    wait_status(api, name, "Running")
    field, _, fix = error(api.delete(f"/v1/jobs/{name}"), 409)
    assert field == "name"
    assert "cancel it first" in (fix or "")
    api.post(f"/v1/jobs/{name}/cancel")
    wait_status(api, name, "Cancelled")

    deleted = api.delete(f"/v1/jobs/{name}")
    assert deleted.status_code == 200, deleted.text
    assert error(api.get(f"/v1/jobs/{name}"), 404)
    assert api.post("/v1/jobs", json=job(name)).status_code == 201
    wait_status(api, name, "Succeeded")


def test_deleting_an_unknown_job_is_a_404(api: httpx.Client) -> None:
    error(api.delete(f"/v1/jobs/{unique('nope')}"), 404)


# --------------------------------------------------------------------------- deleting config
def test_config_in_use_is_not_deleted_and_nothing_changes(api: httpx.Client) -> None:
    q = unique("cfg")
    flavor = {"kind": "ResourceFlavor", "name": f"{q}-flavor"}
    docs = [flavor, *queue_docs(q, flavor=f"{q}-flavor", cohort=f"{q}-cohort", stop="Hold")]
    assert api.post("/v1/config/apply", json={"documents": docs}).is_success
    api.post("/v1/jobs", json=job(f"{q}-job", q))

    # A flavor a ClusterQueue names.
    _, message, _ = error(api.delete(f"/v1/config/resourceflavor/{q}-flavor"), 409)
    assert f"ClusterQueue {q}" in message
    # A cohort with members.
    _, message, _ = error(api.delete(f"/v1/config/cohort/{q}-cohort"), 409)
    assert f"ClusterQueue {q}" in message
    # A ClusterQueue a LocalQueue points at.
    _, message, _ = error(api.delete(f"/v1/config/clusterqueue/{q}"), 409)
    assert f"LocalQueue {q}" in message
    # A LocalQueue with live jobs; together with its ClusterQueue, in one request: refused whole.
    refs = [{"kind": "LocalQueue", "name": q}, {"kind": "ClusterQueue", "name": q}]
    _, message, fix = error(api.post("/v1/config/delete", json={"documents": refs}), 409)
    assert f"{q}-job" in message and fix
    kept = {(d["kind"], d["name"]) for d in api.get("/v1/config").json()["documents"]}
    assert {("LocalQueue", q), ("ClusterQueue", q), ("ResourceFlavor", f"{q}-flavor")} <= kept

    # Once the job is cancelled, everything goes in one request.
    api.post(f"/v1/jobs/{q}-job/cancel")
    wait_status(api, f"{q}-job", "Cancelled")
    gone = api.post("/v1/config/delete", json={"documents": [*docs,
                                                             {"kind": "Cohort",
                                                              "name": f"{q}-cohort"}]})
    assert gone.status_code == 200, gone.text
    assert {(d["kind"], d["name"]) for d in gone.json()["deleted"]} == {
        ("ResourceFlavor", f"{q}-flavor"), ("ClusterQueue", q), ("LocalQueue", q),
        ("Cohort", f"{q}-cohort")}
    left = {(d["kind"], d["name"]) for d in api.get("/v1/config").json()["documents"]}
    assert not left & {("LocalQueue", q), ("ClusterQueue", q), ("Cohort", f"{q}-cohort")}


def test_a_priority_class_of_a_live_job_is_not_deleted(api: httpx.Client) -> None:
    q = unique("prio")
    api.post("/v1/config/apply", json={"documents": [
        *queue_docs(q, stop="Hold"), {"kind": "PriorityClass", "name": q, "value": 5}]})
    api.post("/v1/jobs", json={**job(f"{q}-job", q), "priority": q})
    _, message, _ = error(api.delete(f"/v1/config/PriorityClass/{q}"), 409)
    assert f"{q}-job" in message
    api.post(f"/v1/jobs/{q}-job/cancel")
    wait_status(api, f"{q}-job", "Cancelled")
    assert api.delete(f"/v1/config/priorityclass/{q}").status_code == 200


def test_deleting_unknown_config_names_it(api: httpx.Client) -> None:
    field, _, _ = error(api.delete("/v1/config/clusterqueue/no-such-queue"), 404)
    assert field == "ClusterQueue no-such-queue"
    field, _, fix = error(api.delete("/v1/config/widget/x"), 400)
    assert field == "kind" and fix
