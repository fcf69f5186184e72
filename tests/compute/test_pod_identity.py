"""On the local plane a pod is a process: a ServiceAccount is refused naming the field, an
image pull policy is recorded and ignored, as the image is."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from phalanx.compute.local import LocalPlane
from phalanx.errors import SpecError
from phalanx.spec.resources import JobSpec
from tests.compute.conftest import admit, all_done, wait_pods


def _job(name: str, **pod_set: object) -> JobSpec:
    return JobSpec.model_validate({"name": name, "podSets": [{
        "name": "w", "replicas": 1, "resources": {"cpu": "100m"},
        "command": [sys.executable, "-c", "print('ran')"], **pod_set}]})


def test_a_service_account_is_refused_on_the_local_plane(plane: LocalPlane) -> None:
    job = _job("sa", serviceAccountName="trainer")
    with pytest.raises(SpecError) as caught:
        plane.check_job(job)
    assert caught.value.field == "podSets[0].serviceAccountName"
    assert "not as ServiceAccounts" in caught.value.message
    with pytest.raises(SpecError):
        plane.launch(job, 1, admit(job))
    assert plane.observe() == []  # nothing started


def test_a_pull_policy_is_recorded_and_the_pod_runs(plane: LocalPlane) -> None:
    job = _job("pull", image="python:3.12", imagePullPolicy="Never")
    plane.check_job(job)
    plane.launch(job, 1, admit(job))
    [pod] = wait_pods(plane, all_done)
    assert pod.phase.value == "Succeeded", pod


def test_allowing_service_accounts_is_refused_for_a_plane_without_them(tmp_path: Path) -> None:
    from phalanx.compute.factory import make_plane

    with pytest.raises(SpecError) as caught:
        make_plane("local", tmp_path, allowed_service_accounts=["trainer"])
    assert caught.value.field == "--allow-service-account"
