"""The seam between a job's kind and everything that runs it.

A ``Framework`` says, for one ``JobKind``, what a job's pods run (commands,
environment, ports), when the job is ready and when it is done, and what is
wrong with a spec before it is queued. Compute planes and the control loop ask
the job's framework (``phalanx.kinds.framework_of``) and never test the kind
themselves, as Kueue's job frameworks plug into its one reconciler: a new kind
is one module and its tests.

Planes differ in how pods reach each other, and say so through a
``PodNetwork``: on Kubernetes every pod has an address of its own and a
framework's well-known ports; on the local plane every pod shares this
machine, so each port a pod listens on is chosen free and kept for the attempt.
A network also carries the key an attempt's shared secrets derive from
(``attempt_secret``): a plane that may plan one attempt twice (Kubernetes, which
completes a launch a crash interrupted) keeps the key with the attempt, so both
plans give its pods the same secrets.
"""

from __future__ import annotations

import abc
import hashlib
import hmac
import secrets
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import ClassVar

from phalanx.kinds.env import PlacedPod, check_addresses, phalanx_environment, placed_pods
from phalanx.kinds.gangs import GangStatus, gang_status
from phalanx.kinds.pods import PodRef, PodState
from phalanx.scheduler.types import Admission
from phalanx.spec.resources import JobKind, JobSpec, PodSet

DEFAULT_MASTER_PORT = 29500
"""The gang's rendezvous port where pods have addresses of their own (torchrun's default)."""


@dataclass(frozen=True, slots=True)
class PodPlan:
    """One pod as its plane must start it."""

    ref: PodRef
    node: str
    command: list[str]
    env: dict[str, str]
    ports: dict[str, int] = field(default_factory=dict)  # purpose -> port the pod listens on


class PodNetwork(abc.ABC):
    """Addresses of an attempt's pods, and the ports they may listen on."""

    shared_host: ClassVar[bool]

    def __init__(self, addresses: Sequence[str], *, key: bytes | None = None) -> None:
        self.addresses = tuple(addresses)  # one per pod, rank order
        # Without a key of the attempt's, the secrets hold for this network's plans only.
        self.key = key if key is not None else secrets.token_bytes(32)

    def attempt_secret(self, job: str, attempt: int, purpose: str) -> str:
        """A secret the attempt's pods share for ``purpose``: the same for every plan made
        with this key, and unrelated between attempts, jobs and purposes."""
        message = f"{purpose}\0{job}\0{attempt}".encode()
        return hmac.new(self.key, message, hashlib.sha256).hexdigest()[:32]

    @property
    def master_addr(self) -> str:
        return self.addresses[0] if self.addresses else ""

    @abc.abstractmethod
    def port(self, pod: PodRef, purpose: str, default: int) -> int:
        """The port ``pod`` listens on for ``purpose`` (the same answer when asked again)."""


class OwnAddressNetwork(PodNetwork):
    """Every pod has an address of its own (Kubernetes, simulated): well-known ports serve."""

    shared_host = False

    def port(self, pod: PodRef, purpose: str, default: int) -> int:
        return default


class Framework(abc.ABC):
    """What one kind of job means; subclasses register in ``phalanx.kinds``."""

    kind: ClassVar[JobKind]
    # The custom resource an operator may run this kind's pods as, where a plane offers
    # it and is asked to (KubeRay's RayCluster); None: the plane's own pods always.
    operator_resource: ClassVar[str | None] = None

    def check(self, job: JobSpec) -> None:
        """Raise ``SpecError`` (naming the field and the fix) for a spec this kind cannot run."""
        return None

    def needs_command(self, pod_set: PodSet) -> bool:
        """Whether ``pod_set`` must say what to run (False where the kind supplies it)."""
        return True

    def plan(
        self, job: JobSpec, attempt: int, admission: Admission, network: PodNetwork,
    ) -> list[PodPlan]:
        """Every admitted pod in rank order with its node, command, environment and ports."""
        pods = placed_pods(job, attempt, admission)
        check_addresses(network.addresses, len(pods))
        master_port = network.port(pods[0].ref, "master", DEFAULT_MASTER_PORT) if pods else 0
        plans = []
        for pod in pods:
            env = phalanx_environment(pod, len(pods), master_addr=network.master_addr,
                                      master_port=master_port, pod_addresses=network.addresses)
            env.update(self.environment(job, pod, pods, network, master_port))
            env.update(pod.pod_set.env)  # the user's word is last
            plans.append(PodPlan(pod.ref, pod.node, self.command(job, pod),
                                 env, {"master": master_port}))
        return plans

    def environment(
        self, job: JobSpec, pod: PlacedPod, pods: Sequence[PlacedPod], network: PodNetwork,
        master_port: int,
    ) -> dict[str, str]:
        """The kind's own variables for ``pod``, on top of Phalanx's."""
        return {}

    def command(self, job: JobSpec, pod: PlacedPod) -> list[str]:
        """What ``pod`` runs: its pod set's command unless the kind says otherwise."""
        return list(pod.pod_set.command)

    def status(self, job: JobSpec, pods: list[PodState], expected: int) -> GangStatus:
        """What the attempt's pods mean for the job (default: a gang that ends with its pods)."""
        return gang_status(pods, expected)

    def endpoints(self, job: JobSpec, plans: Sequence[PodPlan]) -> dict[str, str]:
        """Addresses worth recording on the job (a dashboard's URL, say); none by default."""
        return {}
