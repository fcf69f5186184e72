"""Node pools bought for pending gangs: a ResourceFlavor's ``provisioning`` and the operator's
limits (kind ``ProvisioningPolicy``).

A flavor with ``provisioning`` names a provider that creates whole node pools, one per gang
that fits its queue's quota but no existing node of the flavor (see docs/provisioning.md):

    provisioning:
      provider: local          # local | kubernetes-provisioningrequest | simulated
      nodesPerPool: auto       # auto: as many nodes as the gang needs; or a slice size
      node: {cpu: "2", memory: 4Gi, nvidia.com/gpu: 0}
      maxNodes: 8
      pricePerNodeHour: 1.2
      idleTTL: 0s
      timeout: 15m
      options: {delay: 3s}     # provider-specific
"""
# Each provider declares its options and limits once (``spec/providers/``).

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BeforeValidator,
    Field,
    StrictBool,
    StrictInt,
    WithJsonSchema,
    field_validator,
    model_validator,
)

from phalanx.errors import SpecError
from phalanx.spec.base import Duration, Model, Name, Quantity, StrictNumber, field_error
from phalanx.spec.providers import BUILTIN, ProviderInfo, provider_info, providers
from phalanx.spec.quantity import parse_duration

# The label and taint that reserve a pool's nodes for the job they were bought for; only that
# job's pods tolerate the taint, across its restarts.
RESERVED_FOR = "phalanx.dev/reserved-for"
# The label every pool node carries with its pool's name.
POOL_LABEL = "phalanx.dev/pool"
DEFAULT_TIMEOUT = 15 * 60.0  # the cluster autoscaler's VM start timeout
# The most nodes one pool may have (and maxNodes may name): far above any slice.
MAX_POOL_NODES = 10_000


def check_pod_sets(count: int, flavors: dict[str, FlavorProvisioning]) -> None:
    """Refuse a gang of ``count`` pod sets that a flavor it may run on could not provision
    (``flavors``: the provisioning of the flavors its ClusterQueue offers, by name)."""
    for name, provisioning in sorted(flavors.items()):
        limit = _info(provisioning.provider).max_pod_sets
        if limit is not None and count > limit:
            raise SpecError(
                f"the job has {count} pod sets, and flavor {name}'s pools are asked for "
                f"through {provisioning.provider}, whose requests carry at most {limit}",
                field="podSets", fix=f"merge pod sets that ask for the same resources (at "
                f"most {limit}), or submit to a queue whose flavors are not provisioned "
                f"through {provisioning.provider}")


def _nodes_per_pool(value: object) -> object:
    if value == "auto" or value is None:
        return "auto"
    if isinstance(value, str) and value.isdigit():
        value = int(value)
    if isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= MAX_POOL_NODES:
        return value
    raise ValueError(f"{value!r} is no slice size; write auto (as many nodes as the gang "
                     f"needs) or a whole number of nodes from 1 to {MAX_POOL_NODES}")


def _info(name: str) -> ProviderInfo:
    info = provider_info(name)
    assert info is not None, name  # FlavorProvisioning takes only declared providers
    return info


def _known_provider(value: str) -> str:
    if provider_info(value) is None:
        names = ", ".join(p.name for p in providers())
        raise ValueError(f"{value!r} is no provider; use {names}")
    return value


# A provider's name, of those declared (``spec/providers/``); the schema lists the built-in.
ProviderName = Annotated[
    str, AfterValidator(_known_provider),
    WithJsonSchema({"type": "string", "enum": [p.name for p in BUILTIN]}),
]

NodesPerPool = Annotated[
    int | Literal["auto"],
    BeforeValidator(_nodes_per_pool),
    WithJsonSchema({"anyOf": [{"type": "string", "enum": ["auto"]},
                              {"type": "integer", "minimum": 1, "maximum": MAX_POOL_NODES}],
                    "description": "auto, or the nodes of one slice"}),
]


