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
# The local provider's options: delay (until the nodes are Ready), stockout (injected:
# true, a count of pools, or attempt numbers), error (transient | configuration, injected
# at the attempts errorAttempts lists, every attempt without it), failDeletion (every
# deletion fails: a cleanup that keeps failing).

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import (
    BeforeValidator,
    Field,
    StrictBool,
    StrictInt,
    WithJsonSchema,
    field_validator,
    model_validator,
)

from phalanx.errors import SpecError
from phalanx.spec.base import Duration, Model, Name, Quantity, StrictNumber
from phalanx.spec.quantity import parse_duration

# The label and taint that reserve a pool's nodes for the job they were bought for; only that
# job's pods tolerate the taint, across its restarts.
RESERVED_FOR = "phalanx.dev/reserved-for"
# The label every pool node carries with its pool's name.
POOL_LABEL = "phalanx.dev/pool"
PROVIDERS = ("local", "kubernetes-provisioningrequest", "simulated")
Provider = Literal["local", "kubernetes-provisioningrequest", "simulated"]
DEFAULT_TIMEOUT = 15 * 60.0  # the cluster autoscaler's VM start timeout
# The most nodes one pool may have (and maxNodes may name): far above any slice.
MAX_POOL_NODES = 10_000


def _check_delay(value: object) -> None:
    try:
        parse_duration(value)
    except SpecError as exc:
        raise ValueError(f"options.delay: {exc.message}; {exc.fix}") from None


def _check_stockout(value: object) -> None:
    ok = isinstance(value, bool) or (
        isinstance(value, int) and value >= 0
    ) or (isinstance(value, list) and all(isinstance(v, int) and v >= 1 for v in value))
    if not ok:
        raise ValueError(
            f"options.stockout is {value!r}; write true (always out of stock), a count N "
            "(the first N pools are out of stock) or a list of attempt numbers such as [1, 3]"
        )


def _check_rate(value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
        raise ValueError(f"options.stockoutRate is {value!r}; write the chance that a request "
                         "finds no capacity, from 0 to 1, e.g. 0.05")


def _check_error(value: object) -> None:
    if value not in ("transient", "configuration"):
        raise ValueError(f"options.error is {value!r}; write transient (retried with backoff) "
                         "or configuration (fails the job at once)")


def _check_attempts(value: object) -> None:
    if not (isinstance(value, list) and all(isinstance(v, int) and v >= 1 for v in value)):
        raise ValueError(f"options.errorAttempts is {value!r}; write a list of attempt "
                         "numbers such as [1, 2]")


def _check_bool(key: str) -> Any:
    def check(value: object) -> None:
        if not isinstance(value, bool):
            raise ValueError(f"options.{key} is {value!r}; write true or false")
    return check


def _check_string(key: str) -> Any:
    def check(value: object) -> None:
        if not isinstance(value, str) or not value:
            raise ValueError(f"options.{key} is {value!r}; write a non-empty string")
    return check


def _check_mapping(key: str) -> Any:
    def check(value: object) -> None:
        if not isinstance(value, dict) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
            raise ValueError(f"options.{key} is {value!r}; write a mapping of strings to "
                             "strings")
    return check


_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def _check_class_name(value: object) -> None:
    """A ProvisioningRequest's class: a free string the API takes as a DNS subdomain."""
    if not isinstance(value, str) or len(value) > 253 or not _DNS_SUBDOMAIN.match(value):
        raise ValueError(
            f"options.className is {value!r}; write a provisioning class such as "
            "best-effort-atomic-scale-up.autoscaling.x-k8s.io, "
            "check-capacity.autoscaling.x-k8s.io or queued-provisioning.gke.io "
            "(lowercase letters, digits, '-' and '.')")


# A ProvisioningRequest's spec.parameters: at most this many, each at most this long.
MAX_REQUEST_PARAMETERS, MAX_REQUEST_PARAMETER_LENGTH = 100, 255


def _check_parameters(value: object) -> None:
    _check_mapping("parameters")(value)
    assert isinstance(value, dict)
    if len(value) > MAX_REQUEST_PARAMETERS:
        raise ValueError(f"options.parameters has {len(value)} entries; a "
                         f"ProvisioningRequest takes at most {MAX_REQUEST_PARAMETERS}")
    for key, text in value.items():
        if len(text) > MAX_REQUEST_PARAMETER_LENGTH:
            raise ValueError(f"options.parameters.{key} is {len(text)} characters long; "
                             f"a ProvisioningRequest takes at most "
                             f"{MAX_REQUEST_PARAMETER_LENGTH}")


# Each provider's options and how each is checked. A provider adds its keys here, so that
# `phalanx apply` refuses a misspelt option instead of ignoring it.
PROVIDER_OPTIONS: dict[str, dict[str, Any]] = {
    "local": {"delay": _check_delay, "stockout": _check_stockout, "error": _check_error,
              "errorAttempts": _check_attempts, "failDeletion": _check_bool("failDeletion")},
    "simulated": {"delay": _check_delay, "stockout": _check_stockout,
                  "stockoutRate": _check_rate},
    "kubernetes-provisioningrequest": {
        "className": _check_class_name,
        "parameters": _check_parameters,
    },
}
# The most pod sets one pool's request may carry, where the provider has a limit (a
# ProvisioningRequest's spec.podSets takes at most 32).
MAX_POD_SETS: dict[str, int] = {"kubernetes-provisioningrequest": 32}


def check_pod_sets(count: int, flavors: dict[str, FlavorProvisioning]) -> None:
    """Refuse a gang of ``count`` pod sets that a flavor it may run on could not provision
    (``flavors``: the provisioning of the flavors its ClusterQueue offers, by name)."""
    for name, provisioning in sorted(flavors.items()):
        limit = MAX_POD_SETS.get(provisioning.provider)
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


NodesPerPool = Annotated[
    int | Literal["auto"],
    BeforeValidator(_nodes_per_pool),
    WithJsonSchema({"anyOf": [{"type": "string", "enum": ["auto"]},
                              {"type": "integer", "minimum": 1, "maximum": MAX_POOL_NODES}],
                    "description": "auto, or the nodes of one slice"}),
]


class FlavorProvisioning(Model):
    """How a flavor's node pools are bought, how big, at what price, and within what limits."""

    provider: Provider = Field(description="Who creates the pools: local (virtual nodes of "
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
        known = PROVIDER_OPTIONS[self.provider]
        for key, value in self.options.items():
            check = known.get(key)
            if check is None:
                names = ", ".join(sorted(known)) or "none"
                raise ValueError(f"options.{key} is no option of provider {self.provider}; "
                                 f"use {names}")
            check(value)
        slice_size = self.nodes_per_pool
        if (self.max_nodes is not None and isinstance(slice_size, int)
                and self.max_nodes < slice_size):
            raise ValueError(f"maxNodes ({self.max_nodes}) is below nodesPerPool "
                             f"({slice_size}), so no pool could ever be made; raise maxNodes "
                             "or lower nodesPerPool")
        if (self.max_spend_per_hour is not None and self.price_per_node_hour
                and self.max_spend_per_hour < self.price_per_node_hour):
            raise ValueError(f"maxSpendPerHour ({self.max_spend_per_hour:g}) is below "
                             f"pricePerNodeHour ({self.price_per_node_hour:g}), so no node "
                             "could ever be bought; raise maxSpendPerHour")
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
