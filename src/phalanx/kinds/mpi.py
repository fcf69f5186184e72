"""``kind: mpi``: an MPI job as the MPI Operator runs one, with Phalanx as the rsh agent.

A job has two pod sets: ``launcher`` (one pod, running the user's ``mpirun``)
and ``worker`` (the MPI ranks' hosts). Workers run no command of their own: each
runs an agent (``mpi_agent.py``) that starts what the launcher's rsh agent asks
(``orted``) inside the worker pod, in its environment and process group, as the
MPI Operator does with ``kubectl exec``, so no sshd is needed. The launcher's
command is wrapped (``mpi_launch.py``): it waits until every worker's agent
answers, writes the hostfile (one line per worker, its slots from the worker pod
set's ``NPROC_PER_NODE``, else its GPUs, else 1), points OpenMPI at the hostfile
and at Phalanx's rsh agent (``mpi_rsh.py``) through ``OMPI_MCA_*``/``PRTE_MCA_*``,
then runs the command.

The launcher decides: the job succeeds when it does, and fails when it fails. A
worker failing fails the job too (a user failure when its agent exited with an
error, a system one when it was lost or killed); workers still running when the
launcher ends are stopped (SIGTERM, then the job's grace).

The launcher and the workers share a secret of the attempt's
(``PHALANX_MPI_SECRET``, derived from the network's key, so a second plan of the
attempt gives the same one): a worker's agent runs nothing for anyone without it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from phalanx.errors import SpecError
from phalanx.kinds.base import Framework, PodNetwork, PodPlan
from phalanx.kinds.gangs import GangPhase, GangStatus
from phalanx.kinds.pods import PodPhase, PodState, failure_text
from phalanx.scheduler.types import Admission
from phalanx.spec.quantity import MILLI
from phalanx.spec.resources import GPU, JobKind, JobSpec, PodSet

LAUNCHER, WORKER = "launcher", "worker"
AGENT_PORT = 2222
"""The workers' agents listen here where pods have addresses of their own (Kubernetes)."""
AGENT = "mpi-agent"
LAUNCH_MODULE, AGENT_MODULE = "phalanx.kinds.mpi_launch", "phalanx.kinds.mpi_agent"
# What the launcher's wrapper and the rsh agent read (names of the hosts in the hostfile,
# their agents' addresses and their slots), and the attempt's secret.
HOSTS_ENV, SLOTS_ENV, SECRET_ENV = "PHALANX_MPI_HOSTS", "PHALANX_MPI_SLOTS", "PHALANX_MPI_SECRET"
BIND_ENV, PORT_ENV = "PHALANX_MPI_BIND", "PHALANX_MPI_AGENT_PORT"
SHARED_HOST_ENV = "PHALANX_MPI_SHARED_HOST"


