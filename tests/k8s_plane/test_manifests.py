"""A PyTorchJob manifest, translated, runs on the Kubernetes plane as pods that validate
against the Kubernetes schemas; a container relying on its image's entrypoint runs there."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from phalanx.scheduler.types import Admission, PodSetAssignment
from phalanx.spec.manifests import translate
from tests.k8s_plane.conftest import PlaneFactory
from tests.k8s_plane.fake_apiserver import FakeAPIServer
from tests.k8s_plane.helpers import env_of, pods
from tests.k8s_plane.test_launch import _validate

pytest.importorskip("kubernetes_validate")
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "manifests" / "pytorchjob.yaml"


def _pytorchjob() -> dict[str, Any]:
    """The example with a Master, and a Worker that runs its image's entrypoint."""
    document: dict[str, Any] = yaml.safe_load(EXAMPLE.read_text())
    replicas = document["spec"]["pytorchReplicaSpecs"]
    replicas["Master"] = copy.deepcopy(replicas["Worker"]) | {"replicas": 1}
    container = replicas["Worker"]["template"]["spec"]["containers"][0]
    del container["command"]
    return document


def test_a_translated_pytorchjob_runs_as_valid_pods(api: FakeAPIServer,
                                                    make_plane: PlaneFactory) -> None:
    api.add_node("node-1", cpu="8", memory="32Gi")
    plane = make_plane()
    job = translate(_pytorchjob()).spec
    plane.check_job(job)  # an entrypoint is the image's business here
    admission = Admission(job=job.name, cluster_queue="default", pod_sets=tuple(
        PodSetAssignment(name=p.name, count=p.replicas, flavors={"cpu": "default"},
                         nodes=("node-1",) * p.replicas) for p in job.pod_sets))
    plane.launch(job, 1, admission)
    created = pods(api, job.name)
    assert len(created) == 3
    for pod in created:
        _validate(pod)
    master, *workers = created
    container = master["spec"]["containers"][0]
    assert container["image"] == "docker.io/pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime"
    assert container["command"] == ["python", "examples/ddp_train.py"]
    assert container["resources"]["requests"]["cpu"] == "500m"
    for rank, pod in enumerate(created):
        env = env_of(pod)
        assert env["RANK"] == str(rank) and env["WORLD_SIZE"] == "3"
        assert env["NPROC_PER_NODE"] == "1" and env["EPOCHS"] == "3"
        assert env["MASTER_ADDR"] == env_of(master)["MASTER_ADDR"]
    assert all("command" not in w["spec"]["containers"][0] for w in workers)

