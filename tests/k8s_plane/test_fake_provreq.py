"""The fake API server serves ProvisioningRequests as the cluster autoscaler's CRD
declares them, and PodTemplates, over real HTTP."""

from __future__ import annotations

from pathlib import Path

import pytest

from phalanx.compute.kubernetes.client import KubeClient, KubeError, configure
from tests.k8s_plane.conftest import RUNS
from tests.k8s_plane.fake_apiserver import FakeAPIServer

BASE = f"/apis/autoscaling.x-k8s.io/v1/namespaces/{RUNS}/provisioningrequests"
TEMPLATES = f"/api/v1/namespaces/{RUNS}/podtemplates"


@pytest.fixture
def client(kubeconfig: Path) -> KubeClient:
    configuration, _ = configure(kubeconfig=kubeconfig)
    return KubeClient(configuration)


def _request(name: str = "job-1", pod_sets: int = 1) -> dict[str, object]:
    return {"apiVersion": "autoscaling.x-k8s.io/v1", "kind": "ProvisioningRequest",
            "metadata": {"name": name},
            "spec": {"provisioningClassName": "check-capacity.autoscaling.x-k8s.io",
                     "podSets": [{"podTemplateRef": {"name": f"t{i}"}, "count": 2}
                                 for i in range(pod_sets)]},
            "status": {"conditions": [{"type": "Provisioned", "status": "True"}]}}


def test_discovery_lists_the_resource(client: KubeClient) -> None:
    found = client.get("/apis/autoscaling.x-k8s.io/v1")
    assert "provisioningrequests" in {r["name"] for r in found["resources"]}


def test_status_is_ignored_on_create_and_written_through_its_subresource(
    client: KubeClient,
) -> None:
    created = client.create(BASE, _request())
    assert "status" not in created
    client.patch(f"{BASE}/job-1", {"status": {"conditions": [{"type": "Failed"}]}})
    assert "status" not in client.get(f"{BASE}/job-1")
    client.patch(f"{BASE}/job-1/status", {"status": {"conditions": [
        {"type": "Accepted", "status": "True", "reason": "Accepted", "message": "ok"}]}})
    assert client.get(f"{BASE}/job-1")["status"]["conditions"][0]["type"] == "Accepted"


def test_the_spec_is_immutable(client: KubeClient) -> None:
    client.create(BASE, _request())
    with pytest.raises(KubeError) as caught:
        client.patch(f"{BASE}/job-1", {"spec": {"provisioningClassName": "other"}})
    assert caught.value.status == 422 and "immutable" in caught.value.message
    client.patch(f"{BASE}/job-1", {"metadata": {"labels": {"a": "b"}}})  # metadata may change


def test_more_than_32_pod_sets_are_refused(client: KubeClient) -> None:
    with pytest.raises(KubeError) as caught:
        client.create(BASE, _request(pod_sets=33))
    assert caught.value.status == 422 and "spec.podSets" in caught.value.message
    client.create(BASE, _request(pod_sets=32))


def test_deleting_a_request_deletes_the_templates_it_owns(
    client: KubeClient, api: FakeAPIServer
) -> None:
    created = client.create(BASE, _request())
    client.create(TEMPLATES, {"metadata": {"name": "t0", "ownerReferences": [
        {"kind": "ProvisioningRequest", "name": "job-1", "uid": created["metadata"]["uid"]}]},
        "template": {"spec": {"containers": []}}})
    assert api.get("podtemplates", "t0", RUNS) is not None
    client.delete(f"{BASE}/job-1")
    assert api.get("podtemplates", "t0", RUNS) is None


def test_a_cluster_without_the_crd_answers_404(kubeconfig: Path, api: FakeAPIServer,
                                               client: KubeClient) -> None:
    api.provisioning_requests = False
    with pytest.raises(KubeError) as caught:
        client.create(BASE, _request())
    assert caught.value.status == 404


def test_a_patch_naming_an_old_resource_version_conflicts(
    client: KubeClient, api: FakeAPIServer
) -> None:
    node = api.add_node("n1")
    api.update("nodes", "n1", {"metadata": {"labels": {"x": "y"}}})
    with pytest.raises(KubeError) as caught:
        client.patch("/api/v1/nodes/n1", {"metadata": {
            "labels": {"claimed": "yes"}, "resourceVersion": node["metadata"]["resourceVersion"]}})
    assert caught.value.status == 409
