"""``kind: mpi`` on Kubernetes, over the HTTP API mock: the pods Phalanx creates and how
their ends decide the job."""

from __future__ import annotations

import pytest

from phalanx.compute.kubernetes import objects
from phalanx.compute.kubernetes.attempts import with_spec
from phalanx.compute.kubernetes.objects import pod_name
from phalanx.kinds import GangPhase, PodPhase, framework_of
from phalanx.kinds.mpi import AGENT_PORT
from phalanx.kinds.mpi_rsh import agents
from phalanx.scheduler.types import Admission, PodSetAssignment
from phalanx.spec.resources import JobSpec
from tests.k8s_plane.conftest import RUNS, PlaneFactory, wait_until
from tests.k8s_plane.fake_apiserver import FakeAPIServer
from tests.k8s_plane.helpers import IMAGE, env_of, pods

kubernetes_validate = pytest.importorskip("kubernetes_validate")


def mpi_job() -> JobSpec:
    return JobSpec.model_validate({"name": "allreduce", "kind": "mpi", "podSets": [
        {"name": "launcher", "image": IMAGE, "resources": {"cpu": "1"},
         "command": ["mpirun", "-np", "2", "python", "allreduce.py"]},
        {"name": "worker", "replicas": 2, "image": IMAGE,
         "resources": {"cpu": "2", "nvidia.com/gpu": 1}},
    ]})


def admit(job: JobSpec) -> Admission:
    return Admission(job=job.name, cluster_queue="default", pod_sets=(
        PodSetAssignment("launcher", 1, {"cpu": "default"}, ("node-1",)),
        PodSetAssignment("worker", 2, {"cpu": "default"}, ("node-1", "node-2")),
    ))


def test_mpi_pods_run_the_launcher_wrapper_and_the_workers_agents(
    api: FakeAPIServer, make_plane: PlaneFactory,
) -> None:
    for name in ("node-1", "node-2"):
        api.add_node(name, cpu="16", memory="64Gi", gpus=2)
    plane = make_plane()
    job = mpi_job()
    plane.launch(job, 1, admit(job))
    launcher, *workers = pods(api, "allreduce")
    assert len(workers) == 2
    main = launcher["spec"]["containers"][0]
    assert main["command"] == ["python", "-m", "phalanx.kinds.mpi_launch", "--",
                               "mpirun", "-np", "2", "python", "allreduce.py"]
    env = env_of(launcher)
    subdomain = launcher["spec"]["subdomain"]
    # The launcher reaches each worker's agent at the worker pod's own DNS name.
    assert agents(env["PHALANX_MPI_HOSTS"]) == {
        f"allreduce-worker-{i}": (f"worker-{i}.{subdomain}.{RUNS}.svc", AGENT_PORT)
        for i in range(2)}
    assert env["PHALANX_MPI_SLOTS"] == "allreduce-worker-0=1,allreduce-worker-1=1"
    for worker in workers:
        container = worker["spec"]["containers"][0]
        assert container["command"] == ["python", "-m", "phalanx.kinds.mpi_agent"]
        assert {"name": "mpi-agent", "containerPort": AGENT_PORT, "protocol": "TCP"} in \
            container["ports"]
        worker_env = env_of(worker)
        assert worker_env["PHALANX_MPI_SECRET"] == env["PHALANX_MPI_SECRET"]
        assert worker_env["PHALANX_MPI_BIND"] == ""  # every address of its own pod
    for pod in (launcher, *workers):
        request = {k: v for k, v in pod.items() if k != "status"}
        request["metadata"] = {k: v for k, v in pod["metadata"].items()
                               if k not in ("uid", "resourceVersion", "creationTimestamp")}
        kubernetes_validate.validate(request, kubernetes_validate.utils.latest_version(),
                                     strict=True)


def _phase(plane, job: JobSpec) -> GangPhase:
    states = [s for s in plane.observe() if s.ref.job == job.name]
    return framework_of(job).status(job, states, 3).phase


def test_the_launchers_end_is_the_jobs(api: FakeAPIServer, make_plane: PlaneFactory) -> None:
    for name in ("node-1", "node-2"):
        api.add_node(name, cpu="16", memory="64Gi", gpus=2)
    plane = make_plane()
    job = mpi_job()
    plane.launch(job, 1, admit(job))
    names = [p["metadata"]["name"] for p in pods(api, "allreduce")]
    for name in names:
        api.start_pod(RUNS, name)
    wait_until(lambda: _phase(plane, job) is GangPhase.RUNNING, what="every pod running")
    api.finish_pod(RUNS, names[0], exit_code=0)  # the launcher; workers still idle
    wait_until(lambda: _phase(plane, job) is GangPhase.SUCCEEDED, what="the launcher's success")


def test_a_failing_worker_fails_the_job(api: FakeAPIServer, make_plane: PlaneFactory) -> None:
    for name in ("node-1", "node-2"):
        api.add_node(name, cpu="16", memory="64Gi", gpus=2)
    plane = make_plane()
    job = mpi_job()
    plane.launch(job, 1, admit(job))
    for pod in pods(api, "allreduce"):
        api.start_pod(RUNS, pod["metadata"]["name"])
    worker = next(p for p in pods(api, "allreduce")
                  if p["metadata"]["labels"]["phalanx.dev/rank"] == "2")
    api.finish_pod(RUNS, worker["metadata"]["name"], exit_code=137, reason="OOMKilled")
    wait_until(lambda: _phase(plane, job) is GangPhase.FAILED, what="the job's failure")
    states = [s for s in plane.observe() if s.ref.job == job.name]
    status = framework_of(job).status(job, states, 3)
    assert "allreduce-worker-1" in status.message
    assert [s.phase for s in states if s.ref.pod_set == "launcher"] == [PodPhase.RUNNING]
    assert pod_name(states[2].ref) == worker["metadata"]["name"]


def test_a_launch_completed_by_a_new_plane_keeps_the_attempts_secret(
    api: FakeAPIServer, make_plane: PlaneFactory,
) -> None:
    """The launcher was created, then the control plane died: the workers a new plane
    creates must accept the launcher's secret, so the attempt's key lives on its anchor."""
    for name in ("node-1", "node-2"):
        api.add_node(name, cpu="16", memory="64Gi", gpus=2)
    job = mpi_job()
    admission = admit(job)
    key = bytes(range(32))
    plan = objects.plan_attempt(job, 1, admission, RUNS, key)
    anchor = api.add("configmaps", with_spec(objects.anchor(plan, admission, 1.0, key), job),
                     RUNS)
    api.add("pods", objects.pod(plan, plan.pods[0], job, objects.owner_reference(anchor)), RUNS)
    make_plane()  # adopts the anchor and creates the two workers
    launcher, *workers = pods(api, "allreduce")
    assert len(workers) == 2
    secret = env_of(launcher)["PHALANX_MPI_SECRET"]
    assert [env_of(w)["PHALANX_MPI_SECRET"] for w in workers] == [secret, secret]
    # The next attempt, launched afresh, has a key and a secret of its own.
    plane = make_plane()
    plane.launch(job, 2, admission)
    second = [p for p in pods(api, "allreduce") if p["metadata"]["labels"][
        "phalanx.dev/attempt"] == "2"]
    assert len({env_of(p)["PHALANX_MPI_SECRET"] for p in second}) == 1
    assert env_of(second[0])["PHALANX_MPI_SECRET"] != secret
