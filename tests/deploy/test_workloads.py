"""What the control plane and NodeDoctor pods are given: command, env, volumes, placement."""

from __future__ import annotations

from typing import Any

from phalanx.cli.main import load_verb
from phalanx.deploy.values import API_PORT, STATE_DIR
from tests.deploy.conftest import COMBINATIONS, Manifest, find, one, rendered


def _pod(manifests: list[Manifest], kind: str = "Deployment") -> dict[str, Any]:
    spec: dict[str, Any] = one(manifests, kind)["spec"]["template"]["spec"]
    return spec


def _env(pod: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in pod["containers"][0]["env"]}


def test_default_control_plane() -> None:
    manifests = rendered({})
    pod = _pod(manifests)
    container = pod["containers"][0]
    assert container["command"] == ["phalanx"]
    assert container["args"] == ["up", "--host", "0.0.0.0", "--port", str(API_PORT),
                                 "--compute", "kubernetes", "--namespace", "phalanx-runs",
                                 "--pod-api-url",
                                 f"http://phalanx.phalanx-system.svc:{API_PORT}"]
    env = _env(pod)
    assert env["PHALANX_HOME"] == STATE_DIR
    assert env["PHALANX_TOKEN"] == {"secretKeyRef": {"name": "phalanx-api-key", "key": "token"}}
    assert "PHALANX_DB_URL" not in env
    # The SQLite store and the logs live on the claim, mounted as the state directory.
    claim = one(manifests, "PersistentVolumeClaim")
    assert claim["spec"]["resources"]["requests"]["storage"] == "10Gi"
    assert "storageClassName" not in claim["spec"]
    state = next(v for v in pod["volumes"] if v["name"] == "state")
    assert state["persistentVolumeClaim"]["claimName"] == claim["metadata"]["name"]
    assert {"name": "state", "mountPath": STATE_DIR} in container["volumeMounts"]
    # No token or password is ever invented: without values no Secret is rendered.
    assert find(manifests, "Secret") == []
    assert one(manifests, "Deployment")["spec"]["strategy"] == {"type": "Recreate"}
    assert find(manifests, "DaemonSet") == []


def test_postgres_url_and_token_come_from_secrets() -> None:
    manifests = rendered(COMBINATIONS["everything-on"])
    secrets = {s["metadata"]["name"]: s for s in find(manifests, "Secret")}
    assert secrets["phalanx-db"]["stringData"] == {
        "url": "postgresql://phalanx:pw@db.example:5432/phalanx"}
    assert secrets["phalanx-api-key"]["stringData"] == {"token": "s3cret-token"}
    pod = _pod(manifests)
    env = _env(pod)
    assert env["PHALANX_DB_URL"] == {"secretKeyRef": {"name": "phalanx-db", "key": "url"}}
    args = pod["containers"][0]["args"]
    # The kubelet expands $(PHALANX_DB_URL) from the env above; the URL is not in the spec.
    assert args[args.index("--db") + 1] == "$(PHALANX_DB_URL)"
    assert "pw@" not in str(one(manifests, "Deployment"))


def test_existing_secrets_are_referenced_not_rendered() -> None:
    manifests = rendered({"store": {"kind": "postgresql",
                                    "postgresql": {"secretName": "rds", "key": "dsn"}},
                          "apiKey": {"secretName": "phalanx-token", "key": "api"}})
    assert find(manifests, "Secret") == []
    env = _env(_pod(manifests))
    assert env["PHALANX_DB_URL"] == {"secretKeyRef": {"name": "rds", "key": "dsn"}}
    assert env["PHALANX_TOKEN"] == {"secretKeyRef": {"name": "phalanx-token", "key": "api"}}


def test_state_volume_choices() -> None:
    pod = _pod(rendered(COMBINATIONS["one-namespace-postgres-no-volume"]))
    assert {"name": "state", "emptyDir": {}} in pod["volumes"]
    manifests = rendered(COMBINATIONS["existing-claim-stopped"])
    assert find(manifests, "PersistentVolumeClaim") == []
    state = next(v for v in _pod(manifests)["volumes"] if v["name"] == "state")
    assert state["persistentVolumeClaim"]["claimName"] == "old-phalanx-state"
    assert one(manifests, "Deployment")["spec"]["replicas"] == 0
    claim = one(rendered(COMBINATIONS["everything-on"]), "PersistentVolumeClaim")
    assert claim["spec"]["storageClassName"] == "fast-ssd"
    assert claim["spec"]["resources"]["requests"]["storage"] == "50Gi"


