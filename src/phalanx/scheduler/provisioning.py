"""Quota held for gangs whose nodes are being bought (Kueue's quota reservation with an
admission check pending).

A pending job that fits its ClusterQueue's quota on a flavor with ``provisioning`` but no
node of that flavor takes a *hold*: its quota is charged (other jobs see it as used), it
leaves the queue, and the cycle reports a ``ProvisioningNeed`` for the control plane's
provisioning controller, which buys one pool for the whole gang. When the pool's nodes are
all Ready, the controller calls ``Scheduler.provisioning_ready`` and the next cycle places
the gang on those nodes only (they carry ``phalanx.dev/reserved-for=<job>``, label and
taint, which only that job tolerates). When the pool cannot be had, the controller calls
``Scheduler.release_provisioning``: the quota goes back, the job is pending again, and the
flavor is blocked (for that job, or for all) until a time, so the next flavor is tried.

Nothing here runs for a configuration without provisionable flavors: its decisions are
those of the scheduler without this module.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from phalanx.scheduler.flavorassigner.flavors import Assignment
from phalanx.scheduler.types import PendingCode, PendingReason
from phalanx.scheduler.workload import FR, Workload
from phalanx.spec.config import QueueConfig
from phalanx.spec.provisioning import RESERVED_FOR, FlavorProvisioning
from phalanx.spec.resources import Toleration

ANY_JOB = ""  # a block of a flavor for every job (a stockout there)


@dataclass(frozen=True, slots=True)
class PodSetNeed:
    name: str
    count: int
    requests: dict[str, int]  # per pod, milli-units
    nodes: int  # nodes of the flavor's shape this pod set needs


@dataclass(frozen=True, slots=True)
class ProvisioningNeed:
    """A gang that holds quota and needs a pool of ``flavor`` (``nodes`` nodes)."""

    job: str
    cluster_queue: str
    flavor: str
    pod_sets: tuple[PodSetNeed, ...]

    @property
    def nodes(self) -> int:
        return sum(p.nodes for p in self.pod_sets)


@dataclass(slots=True)
class Hold:
    wl: Workload
    need: ProvisioningNeed
    usage: dict[FR, int]
    assignment: Assignment  # its flavors per pod set (the quota it was judged on)
    ready_nodes: tuple[str, ...] | None = None  # set once the pool's nodes are all Ready
    message: str = ""


@dataclass(frozen=True, slots=True)
class Block:
    until: float
    reason: str


@dataclass(slots=True)
class Provisioning:
    """The holds, the flavors blocked after failures, and the provisionable flavors."""

    flavors: dict[str, FlavorProvisioning] = field(default_factory=dict)
    create_pools: bool = True
    holds: dict[str, Hold] = field(default_factory=dict)
    blocks: dict[tuple[str, str], Block] = field(default_factory=dict)  # (job | ANY_JOB, flavor)

    def configure(self, config: QueueConfig) -> None:
        self.flavors = {n: f.provisioning for n, f in config.flavors.items()
                        if f.provisioning is not None}
        self.create_pools = config.provisioning_policy.create_pools

    def block(self, job: str, flavor: str, until: float, reason: str) -> None:
        self.blocks[(job, flavor)] = Block(until, reason)

    def blocked(self, job: str, flavor: str, now: float | None) -> str:
        """Why ``flavor`` may not be provisioned for ``job`` now ("" when it may)."""
        for key in ((job, flavor), (ANY_JOB, flavor)):
            b = self.blocks.get(key)
            if b is not None and (now is None or now < b.until):
                return b.reason
        return ""

    def expire(self, now: float | None) -> bool:
        """Drop the blocks that ended; whether any did (blocked jobs are judged again)."""
        if now is None or not self.blocks:
            return False
        ended = [k for k, b in self.blocks.items() if now >= b.until]
        for key in ended:
            del self.blocks[key]
        return bool(ended)

    def forget(self, job: str) -> None:
        for key in [k for k in self.blocks if k[0] == job]:
            del self.blocks[key]


def nodes_needed(node: dict[str, int], requests: dict[str, int], count: int,
                 slice_size: int | None) -> int:
    """Nodes of shape ``node`` that ``count`` pods of ``requests`` need, packed; whole slices
    when the flavor names a slice size. 0 when one pod fits no such node."""
    per_node = min((node.get(res, 0) // amount for res, amount in requests.items() if amount),
                   default=count)
    if per_node <= 0:
        return 0
    nodes = -(-count // per_node)
    if slice_size:
        nodes = -(-nodes // slice_size) * slice_size
    return nodes


def reserved_toleration(job: str) -> Toleration:
    return Toleration(key=RESERVED_FOR, operator="Equal", value=job)


def provisioning_reason(message: str) -> PendingReason:
    return PendingReason(PendingCode.PROVISIONING, message)
