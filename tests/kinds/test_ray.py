"""kind: ray without starting Ray: what is refused at submit, what each pod runs, and what
the pods' ends mean for the job."""

from __future__ import annotations

import subprocess
import sys
import tempfile
from typing import Any

import pytest

from phalanx.compute.local.network import LocalNetwork
from phalanx.errors import SpecError
from phalanx.kinds import GangPhase, OwnAddressNetwork, PodPhase, PodRef, PodState, framework_of
from phalanx.kinds.ray import Ray
from phalanx.ray import ClusterConfiguration
from phalanx.ray.cluster import _configuration, describe
from phalanx.scheduler.types import Admission, PodSetAssignment
from phalanx.spec import validate
from phalanx.spec.resources import JobSpec
from phalanx.spec.status import JobRecord


def ray_job(entrypoint: str | None = None, **head: Any) -> JobSpec:
    body: dict[str, Any] = {"name": "rc", "kind": "ray", "podSets": [
        {"name": "head", "resources": {"cpu": "500m", "memory": "1Gi"}, **head},
        {"name": "worker", "replicas": 2,
         "resources": {"cpu": "2", "memory": "2Gi", "example.com/fpga": 1}},
    ]}
    if entrypoint:
        body["ray"] = {"entrypoint": entrypoint, "runtimeEnv": {"env_vars": {"A": "1"}}}
    return validate(JobSpec, body)


def admission(job: JobSpec) -> Admission:
    return Admission(job=job.name, cluster_queue="default", pod_sets=tuple(
        PodSetAssignment(name=p.name, count=p.replicas, flavors={}, nodes=("n",) * p.replicas)
        for p in job.pod_sets))


@pytest.mark.parametrize(("body", "field", "fix"), [
    ({"podSets": [{"name": "worker", "replicas": 2}]}, "podSets", 'named "head"'),
    ({"podSets": [{"name": "head", "replicas": 2}]}, "podSets[0].replicas", "replicas: 1"),
    ({"podSets": [{"name": "head", "command": ["python", "x.py"]}]}, "podSets[0].command",
     "ray.entrypoint"),
    ({"podSets": [{"name": "head"}, {"name": "w", "resources": {"nvidia.com/gpu": "500m"}}]},
     "podSets[1].resources.nvidia.com/gpu", "whole number"),
])
def test_check_names_the_field_and_the_fix(body: dict[str, Any], field: str, fix: str) -> None:
    job = validate(JobSpec, {"name": "bad", "kind": "ray", **body})
    with pytest.raises(SpecError) as caught:
        framework_of(job).check(job)
    assert caught.value.field == field and fix in (caught.value.fix or "")


def test_the_ray_field_belongs_to_ray_jobs() -> None:
    with pytest.raises(SpecError) as caught:
        validate(JobSpec, {"name": "x", "ray": {"entrypoint": "python x.py"},
                           "podSets": [{"command": ["true"]}]})
    assert "set kind: ray" in (caught.value.fix or "")
    with pytest.raises(SpecError) as caught:
        validate(JobSpec, {"name": "x", "kind": "ray", "ray": {"entrypoint": " "},
                           "podSets": [{"name": "head"}]})
    assert caught.value.field == "ray.entrypoint"


def test_ray_pods_need_no_command() -> None:
    job = ray_job()
    framework = framework_of(job)
    assert isinstance(framework, Ray)
    assert not any(framework.needs_command(p) for p in job.pod_sets)


def _flag(command: list[str], name: str) -> str:
    text = " ".join(command)
    return text.split(f"--{name}=")[1].split()[0].strip("'")