def test_placement_goes_to_each_component() -> None:
    data = COMBINATIONS["everything-on"]
    manifests = rendered(data)
    pod = _pod(manifests)
    assert pod["nodeSelector"] == data["worker"]["nodeSelector"]
    assert pod["tolerations"] == data["worker"]["tolerations"]
    assert pod["priorityClassName"] == "phalanx-critical"
    assert pod["imagePullSecrets"] == [{"name": "registry-creds"}]
    assert pod["containers"][0]["resources"] == data["worker"]["resources"] | {
        "requests": {"cpu": "1", "memory": "2Gi"}}
    assert pod["containers"][0]["image"] == "registry.example/ml/phalanx:1.2.3"
    doctor = _pod(manifests, "DaemonSet")
    # The doctor keeps its own defaults: GPU nodes, NoSchedule taints, node-critical.
    assert doctor["nodeSelector"] == {"feature.node.kubernetes.io/pci-10de.present": "true"}
    assert doctor["tolerations"] == [{"operator": "Exists", "effect": "NoSchedule"}]
    assert doctor["priorityClassName"] == "system-node-critical"
    bare = _pod(rendered(COMBINATIONS["existing-claim-stopped"]), "DaemonSet")
    assert not {"nodeSelector", "tolerations", "priorityClassName"} & set(bare)
    assert "nodeSelector" not in _pod(rendered({}))


def test_node_doctor_reaches_the_api_service() -> None:
    manifests = rendered(COMBINATIONS["everything-on"])
    service = one(manifests, "Service")
    assert service["spec"]["type"] == "LoadBalancer"
    assert service["spec"]["ports"][0]["port"] == 443
    env = _env(_pod(manifests, "DaemonSet"))
    meta = service["metadata"]
    assert env["PHALANX_URL"] == f"http://{meta['name']}.{meta['namespace']}.svc:443"
    assert env["PHALANX_TOKEN"] == {"secretKeyRef": {"name": "phalanx-api-key", "key": "token"}}
    assert env["NODE_NAME"] == {"fieldRef": {"fieldPath": "spec.nodeName"}}
    # It must not request GPUs (that would take them from jobs).
    resources = _pod(manifests, "DaemonSet")["containers"][0]["resources"]
    assert not any("gpu" in r for kind in resources.values() for r in kind)


def test_service_selects_the_control_plane_pods() -> None:
    manifests = rendered({})
    selector = one(manifests, "Service")["spec"]["selector"].items()
    template = one(manifests, "Deployment")["spec"]["template"]["metadata"]["labels"].items()
    assert selector <= template
    port = one(manifests, "Service")["spec"]["ports"][0]["targetPort"]
    assert port in {p["name"] for p in _pod(manifests)["containers"][0]["ports"]}


def test_namespaces() -> None:
    names = [m["metadata"]["name"] for m in find(rendered({}), "Namespace")]
    assert names == ["phalanx-system", "phalanx-runs"]
    same = rendered({"namespace": "ml", "runs": {"namespace": "ml"}})
    assert [m["metadata"]["name"] for m in find(same, "Namespace")] == ["ml"]
    assert find(rendered(COMBINATIONS["one-namespace-postgres-no-volume"]), "Namespace") == []


def test_default_image_of_the_runs_is_passed_to_phalanx_up() -> None:
    args = _pod(rendered({"runs": {"defaultImage": "registry.example/ml/train:2024.1"}}))[
        "containers"][0]["args"]
    assert args[args.index("--default-image") + 1] == "registry.example/ml/train:2024.1"
    assert "--default-image" not in _pod(rendered({}))["containers"][0]["args"]


def test_interactivity_off_reaches_the_control_plane() -> None:
    """worker.enableRunInteractivity false: phalanx exec is refused (403), as the RBAC would."""
    off = _pod(rendered({"worker": {"enableRunInteractivity": False}}))["containers"][0]["args"]
    assert "--no-interactive" in off
    assert "--no-interactive" not in _pod(rendered({}))["containers"][0]["args"]


def test_job_pods_reach_the_api_at_the_service_unless_the_values_say_where() -> None:
    def pod_api_url(data: dict[str, Any]) -> str:
        args: list[str] = _pod(rendered(data))["containers"][0]["args"]
        return args[args.index("--pod-api-url") + 1]

    assert pod_api_url({"namespace": "ml", "worker": {"service": {"port": 9000}}}) == \
        "http://phalanx.ml.svc:9000"
    assert pod_api_url({"runs": {"apiUrl": "https://phalanx.example.com"}}) == \
        "https://phalanx.example.com"


def test_control_plane_args_are_options_of_phalanx_up() -> None:
    """The container runs the real CLI: every flag it passes must exist on `phalanx up`."""
    up = load_verb("up")
    known = {opt for param in up.params for opt in (*param.opts, *param.secondary_opts)}
    for data in COMBINATIONS.values():
        args = _pod(rendered(data))["containers"][0]["args"]
        assert args[0] == "up"
        flags = [a for a in args[1:] if a.startswith("--")]
        assert flags and set(flags) <= known, set(flags) - known
