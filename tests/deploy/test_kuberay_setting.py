"""ray.useKubeRay reaches the control plane as PHALANX_K8S_RAY_USE_KUBERAY, with the RBAC
that RayClusters need."""

from __future__ import annotations

import pytest

from phalanx.compute.kubernetes.settings import USE_KUBERAY_ENV, settings_from_env
from phalanx.deploy import load_values
from phalanx.deploy.rbac import worker_namespace_rules
from phalanx.deploy.workloads import deployment
from phalanx.errors import SpecError


@pytest.mark.parametrize("mode", ["auto", "always", "never"])
def test_the_switch_reaches_the_plane_with_its_rbac(
    mode: str, monkeypatch: pytest.MonkeyPatch,
) -> None:
    values = load_values({"ray": {"useKubeRay": mode}})
    container = deployment(values)["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e.get("value") for e in container["env"]}
    monkeypatch.setenv(USE_KUBERAY_ENV, env[USE_KUBERAY_ENV])
    assert settings_from_env().use_kuberay == mode
    ray_rules = [r for r in worker_namespace_rules(values) if "ray.io" in r["apiGroups"]]
    if mode == "never":
        assert ray_rules == []
    else:
        assert ray_rules[0]["resources"] == ["rayclusters"]
        assert {"create", "delete", "watch"} <= set(ray_rules[0]["verbs"])


def test_a_bad_switch_names_the_field() -> None:
    with pytest.raises(SpecError) as refused:
        load_values({"ray": {"useKubeRay": "sometimes"}})
    assert refused.value.field == "ray.useKubeRay"
