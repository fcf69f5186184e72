"""allowNodeWrites reaches the control plane as PHALANX_K8S_NODE_WRITES."""

from __future__ import annotations

import pytest

from phalanx.compute.kubernetes.settings import (
    ALLOWED_SERVICE_ACCOUNTS_ENV,
    NODE_WRITES_ENV,
    settings_from_env,
)
from phalanx.deploy import load_values
from phalanx.deploy.workloads import deployment
from phalanx.errors import SpecError


@pytest.mark.parametrize("allowed", [True, False])
def test_the_deployment_passes_the_permission(
    allowed: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    values = load_values({"worker": {"rbac": {"allowNodeWrites": allowed}}})
    container = deployment(values)["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e.get("value") for e in container["env"]}
    monkeypatch.setenv(NODE_WRITES_ENV, env[NODE_WRITES_ENV])
    assert settings_from_env().node_writes is allowed


def test_an_unreadable_value_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(NODE_WRITES_ENV, "yes please")
    with pytest.raises(SpecError) as raised:
        settings_from_env()
    assert raised.value.field == NODE_WRITES_ENV


def test_the_allowed_service_accounts_reach_the_plane(monkeypatch: pytest.MonkeyPatch) -> None:
    values = load_values({"runs": {"allowedServiceAccounts": ["trainer", "reader"]}})
    container = deployment(values)["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e.get("value") for e in container["env"]}
    monkeypatch.setenv(ALLOWED_SERVICE_ACCOUNTS_ENV, env[ALLOWED_SERVICE_ACCOUNTS_ENV])
    assert settings_from_env().allowed_service_accounts == {"trainer", "reader"}
    plain = deployment(load_values({}))["spec"]["template"]["spec"]["containers"][0]
    assert ALLOWED_SERVICE_ACCOUNTS_ENV not in {e["name"] for e in plain["env"]}
