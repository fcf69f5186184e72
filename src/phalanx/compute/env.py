"""The distributed environment of a job's pods, shared by every compute plane.

Compatible with torchrun and the Kubeflow training operator: a torch pod sees
``MASTER_ADDR``/``MASTER_PORT``, ``WORLD_SIZE``, ``RANK``/``NODE_RANK``,
``NNODES``, ``NPROC_PER_NODE`` and the ``PET_*`` names torchrun reads from its
environment. Every kind of job gets the same variables (plain Python gangs read
``RANK`` too), plus the ``PHALANX_*`` names that never collide with a framework.

As in the training operator, ``RANK`` is the pod's rank (torchrun renumbers
its worker processes) and ``WORLD_SIZE`` counts processes: pods times
``NPROC_PER_NODE``. A pod set can raise ``NPROC_PER_NODE`` in its own env
(``WORLD_SIZE`` then counts pods when a value is not a number, such as torchrun's
"gpu"); ``PHALANX_WORLD_SIZE`` always counts pods.
"""

from __future__ import annotations

from collections.abc import Sequence

from phalanx.compute.base import PodRef
from phalanx.errors import SpecError
from phalanx.scheduler.types import Admission, PodSetAssignment
from phalanx.spec.resources import JobSpec, PodSet

# Where a job's pods save checkpoints: kept across its attempts (each plane says where).
CHECKPOINT_DIR_ENV = "PHALANX_CHECKPOINT_DIR"

PodEnvironment = tuple[PodRef, str, dict[str, str]]
"""A pod, the node it is placed on, and its environment."""


def pod_environments(
    job: JobSpec,
    attempt: int,
    admission: Admission,
    *,
    master_addr: str,
    master_port: int,
    pod_addresses: Sequence[str],
) -> list[PodEnvironment]:
    """Every pod of the admitted ``job`` in rank order, with its node and environment.

    Pod sets come in spec order; each contributes as many pods as the admission
    placed (fewer than ``replicas`` under partial admission). ``pod_addresses``
    holds one address per pod in rank order (``PHALANX_NODE_IPS``). The pod set's
    own ``env`` is applied last, so the user can override anything.
    """
    counts = _admitted_pods(job, admission)
    total = sum(len(nodes) for _, nodes in counts)
    if len(pod_addresses) != total:
        raise SpecError(
            f"{len(pod_addresses)} pod address(es) given for {total} admitted pod(s)",
            field="pod_addresses", fix="pass exactly one address per admitted pod, in rank order",
        )
    nprocs = [_nproc(pod_set) for pod_set, nodes in counts for _ in nodes]
    numeric = [int(n) for n in nprocs if n.isdigit() and int(n) > 0]
    world = sum(numeric) if len(numeric) == total else total
    shared = {
        "MASTER_ADDR": master_addr,
        "MASTER_PORT": str(master_port),
        "PET_MASTER_ADDR": master_addr,
        "PET_MASTER_PORT": str(master_port),
        "WORLD_SIZE": str(world),
        "NNODES": str(total),
        "PET_NNODES": str(total),
        "LOCAL_RANK": "0",
        "PHALANX_JOB": job.name,
        "PHALANX_ATTEMPT": str(attempt),
        "PHALANX_WORLD_SIZE": str(total),
        "PHALANX_NODE_IPS": ",".join(pod_addresses),
    }
    pods: list[PodEnvironment] = []
    rank = 0
    for pod_set, nodes in counts:
        for index, node in enumerate(nodes):
            ref = PodRef(job=job.name, attempt=attempt, pod_set=pod_set.name, index=index,
                         rank=rank)
            env = dict(shared)
            env.update({
                "RANK": str(rank),
                "NODE_RANK": str(rank),
                "PET_NODE_RANK": str(rank),
                "PHALANX_POD_SET": pod_set.name,
                "PHALANX_POD_INDEX": str(index),
                "PHALANX_POD_NAME": ref.name,
                "PHALANX_RANK": str(rank),
            })
            # keep torchrun's two spellings in step when the user sets one of them
            env["NPROC_PER_NODE"] = env["PET_NPROC_PER_NODE"] = nprocs[rank]
            env.update(pod_set.env)
            pods.append((ref, node, env))
            rank += 1
    return pods


def _admitted_pods(job: JobSpec, admission: Admission) -> list[tuple[PodSet, tuple[str, ...]]]:
    """Each pod set of the spec with the nodes its admitted pods are placed on."""
    if admission.job != job.name:
        raise SpecError(
            f"the admission is for job {admission.job!r}, not {job.name!r}",
            field="admission.job", fix="launch a job with its own admission",
        )
    assigned: dict[str, tuple[int, PodSetAssignment]] = {
        a.name: (i, a) for i, a in enumerate(admission.pod_sets)
    }
    unknown = sorted(set(assigned) - {p.name for p in job.pod_sets})
    if unknown:
        raise SpecError(
            f"the admission places pod set(s) {unknown} that job {job.name!r} does not have",
            field="admission.podSets", fix="admit exactly the job's pod sets",
        )
    placed: list[tuple[PodSet, tuple[str, ...]]] = []
    for pod_set in job.pod_sets:
        if pod_set.name not in assigned:
            raise SpecError(
                f"pod set {pod_set.name!r} of job {job.name!r} is missing from the admission",
                field="admission.podSets", fix="admit every pod set of the job",
            )
        i, assignment = assigned[pod_set.name]
        field = f"admission.podSets[{i}]"
        if not 1 <= assignment.count <= pod_set.replicas:
            raise SpecError(
                f"pod set {pod_set.name!r} is admitted with {assignment.count} pod(s); "
                f"it has {pod_set.replicas} replica(s)",
                field=f"{field}.count", fix=f"admit between 1 and {pod_set.replicas} pod(s)",
            )
        if len(assignment.nodes) != assignment.count:
            raise SpecError(
                f"pod set {pod_set.name!r} places {len(assignment.nodes)} pod(s) on nodes "
                f"but admits {assignment.count}",
                field=f"{field}.nodes", fix="give exactly one node per admitted pod",
            )
        placed.append((pod_set, assignment.nodes))
    return placed


def _nproc(pod_set: PodSet) -> str:
    """Processes per pod: "1" unless the pod set's env says otherwise (torchrun accepts "gpu")."""
    return pod_set.env.get("NPROC_PER_NODE", pod_set.env.get("PET_NPROC_PER_NODE", "1"))
