"""Jobs, admissions and object queries shared by the plane's tests."""

from __future__ import annotations

from typing import Any

from phalanx.scheduler.types import Admission, PodSetAssignment
from phalanx.spec.resources import JobSpec
from tests.k8s_plane.conftest import RUNS
from tests.k8s_plane.fake_apiserver import FakeAPIServer

IMAGE = "registry.example.com/ml/trainer:1"


def gang(name: str = "ddp", replicas: int = 4, **pod_set: Any) -> JobSpec:
    spec = {
        "name": "worker", "replicas": replicas, "image": IMAGE,
        "resources": {"cpu": "2", "memory": "4Gi", "nvidia.com/gpu": 1},
        "command": ["torchrun", "train.py"],
        **pod_set,
    }
    return JobSpec.model_validate({"name": name, "kind": "torch", "podSets": [spec]})


def admit(job: JobSpec, nodes: list[str]) -> Admission:
    return Admission(job=job.name, cluster_queue="default", pod_sets=(
        PodSetAssignment(name=job.pod_sets[0].name, count=len(nodes),
                         flavors={"cpu": "default"}, nodes=tuple(nodes)),
    ))


def pods(api: FakeAPIServer, job: str | None = None) -> list[dict[str, Any]]:
    found = [p for p in api.list("pods", RUNS)
             if job is None or p["metadata"]["labels"].get("phalanx.dev/job") == job]
    return sorted(found, key=lambda p: int(p["metadata"]["labels"]["phalanx.dev/rank"]))


def env_of(pod: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e["value"] for e in pod["spec"]["containers"][0]["env"]}