class Mpi(Framework):
    kind = JobKind.MPI

    def check(self, job: JobSpec) -> None:
        names = [p.name for p in job.pod_sets]
        for i, pod_set in enumerate(job.pod_sets):
            if pod_set.name not in (LAUNCHER, WORKER):
                raise SpecError(
                    f"an MPI job has pod sets 'launcher' and 'worker', not {pod_set.name!r}",
                    field=f"podSets[{i}].name",
                    fix="name the pod set that runs mpirun 'launcher' and the one whose pods "
                        "host the ranks 'worker'",
                )
        for needed in (LAUNCHER, WORKER):
            if needed not in names:
                raise SpecError(
                    f"an MPI job needs a pod set named {needed!r}", field="podSets",
                    fix="give one pod set 'launcher' (1 replica, running mpirun) and one "
                        "'worker' (the ranks' hosts)",
                )
        for i, pod_set in enumerate(job.pod_sets):
            where = f"podSets[{i}]"
            if pod_set.name == LAUNCHER and pod_set.replicas != 1:
                raise SpecError(
                    f"the launcher has {pod_set.replicas} replicas; MPI runs one mpirun",
                    field=f"{where}.replicas", fix="set the launcher's replicas to 1",
                )
            if pod_set.name == LAUNCHER and not pod_set.command:
                raise SpecError(
                    "the launcher has no command", field=f"{where}.command",
                    fix='give the mpirun command, e.g. ["mpirun", "-np", "3", "python", '
                        '"allreduce.py"]',
                )
            if pod_set.name == WORKER and pod_set.command:
                raise SpecError(
                    "an MPI worker runs what the launcher's mpirun starts on it, not a "
                    "command of its own", field=f"{where}.command",
                    fix="remove the workers' command and put the program in the launcher's "
                        "mpirun command line",
                )
            if pod_set.name == WORKER and not (_slots(pod_set).isdigit()
                                               and int(_slots(pod_set)) > 0):
                raise SpecError(
                    f"NPROC_PER_NODE {_slots(pod_set)!r} is not a number of MPI slots",
                    field=f"{where}.env.NPROC_PER_NODE",
                    fix="give the ranks per worker as a whole number above 0, e.g. \"2\"",
                )

    def needs_command(self, pod_set: PodSet) -> bool:
        return pod_set.name != WORKER  # a worker runs Phalanx's agent

    def plan(
        self, job: JobSpec, attempt: int, admission: Admission, network: PodNetwork,
    ) -> list[PodPlan]:
        plans = super().plan(job, attempt, admission, network)
        secret = network.attempt_secret(job.name, attempt, "mpi")
        workers = [p for p in plans if p.ref.pod_set == WORKER]
        ports = {p.ref.name: network.port(p.ref, AGENT, AGENT_PORT) for p in workers}
        addresses = network.addresses
        hosts = ",".join(
            f"{p.ref.name}={addresses[p.ref.rank]}:{ports[p.ref.name]}" for p in workers)
        pod_sets = {p.name: p for p in job.pod_sets}
        slots = ",".join(f"{p.ref.name}={_slots(pod_sets[WORKER])}" for p in workers)
        out = []
        for plan in plans:
            pod_set = pod_sets[plan.ref.pod_set]
            if plan.ref.pod_set == LAUNCHER:
                command = ["python", "-m", LAUNCH_MODULE, "--", *pod_set.command]
                env = {HOSTS_ENV: hosts, SLOTS_ENV: slots, SECRET_ENV: secret}
                ports_of_pod = dict(plan.ports)
            else:
                command = ["python", "-m", AGENT_MODULE]
                port = ports[plan.ref.name]
                env = {PORT_ENV: str(port), SECRET_ENV: secret,
                       BIND_ENV: addresses[plan.ref.rank] if network.shared_host else "",
                       SHARED_HOST_ENV: "1" if network.shared_host else ""}
                ports_of_pod = {**plan.ports, AGENT: port}
            out.append(replace(plan, command=command, env={**plan.env, **env, **pod_set.env},
                               ports=ports_of_pod))
        return out

    def status(self, job: JobSpec, pods: list[PodState], expected: int) -> GangStatus:
        return launcher_status(pods, expected)


def launcher_status(pods: Sequence[PodState], expected: int) -> GangStatus:
    """The launcher's end is the job's; a worker that fails on its own fails it first."""
    all_done = len(pods) >= expected and all(p.phase.done for p in pods)
    launcher = next((p for p in pods if p.ref.pod_set == LAUNCHER), None)
    if launcher is not None and launcher.phase is PodPhase.SUCCEEDED:
        return GangStatus(GangPhase.SUCCEEDED, all_done, exit_code=0,
                          message="the launcher succeeded")
    failed = [p for p in pods if p.phase is PodPhase.FAILED and p.failure is not None]
    if failed:
        # The launcher's own failure says most; of the workers', a system one does.
        first = next((p for p in failed if p.ref.pod_set == LAUNCHER),
                     next((p for p in failed if p.failure == "system"), failed[0]))
        return GangStatus(GangPhase.FAILED, all_done, first.failure,
                          f"pod {first.ref.name} failed ({failure_text(first)})",
                          first.exit_code)
    if pods and all_done:
        return GangStatus(GangPhase.STOPPED, True)
    running = sum(1 for p in pods if p.phase is PodPhase.RUNNING)
    if len(pods) >= expected and running == len(pods):
        return GangStatus(GangPhase.RUNNING, False)
    return GangStatus(GangPhase.STARTING, False)


def _slots(pod_set: PodSet) -> str:
    """MPI slots per worker: its NPROC_PER_NODE, else its whole GPUs, else 1."""
    given = pod_set.env.get("NPROC_PER_NODE")
    if given is not None:
        return given.strip()
    gpus = pod_set.resources.get(GPU, 0) // MILLI
    return str(gpus if gpus > 0 else 1)
