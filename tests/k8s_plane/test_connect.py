"""The three ways to connect, and what is refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from phalanx.compute.kubernetes import KubernetesPlane, Settings
from phalanx.compute.kubernetes.plane import settings_from_env
from phalanx.errors import SpecError
from tests.k8s_plane.conftest import RUNS
from tests.k8s_plane.fake_apiserver import FakeAPIServer


def test_explicit_server_and_token(api: FakeAPIServer, tmp_path: Path) -> None:
    api.add_node("n1")
    plane = KubernetesPlane.connect(home=tmp_path, server=api.url, token="fake-token",
                                    namespace=RUNS, settings=Settings())
    try:
        assert [n.name for n in plane.inventory()] == ["n1"]
    finally:
        plane.close()


def test_server_and_token_from_the_environment(
    api: FakeAPIServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    api.add_node("n1")
    monkeypatch.setenv("PHALANX_K8S_SERVER", api.url)
    monkeypatch.setenv("PHALANX_K8S_TOKEN", "fake-token")
    monkeypatch.setenv("PHALANX_K8S_NAMESPACE", RUNS)
    monkeypatch.setenv("PHALANX_RUNS_SERVICE_ACCOUNT", "phalanx-run")
    monkeypatch.setenv("PHALANX_K8S_PRIORITY_CLASSES", "high=ml-high, low=ml-low")
    monkeypatch.setenv("PHALANX_K8S_START_TIMEOUT", "90s")
    plane = KubernetesPlane.connect(home=tmp_path)
    try:
        assert plane.namespace == RUNS
        assert plane.settings.service_account == "phalanx-run"
        assert dict(plane.settings.priority_classes) == {"high": "ml-high", "low": "ml-low"}
        assert plane.settings.start_timeout == 90
        assert [n.name for n in plane.inventory()] == ["n1"]
    finally:
        plane.close()


def test_wrong_token_is_refused(api: FakeAPIServer, tmp_path: Path) -> None:
    with pytest.raises(Exception, match="401"):
        KubernetesPlane.connect(home=tmp_path, server=api.url, token="wrong", namespace=RUNS,
                                settings=Settings(sync_timeout=2))


def test_bad_settings_name_the_field(
    api: FakeAPIServer, kubeconfig: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    with pytest.raises(SpecError) as err:
        KubernetesPlane.connect(home=tmp_path, kubeconfig=kubeconfig, namespace="missing",
                                settings=Settings())
    assert err.value.field == "--namespace"
    with pytest.raises(SpecError) as err:
        KubernetesPlane.connect(home=tmp_path, kubeconfig=tmp_path / "nope")
    assert err.value.field == "--kubeconfig"
    with pytest.raises(SpecError) as err:
        KubernetesPlane.connect(home=tmp_path, server=api.url, ca_file=tmp_path / "no-ca.pem")
    assert err.value.field == "PHALANX_K8S_CA"
    monkeypatch.setenv("PHALANX_K8S_PRIORITY_CLASSES", "high")
    with pytest.raises(SpecError) as err:
        settings_from_env()
    assert err.value.field == "PHALANX_K8S_PRIORITY_CLASSES"
