"""``kind: mpi``: what a spec needs, what each pod runs, and the launcher's word on the job."""

from __future__ import annotations

from typing import Any

import pytest

from phalanx.errors import SpecError
from phalanx.kinds import GangPhase, OwnAddressNetwork, PodPhase, PodRef, PodState, framework_of
from phalanx.kinds.base import PodNetwork
from phalanx.kinds.mpi import AGENT_PORT, Mpi, launcher_status
from phalanx.kinds.mpi_launch import hostfile_text
from phalanx.kinds.mpi_rsh import agents
from phalanx.scheduler.types import Admission, PodSetAssignment
from phalanx.spec.resources import JobSpec


def mpi_job(workers: int = 3, **worker: Any) -> JobSpec:
    return JobSpec.model_validate({"name": "allreduce", "kind": "mpi", "podSets": [
        {"name": "launcher", "command": ["mpirun", "-np", str(workers), "python", "a.py"]},
        {"name": "worker", "replicas": workers, **worker},
    ]})


def admit(job: JobSpec) -> Admission:
    return Admission(job=job.name, cluster_queue="default", pod_sets=tuple(
        PodSetAssignment(p.name, p.replicas, {}, ("n1",) * p.replicas) for p in job.pod_sets))


class SharedHost(PodNetwork):
    shared_host = True

    def port(self, pod: PodRef, purpose: str, default: int) -> int:
        return 40000 + pod.rank


def test_mpi_jobs_are_run_by_the_mpi_framework() -> None:
    assert isinstance(framework_of(mpi_job()), Mpi)


@pytest.mark.parametrize(("change", "field", "words"), [
    ({"podSets": [{"name": "launcher", "command": ["mpirun"]}, {"name": "ranks"}]},
     "podSets[1].name", "not 'ranks'"),
    ({"podSets": [{"name": "launcher", "command": ["mpirun"]}]}, "podSets", "'worker'"),
    ({"podSets": [{"name": "worker"}]}, "podSets", "'launcher'"),
    ({"podSets": [{"name": "launcher", "replicas": 2, "command": ["mpirun"]}, {"name": "worker"}]},
     "podSets[0].replicas", "2 replicas"),
    ({"podSets": [{"name": "launcher"}, {"name": "worker"}]}, "podSets[0].command", "no command"),
    ({"podSets": [{"name": "launcher", "command": ["mpirun"]},
                  {"name": "worker", "command": ["python", "x.py"]}]},
     "podSets[1].command", "not a command of its own"),
    ({"podSets": [{"name": "launcher", "command": ["mpirun"]},
                  {"name": "worker", "env": {"NPROC_PER_NODE": "gpu"}}]},
     "podSets[1].env.NPROC_PER_NODE", "not a number of MPI slots"),
    ({"podSets": [{"name": "launcher", "command": ["mpirun"]},
                  {"name": "worker", "env": {"NPROC_PER_NODE": "0"}}]},
     "podSets[1].env.NPROC_PER_NODE", "not a number of MPI slots"),
])
def test_check_refuses_what_mpi_cannot_run(change: dict[str, Any], field: str, words: str) -> None:
    job = JobSpec.model_validate({"name": "bad", "kind": "mpi", **change})
    with pytest.raises(SpecError) as refused:
        Mpi().check(job)
    assert refused.value.field == field
    assert words in refused.value.message and refused.value.fix


def test_workers_need_no_command_but_the_launcher_does() -> None:
    job = mpi_job()
    Mpi().check(job)
    launcher, worker = job.pod_sets
    assert Mpi().needs_command(launcher) and not Mpi().needs_command(worker)


def test_plan_wraps_the_launcher_and_runs_agents_on_workers() -> None:
    job = mpi_job(env={"NPROC_PER_NODE": "2", "EXTRA": "kept"})
    hosts = ["launcher-0.svc", "worker-0.svc", "worker-1.svc", "worker-2.svc"]
    plans = Mpi().plan(job, 1, admit(job), OwnAddressNetwork(hosts))
    launcher, *workers = plans
    assert launcher.command == ["python", "-m", "phalanx.kinds.mpi_launch", "--",
                                "mpirun", "-np", "3", "python", "a.py"]
    secret = launcher.env["PHALANX_MPI_SECRET"]
    assert len(secret) >= 32
    assert agents(launcher.env["PHALANX_MPI_HOSTS"]) == {
        f"allreduce-worker-{i}": (f"worker-{i}.svc", AGENT_PORT) for i in range(3)}
    assert hostfile_text(launcher.env["PHALANX_MPI_SLOTS"]) == "".join(
        f"allreduce-worker-{i} slots=2\n" for i in range(3))
    for worker in workers:
        assert worker.command == ["python", "-m", "phalanx.kinds.mpi_agent"]
        assert worker.env["PHALANX_MPI_SECRET"] == secret
        assert worker.env["PHALANX_MPI_AGENT_PORT"] == str(AGENT_PORT)
        assert worker.env["PHALANX_MPI_BIND"] == ""  # every address of its own pod
        assert worker.ports["mpi-agent"] == AGENT_PORT
        assert worker.env["EXTRA"] == "kept" and worker.env["RANK"] == str(worker.ref.rank)


