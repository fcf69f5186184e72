"""manageNamespaces (`phalanx k8s render --manage-namespaces`) reaches the control plane as
PHALANX_K8S_MANAGE_NAMESPACES, with the RBAC Kubernetes-native admission needs and no more."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from phalanx.cli.main import app
from phalanx.compute.kubernetes.settings import MANAGE_NAMESPACES_ENV, settings_from_env
from phalanx.deploy import load_values
from phalanx.deploy.rbac import native_rules, worker_cluster_rules
from phalanx.deploy.workloads import deployment
from phalanx.errors import SpecError
from phalanx.spec.manifests.native_kinds import NATIVE_KINDS

SELECTOR = "phalanx.dev/managed=true"


def test_the_switch_reaches_the_plane_with_its_rbac(monkeypatch: pytest.MonkeyPatch) -> None:
    values = load_values({"manageNamespaces": SELECTOR})
    container = deployment(values)["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e.get("value") for e in container["env"]}
    monkeypatch.setenv(MANAGE_NAMESPACES_ENV, env[MANAGE_NAMESPACES_ENV])
    assert settings_from_env().manage_namespaces == SELECTOR
    rules = native_rules(values)
    assert rules[:2] == [
        {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["get", "list", "watch", "patch"]},
        {"apiGroups": ["batch"], "resources": ["jobs/status"], "verbs": ["get", "patch"]},
    ]
    assert rules[-3:] == [
        {"apiGroups": [""], "resources": ["namespaces"], "verbs": ["list", "watch"]},
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["list", "watch", "patch"]},
        {"apiGroups": [""], "resources": ["events"], "verbs": ["create"]},
    ]
    # every managed kind and its status, from the kinds' adapters
    granted = {(g, r) for rule in rules for g in rule["apiGroups"] for r in rule["resources"]}
    for adapter in NATIVE_KINDS.values():
        assert (adapter.group, adapter.plural) in granted
        assert (adapter.group, f"{adapter.plural}/status") in granted
    assert {"apiGroups": ["kubeflow.org"], "resources": ["pytorchjobs", "mpijobs"],
            "verbs": ["get", "list", "watch", "patch"]} in rules
    assert all(r in worker_cluster_rules(values) for r in native_rules(values))


def test_without_the_switch_nothing_of_it_is_rendered() -> None:
    values = load_values({})
    container = deployment(values)["spec"]["template"]["spec"]["containers"][0]
    assert MANAGE_NAMESPACES_ENV not in {e["name"] for e in container["env"]}
    assert not any("batch" in r["apiGroups"] for r in worker_cluster_rules(values))


def test_render_takes_the_switch() -> None:
    result = CliRunner().invoke(app, ["k8s", "render", "--manage-namespaces", SELECTOR])
    assert result.exit_code == 0, result.output
    roles = [d for d in yaml.safe_load_all(result.stdout) if d and d["kind"] == "ClusterRole"]
    rules = [r for role in roles for r in role["rules"]]
    assert {"apiGroups": ["jobset.x-k8s.io"], "resources": ["jobsets"],
            "verbs": ["get", "list", "watch", "patch"]} in rules


@pytest.mark.parametrize(("data", "why"), [
    ({"manageNamespaces": "not a selector"}, "is not key=value"),
    ({"manageNamespaces": SELECTOR, "mode": "cluster", "plane": {"name": "gpu"},
      "controlPlane": {"url": "https://phalanx.example.com"}}, "control plane's own cluster"),
])
def test_a_bad_switch_names_the_field(data: dict[str, object], why: str) -> None:
    with pytest.raises(SpecError) as refused:
        load_values(data)
    assert refused.value.field == "manageNamespaces"
    assert why in refused.value.message


def test_up_refuses_the_switch_without_kubernetes(tmp_path: Path) -> None:
    from phalanx.compute.factory import make_plane

    with pytest.raises(SpecError) as refused:
        make_plane("simulated", tmp_path, manage_namespaces=SELECTOR)
    assert refused.value.field == "--manage-namespaces"
    assert "--compute kubernetes" in (refused.value.fix or "")
