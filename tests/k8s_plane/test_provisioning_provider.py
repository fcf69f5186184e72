"""The kubernetes-provisioningrequest provider against the API mock over real HTTP, with a
small fake cluster autoscaler serving its requests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from phalanx.compute.kubernetes.client import KubeClient, RetryPolicy, configure
from phalanx.provisioning.base import (
    POOL_LABEL,
    RESERVED_FOR,
    ConfigurationError,
    PodSetShape,
    PoolRequest,
    PoolState,
    PoolStatus,
    TransientError,
)
from phalanx.provisioning.kubernetes import ProvisioningRequestProvider
from phalanx.spec.quantity import parse_quantity
from tests.k8s_plane.conftest import RUNS, PlaneFactory, wait_until
from tests.k8s_plane.fake_apiserver import FakeAPIServer
from tests.k8s_plane.fake_autoscaler import FakeAutoscaler, NodeGroup
from tests.k8s_plane.helpers import admit, gang, pods

FLAVOR_LABELS = {"pool": "burst"}


def _request(job: str = "train", attempt: int = 1, *, pod_sets: int = 1, replicas: int = 4,
             node_count: int = 2, options: dict[str, object] | None = None) -> PoolRequest:
    requests = {"cpu": parse_quantity("4", "cpu"), "memory": parse_quantity("8Gi", "memory")}
    return PoolRequest(
        name=f"{job}-{attempt}", job=job, attempt=attempt, flavor="burst",
        provider="kubernetes-provisioningrequest", node_count=node_count,
        node={"cpu": parse_quantity("8", "cpu"), "memory": parse_quantity("32Gi", "memory")},
        node_labels={**FLAVOR_LABELS, RESERVED_FOR: job, POOL_LABEL: f"{job}-{attempt}"},
        node_taints=((RESERVED_FOR, job, "NoSchedule"),),
        pod_sets=tuple(PodSetShape(name=f"ps{i}", count=replicas, requests=requests)
                       for i in range(pod_sets)),
        options=dict(options or {}),
    )


@pytest.fixture
def client(kubeconfig: Path) -> Iterator[KubeClient]:
    configuration, _ = configure(kubeconfig=kubeconfig)
    client = KubeClient(configuration, RetryPolicy(attempts=3, base_delay=0.01))
    yield client
    client.close()


@pytest.fixture
def provider(client: KubeClient) -> ProvisioningRequestProvider:
    return ProvisioningRequestProvider(client, RUNS)


@pytest.fixture
def autoscaler(api: FakeAPIServer) -> Iterator[FakeAutoscaler]:
    scaler = FakeAutoscaler(api, RUNS, NodeGroup(cpu="8", memory="32Gi")).start()
    yield scaler
    scaler.stop()


def _settled(provider: ProvisioningRequestProvider, name: str, state: PoolState) -> PoolStatus:
    def reached() -> PoolStatus | None:
        found = provider.status(name)
        return found if found is not None and found.state is state else None
    return wait_until(reached, what=f"pool {name} {state}")  # type: ignore[no-any-return]


def test_one_request_with_a_template_per_pod_set(
    provider: ProvisioningRequestProvider, api: FakeAPIServer
) -> None:
    request = _request(pod_sets=2, options={
        "className": "queued-provisioning.gke.io",
        "parameters": {"maxRunDurationSeconds": "3600"}})
    first = provider.create(request)
    again = provider.create(request)  # a restarted controller asks again: the same pool
    assert first.name == again.name == "train-1" and first.state is PoolState.CREATING
    assert first.config_hash == request.config_hash and first.node_count == 2
    [made] = api.list("provisioningrequests", RUNS)
    assert made["spec"] == {
        "provisioningClassName": "queued-provisioning.gke.io",
        "parameters": {"maxRunDurationSeconds": "3600"},
        "podSets": [{"podTemplateRef": {"name": "train-1-ps0"}, "count": 4},
                    {"podTemplateRef": {"name": "train-1-ps1"}, "count": 4}]}
    templates = api.list("podtemplates", RUNS)
    assert [t["metadata"]["name"] for t in templates] == ["train-1-ps0", "train-1-ps1"]
    for template in templates:
        assert template["metadata"]["ownerReferences"][0]["uid"] == made["metadata"]["uid"]
        spec = template["template"]["spec"]
        assert spec["nodeSelector"] == FLAVOR_LABELS  # never the per-job labels
        assert spec["tolerations"] == [{"key": RESERVED_FOR, "operator": "Equal",
                                        "value": "train", "effect": "NoSchedule"}]
        assert spec["containers"][0]["resources"]["requests"] == {"cpu": "4", "memory": "8Gi"}
    assert [p.name for p in provider.list()] == ["train-1"]


def test_the_default_class_is_best_effort_atomic(
    provider: ProvisioningRequestProvider, api: FakeAPIServer
) -> None:
    provider.create(_request())
    [made] = api.list("provisioningrequests", RUNS)
    assert made["spec"]["provisioningClassName"] == \
        "best-effort-atomic-scale-up.autoscaling.x-k8s.io"


def test_provisioned_nodes_are_claimed_and_ready_only_when_every_node_is(
    provider: ProvisioningRequestProvider, api: FakeAPIServer, autoscaler: FakeAutoscaler
) -> None:
    autoscaler.ready_after = 0.6
    api.add_node("static-1", labels=FLAVOR_LABELS)  # busy: a pod of someone else runs there
    api.add("pods", {"metadata": {"name": "other"}, "spec": {"nodeName": "static-1"},
                     "status": {"phase": "Running"}}, namespace="default")
    provider.create(_request(node_count=2))
    # Provisioned comes with the scale-up, before the nodes are Ready: still creating.
    creating = wait_until(lambda: (s := provider.status("train-1")) and s.nodes and s,
                          what="nodes claimed")
    assert creating.state is PoolState.CREATING and "provisioned" in creating.message
    ready = _settled(provider, "train-1", PoolState.READY)
    assert ready.nodes == ("train-1-node-0", "train-1-node-1") and ready.ready_nodes == 2
    for name in ready.nodes:
        node = api.get("nodes", name)
        assert node is not None
        assert node["metadata"]["labels"][POOL_LABEL] == "train-1"
        assert node["metadata"]["labels"][RESERVED_FOR] == "train"
        assert {"key": RESERVED_FOR, "value": "train", "effect": "NoSchedule"} in \
            node["spec"]["taints"]
    static = api.get("nodes", "static-1")
    assert static is not None and POOL_LABEL not in static["metadata"]["labels"]


def test_two_pools_never_claim_the_same_node(
    provider: ProvisioningRequestProvider, api: FakeAPIServer, autoscaler: FakeAutoscaler
) -> None:
    provider.create(_request("a", node_count=2))
    provider.create(_request("b", node_count=2))
    a = _settled(provider, "a-1", PoolState.READY)
    b = _settled(provider, "b-1", PoolState.READY)
    assert len(a.nodes) == len(b.nodes) == 2 and not set(a.nodes) & set(b.nodes)


def test_capacity_not_found_is_still_trying_not_a_stockout(
    provider: ProvisioningRequestProvider, autoscaler: FakeAutoscaler
) -> None:
    autoscaler.mode = "stockout"
    provider.create(_request())
    trying = wait_until(lambda: (s := provider.status("train-1")) and "still" in s.message
                        and s, what="CapacityIsNotFound")
    assert trying.state is PoolState.CREATING and trying.error is None
    assert "CapacityIsNotFound" in trying.message


def test_failed_is_a_transient_error(
    provider: ProvisioningRequestProvider, autoscaler: FakeAutoscaler
) -> None:
    autoscaler.mode = "fail"
    provider.create(_request())
    failed = _settled(provider, "train-1", PoolState.FAILED)
    assert isinstance(failed.error, TransientError)
    assert "the cloud refused to create the VMs" in failed.message


def test_booking_expired_fails_a_pool_before_placement_and_is_ignored_after(
    provider: ProvisioningRequestProvider, autoscaler: FakeAutoscaler
) -> None:
    autoscaler.mode = "stockout"
    provider.create(_request("early"))
    wait_until(lambda: "early-1" in autoscaler.handled, what="the autoscaler's answer")
    autoscaler.expire("early-1")
    assert isinstance(_settled(provider, "early-1", PoolState.FAILED).error, TransientError)

    autoscaler.mode = "provision"
    provider.create(_request("late"))
    _settled(provider, "late-1", PoolState.READY)
    autoscaler.expire("late-1")
    after = provider.status("late-1")
    assert after is not None and after.state is PoolState.READY


def test_capacity_revoked_fails_a_ready_pool(
    provider: ProvisioningRequestProvider, autoscaler: FakeAutoscaler
) -> None:
    provider.create(_request())
    _settled(provider, "train-1", PoolState.READY)
    autoscaler.revoke("train-1")
    revoked = _settled(provider, "train-1", PoolState.FAILED)
    assert "capacity revoked" in revoked.message


def test_delete_removes_the_request_and_its_templates(
    provider: ProvisioningRequestProvider, api: FakeAPIServer, autoscaler: FakeAutoscaler
) -> None:
    provider.create(_request())
    _settled(provider, "train-1", PoolState.READY)
    provider.delete("train-1")
    provider.delete("train-1")  # idempotent
    assert provider.status("train-1") is None and provider.list() == []
    assert api.list("podtemplates", RUNS) == []
    wait_until(lambda: not api.list("nodes"), what="the autoscaler's scale-down")


def test_a_cluster_without_provisioning_requests_is_a_configuration_error(
    provider: ProvisioningRequestProvider, api: FakeAPIServer
) -> None:
    api.provisioning_requests = False
    with pytest.raises(ConfigurationError, match="does not serve ProvisioningRequests"):
        provider.create(_request())


def test_a_forbidden_create_is_a_configuration_error(
    provider: ProvisioningRequestProvider, api: FakeAPIServer
) -> None:
    api.inject(r"/provisioningrequests$", 403, method="POST")
    with pytest.raises(ConfigurationError, match="403"):
        provider.create(_request())


def test_a_server_error_is_transient(
    provider: ProvisioningRequestProvider, api: FakeAPIServer
) -> None:
    api.inject(r"/provisioningrequests$", 500, count=3, method="POST")
    with pytest.raises(TransientError):
        provider.create(_request())


def test_more_than_32_pod_sets_are_refused_before_anything_is_made(
    provider: ProvisioningRequestProvider, api: FakeAPIServer
) -> None:
    with pytest.raises(ConfigurationError, match="at most 32"):
        provider.create(_request(pod_sets=33, replicas=1))
    assert api.list("podtemplates", RUNS) == []  # nothing half-made


def test_pods_placed_on_the_pool_consume_its_request(
    provider: ProvisioningRequestProvider, api: FakeAPIServer, autoscaler: FakeAutoscaler,
    make_plane: PlaneFactory,
) -> None:
    provider.create(_request(node_count=2))
    ready = _settled(provider, "train-1", PoolState.READY)
    plane = make_plane()
    wait_until(lambda: set(ready.nodes) <= {n.name for n in plane.inventory()
                                            if n.labels.get(POOL_LABEL) == "train-1"},
               what="the claimed nodes in the inventory")
    job = gang("train", replicas=2, resources={"cpu": "4", "memory": "8Gi"})
    plane.launch(job, 0, admit(job, list(ready.nodes)))
    made = pods(api, "train")
    assert len(made) == 2
    for pod in made:
        annotations = pod["metadata"]["annotations"]
        assert annotations["autoscaling.x-k8s.io/consume-provisioning-request"] == "train-1"
        assert annotations["autoscaling.x-k8s.io/provisioning-class-name"] == \
            "best-effort-atomic-scale-up.autoscaling.x-k8s.io"
        assert pod["spec"]["nodeSelector"] == FLAVOR_LABELS
        assert {"key": RESERVED_FOR, "operator": "Equal", "value": "train",
                "effect": "NoSchedule"} in pod["spec"]["tolerations"]
    api.add_node("plain")
    other = gang("other", replicas=1, resources={"cpu": "1"})
    plane.launch(other, 0, admit(other, ["plain"]))
    [plain] = pods(api, "other")
    assert "autoscaling.x-k8s.io/consume-provisioning-request" not in \
        plain["metadata"]["annotations"]


def test_an_idle_pool_is_reserved_for_the_next_job(
    provider: ProvisioningRequestProvider, api: FakeAPIServer, autoscaler: FakeAutoscaler
) -> None:
    assert not provider.reassign("train-1", "next")  # no such pool
    provider.create(_request(node_count=2))
    ready = _settled(provider, "train-1", PoolState.READY)
    assert provider.reassign("train-1", "next")
    for name in ready.nodes:
        node = api.get("nodes", name)
        assert node is not None and node["metadata"]["labels"][RESERVED_FOR] == "next"
        reserved = [t for t in node["spec"]["taints"] if t["key"] == RESERVED_FOR]
        assert reserved == [{"key": RESERVED_FOR, "value": "next", "effect": "NoSchedule"}]
    made = api.get("provisioningrequests", "train-1", RUNS)
    assert made is not None and made["metadata"]["labels"]["phalanx.dev/job"] == "next"
    still = provider.status("train-1")
    assert still is not None and still.state is PoolState.READY and still.nodes == ready.nodes


def test_a_request_of_that_name_made_by_someone_else_is_not_adopted(
    provider: ProvisioningRequestProvider, api: FakeAPIServer
) -> None:
    api.add("provisioningrequests", {"metadata": {"name": "train-1"}, "spec": {
        "provisioningClassName": "check-capacity.autoscaling.x-k8s.io",
        "podSets": [{"podTemplateRef": {"name": "theirs"}, "count": 1}]}}, namespace=RUNS)
    with pytest.raises(ConfigurationError, match="exists and belongs to"):
        provider.create(_request())


def test_check_capacity_books_existing_idle_nodes(
    provider: ProvisioningRequestProvider, api: FakeAPIServer, autoscaler: FakeAutoscaler
) -> None:
    autoscaler.mode = "book"
    for name in ("idle-1", "idle-2", "busy"):
        api.add_node(name, labels=FLAVOR_LABELS)
    api.add_node("other-flavor")
    api.add("pods", {"metadata": {"name": "p"}, "spec": {"nodeName": "busy"},
                     "status": {"phase": "Running"}}, namespace="default")
    provider.create(_request(node_count=2, options={
        "className": "check-capacity.autoscaling.x-k8s.io"}))
    ready = _settled(provider, "train-1", PoolState.READY)
    assert ready.nodes == ("idle-1", "idle-2")
    assert len(api.list("nodes")) == 4  # check-capacity makes no node