def test_the_secret_is_the_attempts_whatever_plans_it() -> None:
    """Two plans of one attempt under its key agree (a plane completing another's launch);
    another attempt, or another job, gets a secret of its own."""
    job = mpi_job()
    hosts = ["launcher-0.svc", "worker-0.svc", "worker-1.svc", "worker-2.svc"]
    key = b"the attempt's key"

    def secrets_of(attempt: int, name: str = "allreduce", with_key: bytes = key) -> set[str]:
        spec = job.model_copy(update={"name": name})
        plans = Mpi().plan(spec, attempt, admit(spec), OwnAddressNetwork(hosts, key=with_key))
        return {p.env["PHALANX_MPI_SECRET"] for p in plans}

    first = secrets_of(1)
    assert len(first) == 1 and len(next(iter(first))) == 32
    assert secrets_of(1) == first
    assert secrets_of(2) != first  # an old attempt's launcher cannot drive new workers
    assert secrets_of(1, name="other") != first
    assert secrets_of(1, with_key=b"another key") != first


def test_plan_on_a_shared_host_gives_each_agent_its_own_port() -> None:
    job = mpi_job(workers=2)
    plans = Mpi().plan(job, 1, admit(job), SharedHost(["127.0.0.1"] * 3))
    assert agents(plans[0].env["PHALANX_MPI_HOSTS"]) == {
        "allreduce-worker-0": ("127.0.0.1", 40001), "allreduce-worker-1": ("127.0.0.1", 40002)}
    assert [p.env["PHALANX_MPI_BIND"] for p in plans[1:]] == ["127.0.0.1"] * 2
    assert [p.env["PHALANX_MPI_SHARED_HOST"] for p in plans[1:]] == ["1"] * 2


@pytest.mark.parametrize(("worker", "slots"), [
    ({}, "1"),
    ({"resources": {"nvidia.com/gpu": 4}}, "4"),
    ({"resources": {"nvidia.com/gpu": 4}, "env": {"NPROC_PER_NODE": "8"}}, "8"),
])
def test_slots_per_worker(worker: dict[str, Any], slots: str) -> None:
    job = mpi_job(workers=1, **worker)
    launcher = Mpi().plan(job, 1, admit(job), OwnAddressNetwork(["a", "b"]))[0]
    assert launcher.env["PHALANX_MPI_SLOTS"] == f"allreduce-worker-0={slots}"


def pod(pod_set: str, index: int, phase: PodPhase, failure: str | None = None,
        code: int | None = None) -> PodState:
    rank = 0 if pod_set == "launcher" else index + 1
    ref = PodRef(job="j", attempt=1, pod_set=pod_set, index=index, rank=rank)
    return PodState(ref=ref, node="n", phase=phase, failure=failure,  # type: ignore[arg-type]
                    exit_code=code, reason="Error" if failure else "")


R, S, F, P = PodPhase.RUNNING, PodPhase.SUCCEEDED, PodPhase.FAILED, PodPhase.PENDING


def test_the_launcher_decides_the_job() -> None:
    workers_running = [pod("worker", 0, R), pod("worker", 1, R)]
    assert launcher_status([pod("launcher", 0, R), *workers_running], 3).phase is GangPhase.RUNNING
    assert launcher_status([pod("launcher", 0, R), pod("worker", 0, P)], 3).phase is \
        GangPhase.STARTING
    done = launcher_status([pod("launcher", 0, S), *workers_running], 3)
    assert done.phase is GangPhase.SUCCEEDED and not done.all_done  # workers are stopped next
    stopped = [pod("worker", 0, S), pod("worker", 1, S)]
    assert launcher_status([pod("launcher", 0, S), *stopped], 3).all_done
    failed = launcher_status([pod("launcher", 0, F, "user", 3), *stopped], 3)
    assert (failed.phase, failed.failure, failed.exit_code) == (GangPhase.FAILED, "user", 3)
    assert "j-launcher-0" in failed.message


def test_a_failing_worker_fails_the_job_by_its_cause() -> None:
    lost = launcher_status([pod("launcher", 0, R), pod("worker", 0, F, "system"),
                            pod("worker", 1, R)], 3)
    assert (lost.phase, lost.failure) == (GangPhase.FAILED, "system")
    assert "j-worker-0" in lost.message
    crashed = launcher_status([pod("launcher", 0, R), pod("worker", 1, F, "user", 1)], 3)
    assert (crashed.phase, crashed.failure) == (GangPhase.FAILED, "user")
    # The launcher's own failure says more than a worker's that followed from it.
    both = launcher_status([pod("launcher", 0, F, "user", 2), pod("worker", 0, F, "system")], 2)
    assert both.failure == "user" and "launcher" in both.message
