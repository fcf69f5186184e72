"""A check across several fields of a spec names the field at fault in the error envelope, as
a field's own check does: over real HTTP, a submit, a batch and an apply refused by such a
check say which field to change (pydantic alone would give these errors no field)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from phalanx.spec.resources import MAX_ENV_BYTES, MAX_JOB_SPEC_BYTES
from tests.server.envelope import error

pytestmark = pytest.mark.slow

WORKDIR = {"sha256": "0" * 64, "size": 10}
GIT = {"repo": "https://example.com/acme/train.git", "commit": "a" * 40}


def job(name: str, **fields: Any) -> dict[str, Any]:
    return {"name": name, "podSets": [{"command": ["true"]}], **fields}


@pytest.mark.parametrize(("body", "field", "said"), [
    (job("ray-off-kind", ray={"entrypoint": "python train.py"}), "ray", "kind: ray"),
    (job("two-sources", workdir=WORKDIR, git=GIT), "git", "remove one of them"),
    (job("two-levels", topology={"required": "rack", "preferred": "block"}),
     "topology.preferred", "choose one"),
    (job("min-above", podSets=[{"command": ["true"], "replicas": 2, "minReplicas": 3}]),
     "podSets[0].minReplicas", "at most replicas"),
    (job("var-twice", podSets=[{"command": ["true"], "env": {"A": "1"}, "secretEnv": [
        {"name": "A", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}]}]),
     "podSets[0].secretEnv[0].name", "set each variable once"),
])
def test_a_submit_refused_by_a_check_across_fields_names_the_field(
    api: httpx.Client, body: dict[str, Any], field: str, said: str,
) -> None:
    named, message, fix = error(api.post("/v1/jobs", json=body), 400)
    assert named == field, (named, message)
    assert said in f"{message}; {fix}"
    assert api.get(f"/v1/jobs/{body['name']}").status_code == 404  # nothing was stored


def test_a_spec_over_the_size_cap_names_its_biggest_part(api: httpx.Client) -> None:
    # Each pod set's env is within its own bound; together they pass the job's.
    share = MAX_ENV_BYTES - 100
    sets = MAX_JOB_SPEC_BYTES // share + 1
    pod_sets = [{"name": f"p{i}", "command": ["true"], "env": {"DATA": "x" * (share - i)}}
                for i in range(sets)]
    pod_sets[2]["env"] = {"DATA": "y" * share, "B": "1"}  # the biggest part
    named, message, fix = error(api.post("/v1/jobs", json=job("too-big", podSets=pod_sets)),
                                400)
    assert named == "podSets[2].env", (named, message)
    assert str(MAX_JOB_SPEC_BYTES) in message and fix and "file" in fix
    labels = {f"k{i}": "v" * 60 for i in range(MAX_JOB_SPEC_BYTES // 60)}
    named, _, _ = error(api.post("/v1/jobs", json=job("many-labels", labels=labels)), 400)
    assert named == "labels"


def test_a_batch_names_the_job_and_its_field(api: httpx.Client) -> None:
    body = {"items": [job("fine-one"), job("ray-here", ray={"entrypoint": "python x.py"})]}
    named, _, _ = error(api.post("/v1/jobs:batch", json=body), 400)
    assert named == "items[1].ray"
    assert api.get("/v1/jobs/fine-one").status_code == 404  # nothing half-applied


@pytest.mark.parametrize(("document", "field"), [
    ({"kind": "ClusterQueue", "name": "twice", "resourceGroups": [
        {"coveredResources": ["cpu"],
         "flavors": [{"name": "f", "resources": [{"name": "cpu", "nominalQuota": "1"}]}]},
        {"coveredResources": ["memory", "cpu"],
         "flavors": [{"name": "f", "resources": [{"name": "memory", "nominalQuota": "1Gi"},
                                                 {"name": "cpu", "nominalQuota": "1"}]}]}]},
     "resourceGroups[1].coveredResources[1]"),
    ({"kind": "ClusterQueue", "name": "lends", "resourceGroups": [
        {"coveredResources": ["cpu"], "flavors": [{"name": "f", "resources": [
            {"name": "cpu", "nominalQuota": "1", "lendingLimit": "2"}]}]}]},
     "resourceGroups[0].flavors[0].resources[0].lendingLimit"),
    ({"kind": "ClusterQueue", "name": "uncovered", "resourceGroups": [
        {"coveredResources": ["cpu", "memory"], "flavors": [{"name": "f", "resources": [
            {"name": "cpu", "nominalQuota": "1"}]}]}]},
     "resourceGroups[0].flavors[0].resources"),
    ({"kind": "ResourceFlavor", "name": "burst",
      "provisioning": {"provider": "local", "node": {"cpu": "2"}}}, "nodeLabels"),
    ({"kind": "ResourceFlavor", "name": "burst", "nodeLabels": {"pool": "burst"},
      "provisioning": {"provider": "local", "node": {"cpu": "2"}, "options": {"dely": 1}}},
     "provisioning.options.dely"),
])
def test_an_apply_refused_by_a_check_across_fields_names_the_field(
    api: httpx.Client, document: dict[str, Any], field: str,
) -> None:
    named, message, _ = error(api.post("/v1/config/apply", json={"documents": [document]}),
                              400)
    assert named is not None and named.startswith("documents[0]"), named
    assert named.endswith(f".{field}"), (named, message)
