"""The provider interface: what buys and gives back node pools, and the errors it raises.

A provider knows pools by name only. The control plane's provisioning controller
(``phalanx.control.provisioning``) records its intent in the store, then calls ``create``
with a deterministic name; a second ``create`` of the same name (a restarted control plane)
returns the pool that exists instead of making another. ``list`` answers from the provider
itself, never from the nodes, so that a failed pool with no nodes is still found and deleted.

Errors are classified, as SkyPilot's failover and Kueue's admission checks treat them:
``Stockout`` (no capacity or quota there: try the next flavor), ``ConfigurationError``
(refused for good: fail the job with the provider's message), ``TransientError`` (retry the
same place with backoff), ``ProvisioningTimeout`` (the pool did not become Ready in time).
A provider raises them from ``create``, or reports them later in ``PoolStatus.error``.
"""

from __future__ import annotations

import builtins
import hashlib
import json
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from phalanx.spec.provisioning import POOL_LABEL as POOL_LABEL
from phalanx.spec.provisioning import RESERVED_FOR as RESERVED_FOR


class ProvisioningError(Exception):
    """A provider could not create a pool; the subclass says what to do about it."""

    kind = "Error"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class Stockout(ProvisioningError):
    """Out of capacity or quota where the pool was asked for: block that flavor for a while
    and fail over to the next one."""

    kind = "Stockout"


class ConfigurationError(ProvisioningError):
    """The request is refused for good (bad machine type, no permission): never retried."""

    kind = "ConfigurationError"


class TransientError(ProvisioningError):
    """A failure worth retrying at the same place, with backoff."""

    kind = "TransientError"


class ProvisioningTimeout(ProvisioningError):
    """The pool's nodes were not all Ready within the flavor's ``timeout``."""

    kind = "Timeout"


ERROR_KINDS: dict[str, type[ProvisioningError]] = {
    cls.kind: cls for cls in (ProvisioningError, Stockout, ConfigurationError, TransientError,
                              ProvisioningTimeout)
}


class PoolState(StrEnum):
    CREATING = "Creating"  # asked for; not every node Ready yet
    READY = "Ready"  # every node Ready: the gang can be placed
    FAILED = "Failed"  # will not become Ready (see PoolStatus.error); delete it
    DELETING = "Deleting"  # deletion started, not confirmed yet
    # Its plane's worker is not connected: neither Ready nor gone, until it reports again.
    UNKNOWN = "Unknown"


