"""A pod set's ServiceAccount (only one the install allows) and image pull policy on
Kubernetes: what the pods are made with, checked against the Kubernetes OpenAPI schema."""

from __future__ import annotations

import pytest

from phalanx.compute.kubernetes.settings import ALLOWED_SERVICE_ACCOUNTS_ENV, settings_from_env
from phalanx.errors import SpecError
from tests.k8s_plane.conftest import PlaneFactory
from tests.k8s_plane.fake_apiserver import FakeAPIServer
from tests.k8s_plane.helpers import admit, gang, pods
from tests.k8s_plane.test_launch import _validate


def test_an_allowed_service_account_and_a_pull_policy_reach_the_pods(
        api: FakeAPIServer, make_plane: PlaneFactory) -> None:
    api.add_node("gpu-1", cpu="32", memory="256Gi", gpus=8)
    plane = make_plane(service_account="phalanx-run",
                       allowed_service_accounts=frozenset({"trainer", "reader"}))
    job = gang(replicas=2, serviceAccountName="trainer", imagePullPolicy="Always")
    plane.check_job(job)
    plane.launch(job, 1, admit(job, ["gpu-1", "gpu-1"]))
    made = pods(api, "ddp")
    assert len(made) == 2
    for pod in made:
        _validate(pod)
        assert pod["spec"]["serviceAccountName"] == "trainer"
        assert pod["spec"]["containers"][0]["imagePullPolicy"] == "Always"

    # Without either, the runs account and Kubernetes' own default policy.
    plain = gang(name="plain", replicas=1)
    plane.launch(plain, 1, admit(plain, ["gpu-1"]))
    [pod] = pods(api, "plain")
    _validate(pod)
    assert pod["spec"]["serviceAccountName"] == "phalanx-run"
    assert "imagePullPolicy" not in pod["spec"]["containers"][0]


def test_a_service_account_the_install_does_not_allow_is_refused_naming_the_field(
        api: FakeAPIServer, make_plane: PlaneFactory) -> None:
    api.add_node("gpu-1", cpu="32", memory="256Gi", gpus=8)
    plane = make_plane(allowed_service_accounts=frozenset({"reader"}))
    job = gang(replicas=1, serviceAccountName="cluster-admin")
    with pytest.raises(SpecError) as caught:
        plane.check_job(job)
    assert caught.value.field == "podSets[0].serviceAccountName"
    assert "allowed: reader" in caught.value.message
    # A worker's plane is asked at launch (the control plane cannot know its list).
    with pytest.raises(SpecError) as launched:
        plane.launch(job, 1, admit(job, ["gpu-1"]))
    assert launched.value.field == "podSets[0].serviceAccountName"
    assert pods(api, "ddp") == []  # nothing created

    none_allowed = make_plane()
    with pytest.raises(SpecError) as refused:
        none_allowed.check_job(gang(replicas=1, serviceAccountName="reader"))
    assert "allowed: none" in refused.value.message


def test_the_allowed_accounts_come_from_the_environment(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ALLOWED_SERVICE_ACCOUNTS_ENV, "trainer, reader,,")
    assert settings_from_env().allowed_service_accounts == {"trainer", "reader"}


def test_a_bad_pull_policy_is_refused_at_the_spec() -> None:
    with pytest.raises(ValueError, match="imagePullPolicy"):
        gang(imagePullPolicy="Sometimes")
