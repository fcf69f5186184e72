"""`mode: cluster`: a cluster that only runs a compute plane, its worker dialling out."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from phalanx.cli.main import load_verb
from phalanx.deploy import commented_values, load_values, load_values_yaml, render, write_kustomize
from phalanx.deploy.values import KEY_FILE
from phalanx.deploy.workloads import GPU_NODE_LABELS
from phalanx.errors import SpecError
from tests.deploy.conftest import Manifest, find, one, rendered
from tests.deploy.test_cli import phalanx
from tests.deploy.test_kustomize import _by_key, kustomize_build, needs_kubectl

CLUSTER: dict[str, Any] = {
    "mode": "cluster",
    "controlPlane": {"url": "https://phalanx.example.com"},
    "plane": {"name": "gcp-a"},
}


def _cluster(**extra: Any) -> dict[str, Any]:
    return {**CLUSTER, **extra}


def _pod(manifests: list[Manifest], kind: str = "Deployment") -> dict[str, Any]:
    spec: dict[str, Any] = one(manifests, kind)["spec"]["template"]["spec"]
    return spec


def test_a_cluster_install_is_the_worker_its_rbac_and_the_runs_namespace() -> None:
    manifests = rendered(_cluster(nodeDoctor={"enabled": True}))
    kinds = sorted({m["kind"] for m in manifests})
    assert kinds == ["ClusterRole", "ClusterRoleBinding", "DaemonSet", "Deployment",
                     "Namespace", "Role", "RoleBinding", "ServiceAccount"]
    assert [m["metadata"]["name"] for m in find(manifests, "Namespace")] == [
        "phalanx-system", "phalanx-runs"]
    # No control plane here: no API Service, no state claim, nothing to connect into.
    assert find(manifests, "Service") == [] and find(manifests, "PersistentVolumeClaim") == []
    deployment = one(manifests, "Deployment")
    assert deployment["metadata"]["name"] == "phalanx-worker"
    assert deployment["spec"]["replicas"] == 1
    assert deployment["spec"]["strategy"] == {"type": "Recreate"}
    container = _pod(manifests)["containers"][0]
    assert container["command"] == ["phalanx"]
    assert container["args"] == [
        "worker", "--control-plane", "https://phalanx.example.com", "--plane", "gcp-a",
        "--api-key-file", KEY_FILE, "--compute", "kubernetes", "--namespace", "phalanx-runs"]
    assert not {"ports", "livenessProbe", "readinessProbe", "startupProbe"} & set(container)


def test_the_plane_key_is_a_file_from_its_secret_and_rotates_in_place() -> None:
    manifests = rendered(_cluster(apiKey={"secretName": "gcp-a-key", "key": "plane",
                                          "value": "pk_secret"}))
    secret = one(manifests, "Secret")
    assert secret["metadata"]["name"] == "gcp-a-key"
    assert secret["stringData"] == {"plane": "pk_secret"}
    pod = _pod(manifests)
    container = pod["containers"][0]
    key_dir, key_name = KEY_FILE.rsplit("/", 1)
    mount = next(m for m in container["volumeMounts"] if m["mountPath"] == key_dir)
    # A subPath mount would freeze the key at pod start; a whole-volume mount is updated.
    assert "subPath" not in mount and mount["readOnly"] is True
    volume = next(v for v in pod["volumes"] if v["name"] == mount["name"])
    assert volume["secret"]["secretName"] == "gcp-a-key"
    assert volume["secret"]["items"] == [{"key": "plane", "path": key_name}]
    # The key is never in the environment or the spec.
    env = {e["name"] for e in container["env"]}
    assert "PHALANX_TOKEN" not in env
    assert "pk_secret" not in str(one(manifests, "Deployment"))


def test_the_doctor_of_a_cluster_install_gets_no_api_url_or_key() -> None:
    env = {e["name"] for e in _pod(rendered(_cluster(nodeDoctor={"enabled": True})),
                                   "DaemonSet")["containers"][0]["env"]}
    assert "PHALANX_URL" not in env and "PHALANX_TOKEN" not in env
    assert "NODE_NAME" in env
    full = {e["name"] for e in _pod(rendered({"nodeDoctor": {"enabled": True}}),
                                    "DaemonSet")["containers"][0]["env"]}
    assert {"PHALANX_URL", "PHALANX_TOKEN"} <= full


@pytest.mark.parametrize("data", [CLUSTER, {}], ids=["cluster", "full"])
def test_the_worker_stays_on_cpu_nodes(data: dict[str, Any]) -> None:
    pod = _pod(rendered({**data, "worker": {"nodeSelector": {"pool": "system"}}}))
    assert pod["nodeSelector"] == {"pool": "system"}
    terms = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"]
    # One term: every GPU label must be absent (expressions of a term are ANDed).
    assert terms == [{"matchExpressions": [{"key": label, "operator": "DoesNotExist"}
                                           for label in GPU_NODE_LABELS]}]
    off = _pod(rendered({**data, "worker": {"cpuNodesOnly": False}}))
    assert "affinity" not in off and "nodeSelector" not in off


def test_options_reach_the_worker() -> None:
    manifests = rendered(_cluster(
        runs={"namespace": "ml-runs", "defaultImage": "registry.example/ml/train:1",
              "checkpoints": {"claimName": "ckpt"}},
        worker={"rbac": {"allowNodeWrites": True}, "replicas": 0, "fenceAfter": "5m"},
    ))
    pod = _pod(manifests)
    args = pod["containers"][0]["args"]
    assert args[args.index("--namespace") + 1] == "ml-runs"
    assert args[args.index("--default-image") + 1] == "registry.example/ml/train:1"
    assert args[args.index("--fence-after") + 1] == "5m"
    env = {e["name"]: e.get("value") for e in pod["containers"][0]["env"]}
    assert env["PHALANX_K8S_NODE_WRITES"] == "true"
    assert env["PHALANX_RUNS_SERVICE_ACCOUNT"] == "phalanx-run"
    assert '"ckpt"' in env["PHALANX_K8S_CHECKPOINT_VOLUME"]
    assert one(manifests, "Deployment")["spec"]["replicas"] == 0


BAD: list[tuple[dict[str, Any], str, str]] = [
    ({"mode": "cluster", "plane": {"name": "a"}}, "controlPlane.url", "required"),
    (_cluster(controlPlane={"url": "phalanx.example.com"}), "controlPlane.url",
     "not an http(s) URL"),
    (_cluster(controlPlane={"url": "ftp://phalanx.example.com"}), "controlPlane.url",
     "not an http(s) URL"),
    ({"mode": "cluster", "controlPlane": {"url": "https://cp"}}, "plane.name", "required"),
    (_cluster(plane={"name": "GCP_A"}), "plane.name", ""),
    (_cluster(store={"kind": "postgresql"}), "store", "no store"),
    (_cluster(persistence={"enabled": False}), "persistence", "no state directory"),
    (_cluster(worker={"service": {"type": "LoadBalancer"}}), "worker.service", "no Service"),
    ({"controlPlane": {"url": "https://cp"}}, "controlPlane.url", "cluster-only"),
    ({"plane": {"name": "a"}}, "plane.name", "cluster-only"),
    ({"worker": {"fenceAfter": "5m"}}, "worker.fenceAfter", "cluster-only"),
    (_cluster(worker={"fenceAfter": "soon"}), "worker.fenceAfter", "duration"),
    (_cluster(worker={"fenceAfter": "0s"}), "worker.fenceAfter", "not more than 0"),
    ({"mode": "edge"}, "mode", "Input should be"),
    (_cluster(worker={"replicas": 2}), "worker.replicas", "2 replicas"),
]


@pytest.mark.parametrize(("data", "field", "message"), BAD,
                         ids=[f"{i}-{b[1]}" for i, b in enumerate(BAD)])
def test_bad_cluster_values_name_the_field(data: dict[str, Any], field: str,
                                           message: str) -> None:
    with pytest.raises(SpecError) as caught:
        load_values(data)
    assert caught.value.field == field
    assert message in caught.value.message
    assert caught.value.fix


def test_cluster_values_round_trip_through_the_commented_file() -> None:
    values = load_values(_cluster(nodeDoctor={"enabled": True}))
    text = commented_values(values)
    assert "mode: cluster" in text and "controlPlane:" in text
    assert load_values_yaml(text) == values


def test_switching_to_cluster_mode_replaces_the_control_plane_file(tmp_path: Path) -> None:
    write_kustomize(tmp_path, load_values({}))
    assert (tmp_path / "control-plane.yaml").exists()
    write_kustomize(tmp_path, load_values(CLUSTER))
    assert not (tmp_path / "control-plane.yaml").exists()
    assert (tmp_path / "worker.yaml").exists()


@needs_kubectl
def test_kubectl_kustomize_builds_a_cluster_base(tmp_path: Path) -> None:
    values = load_values(_cluster(nodeDoctor={"enabled": True},
                                  apiKey={"value": "pk_secret"}))
    write_kustomize(tmp_path, values)
    assert _by_key(kustomize_build(tmp_path)) == _by_key(render(values))


def test_render_command_with_cluster_values(tmp_path: Path) -> None:
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump(CLUSTER))
    done = phalanx("k8s", "render", "-f", str(path))
    assert done.returncode == 0, done.stderr
    printed = list(yaml.safe_load_all(done.stdout))
    assert printed == render(load_values(CLUSTER))
    path.write_text(yaml.safe_dump({"mode": "cluster", "plane": {"name": "a"}}))
    refused = phalanx("k8s", "render", "-f", str(path))
    assert refused.returncode == 2 and refused.stdout == ""
    assert "controlPlane.url" in refused.stderr and "fix:" in refused.stderr


def test_the_worker_tells_its_plane_where_the_fence_comes_from() -> None:
    manifests = rendered(_cluster(image={"repository": "registry.example/phalanx",
                                         "tag": "1.2.3"}))
    env = {e["name"]: e.get("value") for e in _pod(manifests)["containers"][0]["env"]}
    assert env["PHALANX_K8S_FENCE_IMAGE"] == "registry.example/phalanx:1.2.3"
    # The runs may read their plane's Lease, by name, and nothing else of coordination.
    role = one(manifests, "Role", "phalanx-run")
    lease_rules = [r for r in role["rules"] if r["apiGroups"] == ["coordination.k8s.io"]]
    assert lease_rules == [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
                            "verbs": ["get"], "resourceNames": ["phalanx-plane-gcp-a"]}]
    assert "PHALANX_K8S_FENCE_IMAGE" not in str(rendered({}))


def test_worker_args_are_options_of_phalanx_worker() -> None:
    """The container runs the real CLI: every flag it passes must exist on `phalanx worker`."""
    command = load_verb("worker")
    known = {opt for param in command.params for opt in (*param.opts, *param.secondary_opts)}
    data = _cluster(runs={"defaultImage": "registry.example/ml/train:1"},
                    worker={"fenceAfter": "5m"})
    args = _pod(rendered(data))["containers"][0]["args"]
    assert args[0] == "worker"
    flags = {a for a in args[1:] if a.startswith("--")}
    assert flags == {"--control-plane", "--plane", "--api-key-file", "--compute", "--namespace",
                     "--default-image", "--fence-after"}
    assert flags <= known, flags - known


@pytest.mark.parametrize("data", [CLUSTER, {}], ids=["cluster", "full"])
def test_worker_enabled_false_renders_no_deployment_but_keeps_its_rbac(
        data: dict[str, Any]) -> None:
    manifests = rendered({**data, "worker": {"enabled": False},
                          "nodeDoctor": {"enabled": True}})
    assert find(manifests, "Deployment") == []
    assert find(manifests, "Service") == [] and find(manifests, "PersistentVolumeClaim") == []
    assert one(manifests, "Role", "phalanx-worker")["rules"]
    assert one(manifests, "ServiceAccount", "phalanx")
    assert one(manifests, "DaemonSet")  # the doctor has its own switch
