"""Control-plane replicas on Kubernetes (``worker.replicas`` / ``phalanx k8s render
--replicas N``): N pods of ``phalanx up --ha`` on PostgreSQL, ready only on the leader,
a PodDisruptionBudget, a shared state volume; refused on SQLite, naming the field."""

from __future__ import annotations

from pathlib import Path

import yaml

from phalanx.deploy.workloads import API_PORT
from tests.deploy.conftest import COMBINATIONS, find, one, rendered
from tests.deploy.test_cli import phalanx

REPLICAS = COMBINATIONS["replicas-with-a-leader"]


def test_replicas_render_a_leader_election_a_budget_and_probes() -> None:
    manifests = rendered(REPLICAS)
    deployment = one(manifests, "Deployment", "phalanx")
    assert deployment["spec"]["replicas"] == 3
    # Only the leader is ever ready: a rollout that waited for readiness would stall.
    assert deployment["spec"]["strategy"] == {
        "type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": "100%"}}
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    args = container["args"]
    assert "--ha" in args
    assert args[args.index("--advertise-url") + 1] == f"http://$(POD_IP):{API_PORT}"
    assert args[args.index("--db") + 1] == "$(PHALANX_DB_URL)"
    env = {e["name"]: e for e in container["env"]}
    assert env["POD_IP"]["valueFrom"] == {"fieldRef": {"fieldPath": "status.podIP"}}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    assert container["startupProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}

    budget = one(manifests, "PodDisruptionBudget", "phalanx")
    assert budget["metadata"]["namespace"] == deployment["metadata"]["namespace"]
    assert budget["spec"]["minAvailable"] == 1
    assert budget["spec"]["selector"] == deployment["spec"]["selector"]
    # The replicas share the state directory's keys, from any node.
    claim = one(manifests, "PersistentVolumeClaim")
    assert claim["spec"]["accessModes"] == ["ReadWriteMany"]
    # The leader is elected by a Lease in the control plane's namespace: get and patch
    # that one by name, create (which no name can narrow), nothing else on leases.
    namespace = deployment["metadata"]["namespace"]
    assert args[args.index("--leader-lease") + 1] == \
        f"kubernetes:{namespace}/phalanx-control-plane"
    role = one(manifests, "Role", "phalanx-leader")
    assert role["metadata"]["namespace"] == namespace
    assert role["rules"] == [
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
         "verbs": ["get", "patch"], "resourceNames": ["phalanx-control-plane"]},
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]}]
    binding = one(manifests, "RoleBinding", "phalanx-leader")
    assert binding["metadata"]["namespace"] == namespace
    assert binding["roleRef"]["name"] == "phalanx-leader"
    assert [s["name"] for s in binding["subjects"]] == \
        [deployment["spec"]["template"]["spec"]["serviceAccountName"]]
    lease_rules = [r for m in manifests if m["kind"] in ("Role", "ClusterRole")
                   for r in m["rules"] if "coordination.k8s.io" in r["apiGroups"]]
    assert lease_rules == role["rules"]


def test_replicas_leading_by_the_store_get_no_lease_rbac() -> None:
    manifests = rendered({**REPLICAS, "worker": {**REPLICAS["worker"], "leaderLease": "store"}})
    [container] = one(manifests, "Deployment", "phalanx")["spec"]["template"]["spec"][
        "containers"]
    assert "--ha" in container["args"] and "--leader-lease" not in container["args"]
    assert find(manifests, "Role", "phalanx-leader") == []
    rules = [r for m in manifests if m["kind"] in ("Role", "ClusterRole") for r in m["rules"]]
    assert not [r for r in rules if "coordination.k8s.io" in r["apiGroups"]]


def test_one_replica_renders_neither_a_budget_nor_a_leader() -> None:
    manifests = rendered({"store": REPLICAS["store"]})
    assert find(manifests, "PodDisruptionBudget") == []
    deployment = one(manifests, "Deployment", "phalanx")
    assert deployment["spec"]["strategy"] == {"type": "Recreate"}
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    assert "--ha" not in container["args"]
    assert container["readinessProbe"]["httpGet"]["path"] == "/healthz"
    assert find(manifests, "Role", "phalanx-leader") == []
    assert one(manifests, "PersistentVolumeClaim")["spec"]["accessModes"] == ["ReadWriteOnce"]


def test_render_replicas_option(tmp_path: Path) -> None:
    values = tmp_path / "values.yaml"
    values.write_text(yaml.safe_dump({"store": REPLICAS["store"]}))
    done = phalanx("k8s", "render", "-f", str(values), "--replicas", "2")
    assert done.returncode == 0, done.stderr
    printed = list(yaml.safe_load_all(done.stdout))
    assert one(printed, "Deployment", "phalanx")["spec"]["replicas"] == 2
    assert one(printed, "PodDisruptionBudget")["spec"]["minAvailable"] == 1

    # On SQLite it is refused, naming the value to change; nothing is printed.
    refused = phalanx("k8s", "render", "--replicas", "2")
    assert refused.returncode == 2
    assert refused.stdout == ""
    assert "store.kind" in refused.stderr and "PostgreSQL" in refused.stderr
