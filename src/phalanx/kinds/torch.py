"""``kind: torch``: the Kubeflow training operator's PyTorchJob environment, for torchrun.

A torch pod sees ``MASTER_ADDR``/``MASTER_PORT``, ``WORLD_SIZE``,
``RANK``/``NODE_RANK``, ``NNODES``, ``NPROC_PER_NODE``, ``LOCAL_RANK`` and the
``PET_*`` names torchrun reads from its environment, on top of Phalanx's own.

As in the training operator, ``RANK`` is the pod's rank (torchrun renumbers its
worker processes) and ``WORLD_SIZE`` counts processes: pods times
``NPROC_PER_NODE``. A pod set can raise ``NPROC_PER_NODE`` in its own env
(``WORLD_SIZE`` then counts pods when a value is not a number, such as
torchrun's "gpu"); ``PHALANX_WORLD_SIZE`` always counts pods.
"""

from __future__ import annotations

from collections.abc import Sequence

from phalanx.kinds.base import Framework, PodNetwork
from phalanx.kinds.env import PlacedPod
from phalanx.spec.resources import JobKind, JobSpec, PodSet


class Torch(Framework):
    kind = JobKind.TORCH

    def environment(
        self, job: JobSpec, pod: PlacedPod, pods: Sequence[PlacedPod], network: PodNetwork,
        master_port: int,
    ) -> dict[str, str]:
        nprocs = [nproc_per_node(p.pod_set) for p in pods]
        numeric = [int(n) for n in nprocs if n.isdigit() and int(n) > 0]
        world = sum(numeric) if len(numeric) == len(pods) else len(pods)
        rank = str(pod.ref.rank)
        nproc = nprocs[pod.ref.rank]
        return {
            "MASTER_ADDR": network.master_addr,
            "MASTER_PORT": str(master_port),
            "PET_MASTER_ADDR": network.master_addr,
            "PET_MASTER_PORT": str(master_port),
            "WORLD_SIZE": str(world),
            "NNODES": str(len(pods)),
            "PET_NNODES": str(len(pods)),
            "NODE_RANK": rank,
            "PET_NODE_RANK": rank,
            "LOCAL_RANK": "0",
            # torchrun's two spellings kept in step when the user sets one of them
            "NPROC_PER_NODE": nproc,
            "PET_NPROC_PER_NODE": nproc,
        }


def nproc_per_node(pod_set: PodSet) -> str:
    """Processes per pod: "1" unless the pod set's env says otherwise (torchrun accepts "gpu")."""
    return pod_set.env.get("NPROC_PER_NODE", pod_set.env.get("PET_NPROC_PER_NODE", "1"))