class FlavorProvisioning(Model):
    """How a flavor's node pools are bought, how big, at what price, and within what limits."""

    provider: ProviderName = Field(description="Who creates the pools: local (virtual nodes of "
                               "the local plane), kubernetes-provisioningrequest, simulated")
    nodes_per_pool: NodesPerPool = Field(
        default="auto", description="auto: as many nodes as the gang needs; a number: the "
        "nodes of one slice, and the pool holds whole slices (one per pod set that asks)")
    node: dict[str, Quantity] = Field(
        description="What one node of the pool holds (its allocatable), e.g. "
                    "{cpu: \"8\", memory: 32Gi, nvidia.com/gpu: 4}")
    max_pools: StrictInt | None = Field(default=None, ge=1, description="Pools of this flavor that "
                                  "may exist at once")
    max_nodes: StrictInt | None = Field(default=None, ge=1, le=MAX_POOL_NODES,
                                        description="Nodes of this flavor's pools at once")
    max_spend_per_hour: StrictNumber | None = Field(
        default=None, ge=0, allow_inf_nan=False,
        description="The most this flavor's pools may cost per hour, together")
    price_per_node_hour: StrictNumber = Field(default=0.0, ge=0, allow_inf_nan=False)
    idle_ttl: Duration = Field(
        default=0.0, alias="idleTTL", description="How long a pool whose job ended waits for "
        "the next job of the same shape before it is deleted")
    timeout: Duration = Field(default=DEFAULT_TIMEOUT, description="How long a pool may take "
                              "to have every node Ready before the attempt counts as failed")
    options: dict[str, Any] = Field(default_factory=dict,
                                    description="Provider-specific (local: delay, stockout)")

    @field_validator("node")
    @classmethod
    def _node_holds_something(cls, value: dict[str, int]) -> dict[str, int]:
        if not any(v > 0 for v in value.values()):
            raise ValueError("a node of the pool holds nothing; give node at least one "
                             "resource above zero, e.g. {cpu: \"2\", memory: 4Gi}")
        if "pods" in value:
            raise ValueError("'pods' is counted by Phalanx; remove it from node")
        return value

    @field_validator("timeout")
    @classmethod
    def _timeout_positive(cls, value: float) -> float:
        if value <= 0:
            raise ValueError("timeout is zero; give the pool time to come up, e.g. 15m")
        return value

    @model_validator(mode="after")
    def _options_known(self) -> FlavorProvisioning:
        known = _info(self.provider).options
        for key, value in self.options.items():
            check = known.get(key)
            if check is None:
                names = ", ".join(sorted(known)) or "none"
                raise field_error(f"options.{key} is no option of provider "
                                  f"{self.provider}; use {names}", "options", key)
            try:
                check(value)
            except ValueError as exc:
                raise field_error(str(exc), "options", key) from None
        slice_size = self.nodes_per_pool
        if (self.max_nodes is not None and isinstance(slice_size, int)
                and self.max_nodes < slice_size):
            raise field_error(f"maxNodes ({self.max_nodes}) is below nodesPerPool "
                              f"({slice_size}), so no pool could ever be made; raise maxNodes "
                              "or lower nodesPerPool", "maxNodes")
        if (self.max_spend_per_hour is not None and self.price_per_node_hour
                and self.max_spend_per_hour < self.price_per_node_hour):
            raise field_error(f"maxSpendPerHour ({self.max_spend_per_hour:g}) is below "
                              f"pricePerNodeHour ({self.price_per_node_hour:g}), so no node "
                              "could ever be bought; raise maxSpendPerHour", "maxSpendPerHour")
        return self

    def option_delay(self, default: float = 0.0) -> float:
        value = self.options.get("delay")
        return default if value is None else parse_duration(value)


class ProvisioningPolicy(Model):
    """The operator's limits over every flavor's pools together, and the switch that stops
    new pools (cleanup goes on). One per control plane: the one named ``default`` counts."""

    kind: Literal["ProvisioningPolicy"] = "ProvisioningPolicy"
    name: Name = "default"
    create_pools: StrictBool = Field(
        default=True, description="false: create no new pool (jobs wait, saying so); pools "
        "that exist are still cleaned up")
    max_pools: StrictInt | None = Field(default=None, ge=0,
                                        description="Pools at once, all flavors")
    max_nodes: StrictInt | None = Field(default=None, ge=0, description="Pool nodes at "
                                        "once, all flavors")
    max_spend_per_hour: StrictNumber | None = Field(
        default=None, ge=0, allow_inf_nan=False,
        description="The most all pools may cost per hour, together")
    stockout_block: Duration = Field(
        default=300.0, description="How long a flavor that was out of stock is not asked again")
    retries: StrictInt = Field(default=3, ge=1, le=100, description="Transient failures at one "
                         "flavor before the next is tried (Kueue's default: 3)")
    retry_backoff: Duration = Field(default=60.0, description="The wait before the first "
                                    "retry after a transient failure; it doubles each time")
    retry_backoff_max: Duration = Field(default=1800.0, description="The longest wait before "
                                        "a retry")
    deletion_check_delay: Duration = Field(
        default=30.0, description="A pool whose job ended is deleted when it is still unused "
        "this long after (two checks, so a restarting gang keeps its pool)")

    @field_validator("name")
    @classmethod
    def _default_only(cls, value: str) -> str:
        if value != "default":
            raise ValueError(f"a ProvisioningPolicy is named {value!r}; name it default "
                             "(one policy covers the whole control plane)")
        return value