def test_on_a_shared_machine_every_port_is_the_planes_and_distinct() -> None:
    job = ray_job()
    network = LocalNetwork(3, set())
    plans = framework_of(job).plan(job, 1, admission(job), network)
    head, worker, _ = plans
    every = [port for plan in plans for port in plan.ports.values()]
    assert len(every) == len(set(every)) == len(network.chosen)  # none shared, all chosen
    assert set(head.ports) >= {"gcs", "dashboard", "client", "node-manager", "object-manager",
                               "env-agent", "agent-http", "agent-grpc", "metrics"}
    start = head.command
    assert start[:2] == ["sh", "-c"] and "\nray start --head " in start[2]
    assert start[2].endswith(" --block")
    assert _flag(start, "port") == str(head.ports["gcs"])
    assert _flag(start, "dashboard-host") == "127.0.0.1"
    assert _flag(start, "num-cpus") == "1"  # 500m rounded up: Ray counts whole CPUs
    assert _flag(start, "memory") == str(2**30)
    workers = _flag(start, "worker-port-list").split(",")
    assert len(workers) == 1 + 8 and workers[0] == str(head.ports["worker-0"])
    temp = _flag(start, "temp-dir")
    # the head removes the cluster's temp dirs when it ends, each worker its own
    cluster_dir = f"{tempfile.gettempdir()}/ray-{head.ports['gcs']}"
    assert temp == f"{cluster_dir}/0"
    assert start[2].startswith(f"trap 'rm -rf {cluster_dir}' EXIT\n")
    assert worker.command[2].startswith(f"trap 'rm -rf {cluster_dir}/1' EXIT\n")
    # Ray's sockets live ~70 bytes below its temp dir; a socket path holds 107 at most
    assert len(temp) + 70 < 107
    assert _flag(worker.command, "temp-dir") != temp
    script = worker.command[2]
    assert f"--address=127.0.0.1:{head.ports['gcs']}" in script
    assert _flag(worker.command, "num-cpus") == "2"
    assert '--resources={"example.com/fpga":1.0}' in script
    assert framework_of(job).endpoints(job, plans) == {
        "dashboard": f"http://127.0.0.1:{head.ports['dashboard']}",
        "client": f"ray://127.0.0.1:{head.ports['client']}"}


def test_a_ray_job_head_submits_the_entrypoint_and_workers_stay_quiet() -> None:
    job = ray_job("python train.py")
    plans = framework_of(job).plan(job, 2, admission(job), OwnAddressNetwork(["h", "a", "b"]))
    head, worker, _ = plans
    assert head.env["PHALANX_RAY_ENTRYPOINT"] == "python train.py"
    assert head.env["PHALANX_RAY_RUNTIME_ENV"] == '{"env_vars": {"A": "1"}}'
    assert head.env["PHALANX_RAY_SUBMISSION_ID"] == "rc-2"
    assert "PHALANX_RAY_ENTRYPOINT" not in worker.env
    assert "ray-start.log" in worker.command[2]  # ray start's output is not the job's log
    assert head.env["RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S"] == "0"


def test_the_users_env_is_the_last_word() -> None:
    job = ray_job(env={"RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S": "5"})
    [head, *_] = framework_of(job).plan(job, 1, admission(job), OwnAddressNetwork(["h"] * 3))
    assert head.env["RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S"] == "5"


def _pod(pod_set: str, index: int, rank: int, phase: PodPhase, code: int | None = None,
         ) -> PodState:
    failure = "user" if phase is PodPhase.FAILED else None
    return PodState(ref=PodRef("rc", 1, pod_set, index, rank), node="n", phase=phase,
                    exit_code=code, reason="Error" if failure else "", failure=failure)


def test_a_ray_job_succeeds_or_fails_with_its_head_while_workers_still_run() -> None:
    job = ray_job("python train.py")
    running = [_pod("worker", 0, 1, PodPhase.RUNNING), _pod("worker", 1, 2, PodPhase.RUNNING)]
    ray = framework_of(job)
    done = ray.status(job, [_pod("head", 0, 0, PodPhase.SUCCEEDED, 0), *running], 3)
    assert (done.phase, done.all_done) == (GangPhase.SUCCEEDED, False)
    failed = ray.status(job, [_pod("head", 0, 0, PodPhase.FAILED, 3), *running], 3)
    assert (failed.phase, failed.exit_code, failed.failure) == (GangPhase.FAILED, 3, "user")
    assert "entrypoint" in failed.message
    up = ray.status(job, [_pod("head", 0, 0, PodPhase.RUNNING), *running], 3)
    assert up.phase is GangPhase.RUNNING


