"""Provisioning's rules, pure: what pool a held gang asks for, which limits hold it back,
what each kind of failure does, when an ended job's pool is kept or deleted, and which idle
pool a request may take.

The control plane's provisioning controller (``phalanx.control.provisioning``) and the
simulator's autoscaler (``phalanx.sim.autoscale``) both decide by these functions; they keep
what differs between them: the controller its store records, provider calls and events, the
simulator its virtual time and cost meter. Nothing here reads a clock, a store or a plane,
or starts a thread (``now`` is passed in; decisions are returned as data), as
``control/lifecycle.py`` is for restarts; an ``.importlinter`` contract keeps it so.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

from phalanx.provisioning.base import (
    POOL_LABEL,
    RESERVED_FOR,
    ConfigurationError,
    PodSetShape,
    PoolRequest,
    ProvisioningError,
    Stockout,
    TransientError,
    pool_name,
)
from phalanx.scheduler.provisioning import ProvisioningNeed
from phalanx.spec.config import QueueConfig
from phalanx.spec.provisioning import ProvisioningPolicy

# A request over an operator's limit gives its quota back and is looked at again this
# much later.
LIMIT_RETRY = 30.0


@dataclass(slots=True)
class ProvisioningSettings:
    """How long things wait. The operator sets most in the ProvisioningPolicy (defaults:
    Kueue's, the cluster autoscaler's and the TPU provisioner's); the rest are fixed."""

    stockout_block: float = 300.0  # a flavor out of stock is not asked again for this long
    backoff_base: float = 60.0  # a transient error's first retry, doubling...
    backoff_max: float = 1800.0  # ...up to this
    max_tries: int = 3  # transient failures at one flavor before the next is tried
    deletion_check_gap: float = 30.0  # the deletion check passes twice, this far apart
    jitter: float = 0.1  # +/- this fraction of each backoff
    list_grace: float = 60.0  # a created pool may be missing from the provider's list so long
    limit_retry: float = LIMIT_RETRY  # a request over an operator's limit is looked at again
    delete_tries: int = 3  # failed deletions before cleanup "keeps failing"

    @classmethod
    def of(cls, policy: ProvisioningPolicy) -> ProvisioningSettings:
        return cls(stockout_block=policy.stockout_block, backoff_base=policy.retry_backoff,
                   backoff_max=policy.retry_backoff_max, max_tries=policy.retries,
                   deletion_check_gap=policy.deletion_check_delay)


# ---------------------------------------------------------------------- requesting a pool
def pool_request(config: QueueConfig, need: ProvisioningNeed, attempt: int,
                 provider: str | None = None) -> PoolRequest:
    """The pool of ``need``'s ``attempt``-th try: the flavor's node shape, labels and
    taints, plus the job's reservation (label and taint) and the pool's label. ``provider``:
    the one that plays the flavor's (the simulator's), else the flavor's own."""
    flavor = config.flavors[need.flavor]
    spec = flavor.provisioning
    assert spec is not None, f"flavor {need.flavor} has no provisioning"
    name = pool_name(need.job, attempt)
    taints = tuple((t.key, t.value, t.effect) for t in flavor.node_taints)
    return PoolRequest(
        name=name, job=need.job, attempt=attempt, flavor=need.flavor,
        provider=provider or spec.provider, node_count=need.nodes, node=dict(spec.node),
        node_labels={**flavor.node_labels, RESERVED_FOR: need.job, POOL_LABEL: name},
        node_taints=(*taints, (RESERVED_FOR, need.job, "NoSchedule")),
        pod_sets=tuple(PodSetShape(p.name, p.count, dict(p.requests), dict(flavor.node_labels))
                       for p in need.pod_sets),
        slice_size=spec.nodes_per_pool if isinstance(spec.nodes_per_pool, int) else None,
        price_per_node_hour=spec.price_per_node_hour, options=dict(spec.options),
    )


def creation_refusal(policy: ProvisioningPolicy) -> str:
    """Why no pool is created now ("" when pools may be created)."""
    if policy.create_pools:
        return ""
    return "no new node pool is created now (ProvisioningPolicy createPools: false)"


# ---------------------------------------------------------------------- limits
@dataclass(frozen=True, slots=True)
class PoolUsage:
    """What live pools (idle ones included, until deleted) take of a limit."""

    pools: int = 0
    nodes: int = 0
    spend: float = 0.0  # per hour

    @classmethod
    def of(cls, requests: Iterable[tuple[int, float]]) -> PoolUsage:
        """From (node count, cost per hour) of each live pool."""
        pools, nodes, spend = 0, 0, 0.0
        for count, cost in requests:
            pools, nodes, spend = pools + 1, nodes + count, spend + cost
        return cls(pools, nodes, spend)


def over_limit(request: PoolRequest, config: QueueConfig, flavor_usage: PoolUsage,
               all_usage: PoolUsage) -> str:
    """Why ``request`` would exceed an operator's limit (maxPools, maxNodes,
    maxSpendPerHour of its flavor, then of the ProvisioningPolicy), "" when it fits them
    all. ``flavor_usage``: the live pools of its flavor; ``all_usage``: of every flavor."""
    flavor = config.flavors[request.flavor].provisioning
    assert flavor is not None
    policy = config.provisioning_policy
    checks = (
        (f"flavor {request.flavor}", flavor.max_pools, flavor.max_nodes,
         flavor.max_spend_per_hour, flavor_usage),
        ("all flavors (ProvisioningPolicy)", policy.max_pools, policy.max_nodes,
         policy.max_spend_per_hour, all_usage),
    )
    for where, max_pools, max_nodes, max_spend, used in checks:
        if max_pools is not None and used.pools + 1 > max_pools:
            return (f"waits: {used.pools} node pool(s) exist for {where}, whose maxPools is "
                    f"{max_pools}")
        if max_nodes is not None and used.nodes + request.node_count > max_nodes:
            return (f"waits: {request.node_count} more node(s) would take {where} over its "
                    f"maxNodes ({used.nodes} of {max_nodes} in use)")
        if max_spend is not None and used.spend + request.cost_per_hour > max_spend:
            return (f"waits: {request.cost_per_hour:g}/h more would take {where} over its "
                    f"maxSpendPerHour ({used.spend:g} of {max_spend:g} spent per hour)")
    return ""


# ---------------------------------------------------------------------- failures
@dataclass(frozen=True, slots=True)
class FailureDecision:
    """What a job does after its pool failed. Unless ``fail_job``, its held quota is given
    back and ``flavor`` is blocked until ``until`` (for every job when ``every_job``; at
    every flavor for this job when ``every_flavor``: the same place is tried again then)."""

    message: str
    fail_job: bool = False
    until: float = 0.0
    every_job: bool = False
    every_flavor: bool = False


def failure_summary(pool: str, flavor: str, error: ProvisioningError) -> str:
    return f"node pool {pool} ({flavor}) failed: {error.kind}: {error.message}"


def failure_decision(error: ProvisioningError, summary: str, now: float,
                     settings: ProvisioningSettings, *, transient_tries: int = 0,
                     rng: random.Random | None = None) -> FailureDecision:
    """A stockout blocks the flavor for every job (the next flavor is tried); a
    configuration error fails the job, never retried; a transient error tries the same
    place again after a backoff (doubling, with jitter drawn from ``rng``) until
    ``max_tries`` failures at that flavor (``transient_tries``, this one included), then the
    next flavor; a timeout, or an unclassified error, blocks the flavor for the job."""
    s = settings
    if isinstance(error, ConfigurationError):
        return FailureDecision(f"{summary}; the provider refused the request, which is not "
                               "retried", fail_job=True)
    if isinstance(error, Stockout):
        return FailureDecision(summary, until=now + s.stockout_block, every_job=True)
    if isinstance(error, TransientError):
        tries = transient_tries
        if tries >= s.max_tries:
            return FailureDecision(f"{summary} ({tries} tries; trying the next flavor)",
                                   until=now + s.stockout_block)
        delay = min(s.backoff_base * 2 ** (tries - 1), s.backoff_max)
        if rng is not None:
            delay *= 1 + rng.uniform(-s.jitter, s.jitter)
        return FailureDecision(f"{summary}; retrying in {delay:.0f}s (try {tries + 1} of "
                               f"{s.max_tries})", until=now + delay, every_flavor=True)
    return FailureDecision(summary, until=now + s.stockout_block)


def timed_out(created_at: float, now: float, timeout: float, ready: bool) -> bool:
    """Whether a pool not Ready yet has waited past its flavor's ``timeout``."""
    return not ready and now - created_at > timeout


# ---------------------------------------------------------------------- an ended job's pool
class OwnerGone(StrEnum):
    """What a pool does at a check that finds its job ended."""

    FIRST_CHECK = "first-check"  # the check passes once: note when
    WAIT = "wait"  # until it passes again, ``deletion_check_gap`` later (a restarting gang)
    KEEP_IDLE = "keep-idle"  # passed twice: kept for the flavor's idle TTL
    DELETE = "delete"  # passed twice, and nothing keeps it


def keeps_idle(ready: bool, idle_ttl: float) -> bool:
    """A Ready pool of a flavor with an idle TTL waits that long for a job of its shape."""
    return ready and idle_ttl > 0


def owner_gone(released_at: float | None, now: float, settings: ProvisioningSettings, *,
               ready: bool, idle_ttl: float) -> OwnerGone:
    """The deletion check, passed twice ``deletion_check_gap`` apart (``released_at``: when
    it first passed, None when it has not)."""
    if released_at is None:
        return OwnerGone.FIRST_CHECK
    if now - released_at < settings.deletion_check_gap:
        return OwnerGone.WAIT
    return OwnerGone.KEEP_IDLE if keeps_idle(ready, idle_ttl) else OwnerGone.DELETE


def idle_expired(idle_since: float | None, now: float, idle_ttl: float) -> bool:
    """Whether an idle pool's TTL (from when it became idle) has passed."""
    return idle_since is None or now - idle_since >= idle_ttl


@dataclass(frozen=True, slots=True)
class Retention:
    """When an ended job's pool is idle and deleted, its checks made on time."""

    idle_from: float  # the deletion check passed twice: another job may take it from then...
    idle_until: float  # ...until then (no later than ``idle_from`` when it is not kept)
    delete_at: float


def retention(ended_at: float, settings: ProvisioningSettings, *, ready: bool,
              idle_ttl: float) -> Retention:
    """``owner_gone`` and ``idle_expired`` played out when each check comes exactly when
    it is due (the simulator's schedule of a pool whose job ended at ``ended_at``)."""
    idle_from = ended_at + settings.deletion_check_gap
    if keeps_idle(ready, idle_ttl):
        return Retention(idle_from, idle_from + idle_ttl, idle_from + idle_ttl)
    return Retention(idle_from, ended_at, idle_from)


# ---------------------------------------------------------------------- reusing an idle pool
@dataclass(frozen=True, slots=True)
class IdlePool:
    name: str
    provider: str
    config_hash: str


def reuse_order(provider: str, config_hash: str, idle: Iterable[IdlePool]) -> list[str]:
    """The idle pools a request of ``provider`` and ``config_hash`` may take over, in the
    order to try them: those of the same provider and configuration hash, by name."""
    return sorted(p.name for p in idle if p.provider == provider and p.config_hash == config_hash)
