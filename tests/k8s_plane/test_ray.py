"""Ray jobs on the Kubernetes plane, over the API mock: the head's Service and pods that
Phalanx creates (no KubeRay needed), and what the pods' ends mean for the job."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from phalanx.compute.kubernetes.objects import attempt_name
from phalanx.scheduler.types import Admission, PodSetAssignment
from phalanx.spec.resources import JobSpec
from phalanx.spec.status import JobStatus
from tests.k8s_plane.conftest import RUNS, PlaneFactory
from tests.k8s_plane.fake_apiserver import FakeAPIServer
from tests.k8s_plane.helpers import IMAGE, env_of, pods
from tests.k8s_plane.test_launch import _validate
from tests.k8s_plane.test_lifecycle import Loop, loops, start

__all__ = ["loops", "start"]

RAY_IMAGE = "rayproject/ray:2.58.0"


def ray_job(name: str = "rc", entrypoint: str | None = None, workers: int = 2,
            small: bool = False) -> JobSpec:
    head = {"cpu": "1"} if small else {"cpu": "2", "memory": "4Gi"}
    worker = {"cpu": "1"} if small else {"cpu": "4", "memory": "8Gi", "nvidia.com/gpu": 1}
    body: dict[str, Any] = {"name": name, "kind": "ray", "podSets": [
        {"name": "head", "image": RAY_IMAGE, "resources": head},
        {"name": "worker", "replicas": workers, "image": IMAGE, "resources": worker},
    ]}
    if entrypoint is not None:
        body["ray"] = {"entrypoint": entrypoint}
    return JobSpec.model_validate(body)


def admission(job: JobSpec, nodes: list[str]) -> Admission:
    return Admission(job=job.name, cluster_queue="default", pod_sets=(
        PodSetAssignment(name="head", count=1, flavors={}, nodes=(nodes[0],)),
        PodSetAssignment(name="worker", count=len(nodes) - 1, flavors={},
                         nodes=tuple(nodes[1:])),
    ))


def container(pod: dict[str, Any]) -> dict[str, Any]:
    container: dict[str, Any] = pod["spec"]["containers"][0]
    return container


def test_a_cluster_is_a_head_service_and_pinned_pods(
    api: FakeAPIServer, make_plane: PlaneFactory,
) -> None:
    for name in ("gpu-1", "gpu-2"):
        api.add_node(name, cpu="32", memory="256Gi", gpus=8)
    plane = make_plane()
    job = ray_job()
    plane.launch(job, 1, admission(job, ["gpu-1", "gpu-1", "gpu-2"]))
    [service] = api.list("services", RUNS)
    head, *workers = pods(api, "rc")
    for obj in (service, head, *workers):
        _validate(obj)
    subdomain = attempt_name("rc", 1)
    host = f"head-0.{subdomain}.{RUNS}.svc"
    assert service["metadata"]["name"] == subdomain and head["spec"]["subdomain"] == subdomain

    command = container(head)["command"]
    assert command[:4] == ["ray", "start", "--head", "--node-name=rc-head-0"]
    assert command[-1] == "--block"
    for flag in ("--port=6379", "--dashboard-port=8265", "--ray-client-server-port=10001",
                 "--dashboard-host=0.0.0.0", "--num-cpus=2", "--num-gpus=0",
                 f"--memory={4 * 2**30}"):
        assert flag in command
    assert not any(f.startswith(("--temp-dir", "--worker-port-list")) for f in command)
    ports = {p["name"]: p["containerPort"] for p in container(head)["ports"]}
    assert ports == {"gcs": 6379, "dashboard": 8265, "client": 10001, "metrics": 8080}
    assert head["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuring"
                                                    "Execution"]["nodeSelectorTerms"][0][
        "matchFields"][0]["values"] == ["gpu-1"]

    for worker, node in zip(workers, ["gpu-1", "gpu-2"], strict=True):
        assert worker["spec"]["affinity"]["nodeAffinity"][
            "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0][
            "matchFields"][0]["values"] == [node]
        sh, flag, script = container(worker)["command"]
        assert (sh, flag) == ("sh", "-c")
        assert f"ray health-check --address={host}:6379" in script  # waits for the head
        assert f"exec ray start --address={host}:6379" in script and "--block" in script
        assert "--num-gpus=1" in script and "--num-cpus=4" in script
        assert container(worker)["resources"]["limits"]["nvidia.com/gpu"] == "1"
        assert env_of(worker)["PHALANX_RAY_DASHBOARD"] == f"http://{host}:8265"
    assert plane.endpoints("rc", 1) == {"dashboard": f"http://{host}:8265",
                                        "client": f"ray://{host}:10001"}


def test_a_ray_job_head_runs_the_submitter(api: FakeAPIServer, make_plane: PlaneFactory) -> None:
    api.add_node("cpu-1", cpu="32", memory="256Gi", gpus=8)
    plane = make_plane()
    job = ray_job("rj", entrypoint="python train.py --epochs 2")
    plane.launch(job, 1, admission(job, ["cpu-1", "cpu-1", "cpu-1"]))
    head = pods(api, "rj")[0]
    sh, flag, script, name, submitter = container(head)["command"]
    assert (sh, flag, name) == ("sh", "-c", "ray-head")
    assert "ray start --head" in script and "--block" not in script
    assert script.endswith('exec python -c "$1"') and "JobSubmissionClient" in submitter
    env = env_of(head)
    assert env["PHALANX_RAY_ENTRYPOINT"] == "python train.py --epochs 2"
    assert env["PHALANX_RAY_NODES"] == "3" and env["PHALANX_RAY_SUBMISSION_ID"] == "rj-1"


def _start_all(api: FakeAPIServer, job: str) -> list[str]:
    names = [p["metadata"]["name"] for p in pods(api, job)]
    for name in names:
        api.start_pod(RUNS, name)
    return names


@pytest.mark.parametrize(("exit_code", "status"), [(0, JobStatus.SUCCEEDED),
                                                    (3, JobStatus.FAILED)])
def test_a_ray_job_ends_with_its_head(
    api: FakeAPIServer, start: Callable[..., Loop], exit_code: int, status: JobStatus,
) -> None:
    loop = start()
    loop.controller.submit(ray_job("rj", entrypoint="python train.py", workers=1, small=True))
    loop.until(lambda: len(pods(api, "rj")) == 2, "two pods")
    head, _worker = _start_all(api, "rj")
    loop.until(lambda: loop.status("rj") is JobStatus.RUNNING, "running")
    record = loop.controller.get("rj")
    assert record.endpoints["dashboard"].endswith(f".{RUNS}.svc:8265")
    api.finish_pod(RUNS, head, exit_code=exit_code)  # the worker still runs
    loop.until(lambda: loop.status("rj") is status, status.value)
    assert loop.controller.get("rj").exit_code == exit_code
    assert "entrypoint" in loop.controller.get("rj").message
    loop.until(lambda: not api.list("pods", RUNS), "the worker stopped with its job")


def test_a_cluster_runs_until_cancelled(api: FakeAPIServer, start: Callable[..., Loop]) -> None:
    loop = start()
    loop.controller.submit(ray_job("rc", workers=1, small=True))
    loop.until(lambda: len(pods(api, "rc")) == 2, "two pods")
    _start_all(api, "rc")
    loop.until(lambda: loop.status("rc") is JobStatus.RUNNING, "running")
    loop.controller.cancel("rc")
    loop.until(lambda: loop.status("rc") is JobStatus.CANCELLED, "cancelled")
    loop.until(lambda: not api.list("pods", RUNS), "pods deleted")