@dataclass(frozen=True, slots=True)
class PodSetShape:
    """One pod set of the gang the pool is for: what each pod asks and how many there are
    (a ProvisioningRequest carries them as PodTemplates)."""

    name: str
    count: int
    requests: dict[str, int]  # milli-units
    node_selector: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class PoolRequest:
    """One pool for one attempt of one job. ``name`` is ``<job>-<attempt>``, so a restarted
    control plane asks for the same pool again instead of another."""

    name: str
    job: str
    attempt: int
    flavor: str
    provider: str
    node_count: int
    node: dict[str, int]  # one node's allocatable, milli-units
    node_labels: dict[str, str]  # the flavor's, plus RESERVED_FOR and POOL_LABEL
    node_taints: tuple[tuple[str, str, str], ...]  # (key, value, effect): flavor's + reserved
    pod_sets: tuple[PodSetShape, ...]
    slice_size: int | None = None  # nodes per slice when the flavor names one
    price_per_node_hour: float = 0.0
    options: dict[str, object] = field(default_factory=dict)

    @property
    def config_hash(self) -> str:
        """A hash of what the pool is made of (not of whom it is for): a stored pool whose
        hash differs from a new request's was made for another configuration."""
        shape = {
            "flavor": self.flavor, "provider": self.provider, "nodes": self.node_count,
            "node": sorted(self.node.items()), "slice": self.slice_size,
            "labels": sorted((k, v) for k, v in self.node_labels.items() if k != RESERVED_FOR
                             and k != POOL_LABEL),
            "taints": sorted(t for t in self.node_taints if t[0] != RESERVED_FOR),
            "options": sorted((k, json.dumps(v, sort_keys=True))
                              for k, v in self.options.items() if k != "stockout"),
        }
        text = json.dumps(shape, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    @property
    def cost_per_hour(self) -> float:
        return self.node_count * self.price_per_node_hour

    def to_dict(self) -> dict[str, Any]:
        """The request as JSON (the store and the local provider keep it so)."""
        return {
            "name": self.name, "job": self.job, "attempt": self.attempt,
            "flavor": self.flavor, "provider": self.provider,
            "nodeCount": self.node_count, "node": self.node,
            "nodeLabels": self.node_labels, "nodeTaints": [list(t) for t in self.node_taints],
            "podSets": [{"name": p.name, "count": p.count, "requests": p.requests,
                         "nodeSelector": p.node_selector} for p in self.pod_sets],
            "sliceSize": self.slice_size, "pricePerNodeHour": self.price_per_node_hour,
            "options": self.options,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PoolRequest:
        return cls(
            name=data["name"], job=data["job"], attempt=int(data["attempt"]),
            flavor=data["flavor"], provider=data["provider"],
            node_count=int(data["nodeCount"]), node={k: int(v) for k, v in data["node"].items()},
            node_labels=dict(data["nodeLabels"]),
            node_taints=tuple((str(k), str(v), str(e)) for k, v, e in data["nodeTaints"]),
            pod_sets=tuple(PodSetShape(p["name"], int(p["count"]),
                                       {k: int(v) for k, v in p["requests"].items()},
                                       dict(p.get("nodeSelector", {})))
                           for p in data["podSets"]),
            slice_size=data.get("sliceSize"),
            price_per_node_hour=float(data["pricePerNodeHour"]),
            options=dict(data.get("options", {})),
        )


def pool_name(job: str, attempt: int) -> str:
    """The pool of a job's ``attempt``-th provisioning attempt (1-based)."""
    return f"{job}-{attempt}"


@dataclass(frozen=True, slots=True)
class PoolStatus:
    """A pool as its provider sees it."""

    name: str
    state: PoolState
    nodes: tuple[str, ...] = ()  # the node names the pool has (Ready or not)
    ready_nodes: int = 0
    node_count: int = 0  # the nodes it was asked for
    config_hash: str = ""
    message: str = ""
    error: ProvisioningError | None = None  # set when state is FAILED

    @property
    def ready(self) -> bool:
        return self.state is PoolState.READY


class Provider(ABC):
    """A way to buy and give back node pools. Every method may be called from any thread of
    the control plane (never under its state lock), and must be idempotent."""

    name: str = ""

    @abstractmethod
    def create(self, request: PoolRequest) -> PoolStatus:
        """Start making the pool ``request.name``; when it exists already, its status (no
        second pool). Raises a ``ProvisioningError`` subclass when refused at once."""

    @abstractmethod
    def status(self, name: str) -> PoolStatus | None:
        """The pool's state and nodes, or None when the provider has no such pool."""

    @abstractmethod
    def list(self) -> builtins.list[PoolStatus]:
        """Every pool this provider made for Phalanx (GC reads this, not the nodes)."""

    @abstractmethod
    def delete(self, name: str) -> None:
        """Start deleting the pool and its nodes; nothing when it does not exist. Deletion
        is confirmed by ``status`` answering None."""

    def reassign(self, name: str, job: str) -> bool:
        """Reserve an idle pool's nodes for ``job`` instead (label and taint
        ``phalanx.dev/reserved-for``), for a flavor's ``idleTTL``; False when the provider
        cannot, and the pool is then left to be deleted."""
        return False

    def close(self) -> None:  # noqa: B027 - most providers run no thread
        """Stop any thread the provider runs."""
