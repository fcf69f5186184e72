"""Where an attempt's pods go, in rank order, and the environment every kind gives them.

Every pod of every kind sees Phalanx's own names, which never collide with a
framework's: ``PHALANX_JOB``, ``PHALANX_ATTEMPT``, ``PHALANX_EPOCH``, ``PHALANX_RANK``,
``PHALANX_WORLD_SIZE`` (pods), ``PHALANX_NODE_IPS`` (one address per pod, rank
order), ``PHALANX_MASTER_ADDR``/``PHALANX_MASTER_PORT`` (rank 0's address and a
port reserved for the gang's rendezvous), ``PHALANX_POD_SET``,
``PHALANX_POD_INDEX`` and ``PHALANX_POD_NAME``. Plain gangs also read ``RANK`` and
``WORLD_SIZE`` (pods); a kind adds its framework's names on top (``torch.py``).
The pod set's own ``env`` is applied last by the kind, so the user can override
anything.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from phalanx.errors import SpecError
from phalanx.kinds.pods import PodRef
from phalanx.scheduler.types import Admission, PodSetAssignment
from phalanx.spec.resources import JobSpec, PodSet


@dataclass(frozen=True, slots=True)
class PlacedPod:
    """One admitted pod: who it is, its pod set, and the node the admission put it on."""

    ref: PodRef
    pod_set: PodSet
    node: str


def placed_pods(job: JobSpec, attempt: int, admission: Admission) -> list[PlacedPod]:
    """Every admitted pod of ``job`` in rank order (pod sets in spec order).

    Each pod set contributes as many pods as the admission placed (fewer than
    ``replicas`` under partial admission). An admission that does not fit the
    job raises ``SpecError`` naming the field.
    """
    pods: list[PlacedPod] = []
    rank = 0
    for pod_set, nodes in admitted_pods(job, admission):
        for index, node in enumerate(nodes):
            ref = PodRef(job=job.name, attempt=attempt, pod_set=pod_set.name, index=index,
                         rank=rank)
            pods.append(PlacedPod(ref, pod_set, node))
            rank += 1
    return pods


def phalanx_environment(
    pod: PlacedPod, total: int, *, master_addr: str, master_port: int,
    pod_addresses: Sequence[str],
) -> dict[str, str]:
    """The names every kind's pods get (see the module's docstring)."""
    ref = pod.ref
    return {
        "RANK": str(ref.rank),
        "WORLD_SIZE": str(total),
        "PHALANX_JOB": ref.job,
        "PHALANX_ATTEMPT": str(ref.attempt),
        # The attempt's fencing token: a later attempt of the job always has a larger one,
        # so a checkpoint writer can refuse writes from a stale attempt on shared storage.
        "PHALANX_EPOCH": str(ref.attempt),
        "PHALANX_WORLD_SIZE": str(total),
        "PHALANX_NODE_IPS": ",".join(pod_addresses),
        "PHALANX_MASTER_ADDR": master_addr,
        "PHALANX_MASTER_PORT": str(master_port),
        "PHALANX_POD_SET": ref.pod_set,
        "PHALANX_POD_INDEX": str(ref.index),
        "PHALANX_POD_NAME": ref.name,
        "PHALANX_RANK": str(ref.rank),
    }


def check_addresses(pod_addresses: Sequence[str], total: int) -> None:
    if len(pod_addresses) != total:
        raise SpecError(
            f"{len(pod_addresses)} pod address(es) given for {total} admitted pod(s)",
            field="pod_addresses", fix="pass exactly one address per admitted pod, in rank order",
        )


def admitted_pods(job: JobSpec, admission: Admission) -> list[tuple[PodSet, tuple[str, ...]]]:
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
