"""Pod sets without an image: run on the plane's default image, or refused before admission."""

from __future__ import annotations

from pathlib import Path

import pytest

from phalanx.compute.kubernetes import KubernetesPlane
from phalanx.errors import SpecError
from phalanx.scheduler.types import Admission, PodSetAssignment
from phalanx.server.main import make_plane
from phalanx.spec.resources import JobSpec
from tests.k8s_plane.conftest import RUNS, PlaneFactory
from tests.k8s_plane.fake_apiserver import FakeAPIServer
from tests.k8s_plane.helpers import IMAGE, gang, pods

DEFAULT = "registry.example.com/ml/base:2024.1"


def _two_pod_sets(second_image: str | None) -> JobSpec:
    """A launcher with an image and workers with ``second_image``."""
    pod_set = {"resources": {"cpu": "1"}, "command": ["python", "train.py"]}
    return JobSpec.model_validate({"name": "mixed", "podSets": [
        {"name": "launcher", "replicas": 1, "image": IMAGE, **pod_set},
        {"name": "worker", "replicas": 1, "image": second_image, **pod_set},
    ]})


def test_without_a_default_a_pod_set_without_an_image_is_refused(
    make_plane: PlaneFactory,
) -> None:
    plane = make_plane()
    with pytest.raises(SpecError) as caught:
        plane.check_job(_two_pod_sets(None))
    assert caught.value.field == "podSets[1].image"
    assert "'worker' names no image" in caught.value.message
    assert caught.value.fix is not None and "--default-image" in caught.value.fix
    assert "runs.defaultImage" in caught.value.fix
    plane.check_job(_two_pod_sets(IMAGE))  # every pod set names one: accepted


def test_with_a_default_every_job_is_accepted(make_plane: PlaneFactory) -> None:
    plane = make_plane(default_image=DEFAULT)
    plane.check_job(_two_pod_sets(None))
    plane.check_job(gang(image=None))


def test_pods_without_an_image_run_on_the_default(
    api: FakeAPIServer, make_plane: PlaneFactory,
) -> None:
    api.add_node("cpu-1", cpu="8", memory="32Gi")
    plane = make_plane(default_image=DEFAULT)
    job = _two_pod_sets(None)
    plane.launch(job, 1, Admission(job=job.name, cluster_queue="default", pod_sets=tuple(
        PodSetAssignment(name=p.name, count=1, flavors={"cpu": "default"}, nodes=("cpu-1",))
        for p in job.pod_sets)))
    images = {p["metadata"]["labels"]["phalanx.dev/pod-set"]: p["spec"]["containers"][0]["image"]
              for p in pods(api, "mixed")}
    assert images == {"launcher": IMAGE, "worker": DEFAULT}


def test_a_default_image_that_cannot_be_one_is_refused(
    kubeconfig: Path, tmp_path: Path,
) -> None:
    with pytest.raises(SpecError) as caught:
        KubernetesPlane.connect(home=tmp_path / "home", kubeconfig=kubeconfig, namespace=RUNS,
                                default_image="my trainer")
    assert caught.value.field == "--default-image"
    assert "not a container image reference" in caught.value.message


def test_a_default_image_is_for_the_kubernetes_plane_only(tmp_path: Path) -> None:
    with pytest.raises(SpecError) as caught:
        make_plane("local", tmp_path, default_image="registry.example.com/ml/base:1")
    assert caught.value.field == "--default-image"
    assert caught.value.fix is not None and "--compute kubernetes" in caught.value.fix


def test_an_empty_default_image_is_refused_not_ignored(kubeconfig: Path, tmp_path: Path) -> None:
    with pytest.raises(SpecError) as caught:
        KubernetesPlane.connect(home=tmp_path / "home", kubeconfig=kubeconfig, namespace=RUNS,
                                default_image="")
    assert caught.value.field == "--default-image"
    assert caught.value.fix is not None and "ghcr.io" in caught.value.fix