def test_a_cluster_is_a_gang_a_worker_failure_fails_it() -> None:
    job = ray_job()
    pods = [_pod("head", 0, 0, PodPhase.RUNNING), _pod("worker", 0, 1, PodPhase.FAILED, 1),
            _pod("worker", 1, 2, PodPhase.RUNNING)]
    assert framework_of(job).status(job, pods, 3).phase is GangPhase.FAILED
    alone = [_pod("head", 0, 0, PodPhase.SUCCEEDED, 0)]
    # a cluster's head ending is no success of a job still to come: the gang's rule holds
    assert framework_of(job).status(job, alone, 3).phase is GangPhase.STARTING


# --------------------------------------------------------------------------- the SDK
def test_codeflare_names_make_a_ray_job() -> None:
    spec = ClusterConfiguration(
        name="raytest", namespace="team-a", num_workers=3, head_cpu_requests=2,
        head_memory_requests=8, worker_cpu_requests="500m", worker_cpu_limits="500m",
        worker_memory_requests="4Gi", worker_extended_resource_requests={"nvidia.com/gpu": 1},
        envs={"A": "1"}, labels={"team": "a"},
    ).to_job_spec()
    head, worker = spec.pod_sets
    assert (spec.kind.value, spec.queue, spec.labels) == ("ray", "team-a", {"team": "a"})
    assert (head.name, head.replicas, worker.name, worker.replicas) == ("head", 1, "worker", 3)
    assert head.resources == {"cpu": 2000, "memory": 8 * 10**12}  # CodeFlare's GB
    assert worker.resources == {"cpu": 500, "memory": 4 * 2**30 * 1000, "nvidia.com/gpu": 1000}
    assert worker.env == {"A": "1"}
    local = ClusterConfiguration(name="x", namespace="ns", local_queue="lq", worker_gpu=2)
    assert local.to_job_spec().queue == "lq"
    assert local.to_job_spec().pod_sets[1].resources == {"nvidia.com/gpu": 2000}


def test_details_show_amounts_as_people_write_them_and_get_cluster_keeps_them_exact() -> None:
    config = ClusterConfiguration(name="rc", num_workers=2, head_cpu=2, head_memory=1,
                                  worker_cpu="500m", worker_memory="24684084Ki", worker_gpu=1)
    record = JobRecord(name="rc", spec=config.to_job_spec(), queue="default",
                       cluster_queue="default", priority=0, submitted_at=0.0, queued_at=0.0)
    details = describe(record)
    assert (details.head_cpu, details.head_memory, details.head_gpu) == ("2", "1G", 0)
    assert (details.worker_cpu, details.worker_memory, details.worker_gpu) == (
        "500m", "23.5Gi", 1)  # rounded for people to read, not 25276502016
    # The configuration read back from the stored spec is exact: a cluster made from it
    # asks for what the first one did.
    again = _configuration(record.spec)
    assert again.to_job_spec().pod_sets == record.spec.pod_sets


def test_requests_and_limits_must_agree() -> None:
    config = ClusterConfiguration(name="x", worker_cpu_requests=1, worker_cpu_limits=2)
    with pytest.raises(SpecError) as caught:
        config.to_job_spec()
    assert caught.value.field == "worker_cpu_requests" and "exactly" in (caught.value.fix or "")


def test_the_sdk_loads_no_ray_until_asked() -> None:
    code = ("import sys, phalanx.ray, phalanx.cli.cluster; "
            "assert 'ray' not in sys.modules, 'ray imported'")
    subprocess.run([sys.executable, "-c", code], check=True)
