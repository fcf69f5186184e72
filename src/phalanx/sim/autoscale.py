"""Autoscaling in the replay: the provisioning controller's rules, played in virtual time.

The scheduler core decides, as it does in the control plane: a gang that fits its queue's
quota on a flavor with ``provisioning`` but no node of it takes a hold and is reported in
``CycleResult.provisioning``. This module then does what the control plane's controller
does with the ``simulated`` provider (``phalanx.sim.provider``), deciding by the same rules
(``phalanx.provisioning.rules``); it keeps virtual time and the cost meter:

* one pool per gang, named ``<job>-<attempt>``, sized by the scheduler's need; its nodes
  carry the flavor's labels and taints plus ``phalanx.dev/reserved-for=<job>`` (label and
  taint) and ``phalanx.dev/pool``; they are paid from creation, booting included;
* when the pool is Ready (after ``options.delay``) its nodes join the scheduler's inventory
  and ``Scheduler.provisioning_ready`` lets the next cycle place the gang on them;
* a stockout gives the quota back and blocks the flavor for every job for the
  ProvisioningPolicy's ``stockoutBlock``, so the next flavor in the queue's order is tried;
  the replay wakes when the block ends, unless the flavor is always out of stock
  (``stockout: true`` or ``stockoutRate: 1``: then only another event tries again, and a
  job nothing else can run stays unfinished instead of retrying for ever);
* a pool's boot time is ``options.delay``, known in advance, so a flavor whose delay is
  not below its ``timeout`` (every attempt would time out) is refused before the replay;
* a request over an operator's limit (maxPools, maxNodes, maxSpendPerHour of the flavor
  or of the ProvisioningPolicy) gives its quota back and asks again ``LIMIT_RETRY``
  seconds later, as the controller does;
* when the owner ends (succeeds or fails) its pool is deleted once the deletion check has
  passed twice, ``deletionCheckDelay`` apart, and then after its idle TTL if it has one;
  during the TTL a job whose pool would have the same configuration hash takes it over
  (relabelled and retainted for it) instead of buying another. A preempted owner keeps its
  pool: it is reserved across the gang's restarts, and the gang returns to it.

Pools are counted against the limits until they are deleted, idle ones included.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field
from typing import Any

from phalanx.errors import SpecError
from phalanx.provisioning.base import PoolRequest, Stockout
from phalanx.provisioning.rules import (
    LIMIT_RETRY,
    IdlePool,
    PoolUsage,
    ProvisioningSettings,
    failure_decision,
    failure_summary,
    over_limit,
    pool_request,
    retention,
    reuse_order,
)
from phalanx.scheduler import Scheduler
from phalanx.scheduler.provisioning import ProvisioningNeed
from phalanx.sim.meter import NodeMeter
from phalanx.sim.provider import SimulatedProvider, always_out_of_stock, pool_delay
from phalanx.spec import GPU, Node, QueueConfig
from phalanx.spec.provisioning import RESERVED_FOR, FlavorProvisioning
from phalanx.spec.resources import ResourceFlavor, Taint

__all__ = [
    "LIMIT_RETRY",
    "AutoscaleStats",
    "Autoscaler",
    "FixedCluster",
    "check_timeouts",
    "fixed_equivalent",
    "node_price",
    "pool_gpus",
]
_READY, _IDLE, _DELETE, _WAKE = 0, 1, 2, 3


@dataclass(slots=True)
class _Pool:
    request: PoolRequest
    owner: str  # the job the nodes are reserved for
    nodes: list[Node]
    ready: bool = False
    busy: bool = True  # its owner lives (idle: kept by the idle TTL for a job of its shape)
    generation: int = 0  # bumped when it changes hands, so an older deletion is ignored
    created: float = 0.0
    idle_from: float = 0.0  # another job of its shape may take it over from then...
    idle_until: float = 0.0  # ...until then (the idle TTL)


@dataclass(slots=True)
class AutoscaleStats:
    pools_created: int = 0
    pools_reused: int = 0  # taken over by another job of the same shape, or its owner again
    stockouts: int = 0
    pool_nodes_created: int = 0
    pool_nodes_reused: int = 0
    waited_for_limits: int = 0
    peak_pools: int = 0
    peak_pool_nodes: int = 0
    provisioning_waits: list[float] = field(default_factory=list)  # hold -> Ready, seconds

    def to_dict(self) -> dict[str, Any]:
        waits = self.provisioning_waits
        return {
            "pools_created": self.pools_created, "pools_reused": self.pools_reused,
            "stockouts": self.stockouts, "pool_nodes_created": self.pool_nodes_created,
            "pool_nodes_reused": self.pool_nodes_reused,
            "waited_for_limits": self.waited_for_limits, "peak_pools": self.peak_pools,
            "peak_pool_nodes": self.peak_pool_nodes,
            "provisioning_wait_mean": sum(waits) / len(waits) if waits else 0.0,
        }


class Autoscaler:
    """The pools of one replay, driven by the simulator between cycles."""

    def __init__(self, config: QueueConfig, scheduler: Scheduler, meter: NodeMeter,
                 seed: int = 0) -> None:
        self.config = config
        self.flavors: dict[str, ResourceFlavor] = config.provisionable_flavors()
        check_timeouts(config)
        self.settings = ProvisioningSettings.of(config.provisioning_policy)
        self.scheduler = scheduler
        self.meter = meter
        self.provider = SimulatedProvider(seed)
        self.pools: dict[str, _Pool] = {}
        self.totals: dict[str, PoolUsage] = {}  # flavor ("": all) -> its live pools
        self.owned: dict[str, str] = {}  # job -> its pool
        self.attempts: dict[str, int] = {}  # job -> provisioning attempts so far
        self.held_since: dict[str, float] = {}
        self.limited: set[str] = set()  # jobs that waited for an operator's limit
        # Jobs turned away by a limit, and when: they ask again every LIMIT_RETRY seconds
        # from then, which can only succeed once a pool has gone (see ``_wake_retrying``).
        self.retrying: dict[str, float] = {}
        self.phases: dict[float, int] = {}  # (turned away at) % LIMIT_RETRY -> jobs
        self.wake_times: set[float] = set()
        self.idle: set[str] = set()  # pools whose owner ended, kept until deleted
        self._hashes: dict[str, str] = {}  # pool name -> its configuration hash
        self.events: list[tuple[float, int, int, str, int]] = []  # (at, kind, seq, pool, gen)
        self.seq = 0
        self.gpus = 0  # GPUs on pool nodes (booting included)
        self.stats = AutoscaleStats()
        self._templates: dict[str, Node] = {}

    # ------------------------------------------------------------------ the engine's calls
    def next_at(self) -> float | None:
        return self.events[0][0] if self.events else None

    def _push(self, at: float, kind: int, pool: str, generation: int) -> None:
        if kind == _WAKE:
            if at in self.wake_times:
                return
            self.wake_times.add(at)
        self.seq += 1
        heapq.heappush(self.events, (at, kind, self.seq, pool, generation))

    def busy(self) -> bool:
        """Whether a pool event (or the end of a block) is to come."""
        return bool(self.events)

    def advance(self, now: float) -> bool:
        """Apply the pool events due at ``now``; whether the scheduler should run a cycle."""
        self.provider.now = now
        changed = False
        while self.events and self.events[0][0] <= now:
            at, kind, _, name, generation = heapq.heappop(self.events)
            pool = self.pools.get(name)
            if kind == _WAKE:
                self.wake_times.discard(at)
                changed = True
            elif pool is None or pool.generation != generation:
                continue  # deleted or changed hands since
            elif kind == _READY:
                self._ready(pool, now)
                changed = True
            elif kind == _IDLE and not pool.busy:
                self._wake_retrying(now)  # a job of its shape may take it over
            elif kind == _DELETE and not pool.busy:
                self._delete(pool, now)
                self._wake_retrying(now)
                changed = True
        return changed

    def needs(self, needs: list[ProvisioningNeed], now: float) -> bool:
        """The cycle's new holds; whether another cycle should run at once (a pool taken over
        is Ready now, or a stockout freed quota for the next flavor)."""
        self.provider.now = now
        again = False
        for need in needs:
            self.held_since.setdefault(need.job, now)
            again = self._serve(need, now) or again
        return again

    def placed(self, job: str) -> None:
        """``job`` was admitted; its pool (if it was placed on one) is in use."""
        self.held_since.pop(job, None)

    def ended(self, job: str, now: float) -> None:
        """``job`` succeeded or failed for good: its pool goes once the deletion check has
        passed twice, and after its idle TTL when it has one."""
        self.held_since.pop(job, None)
        self._stop_retrying(job)
        name = self.owned.pop(job, None)
        pool = self.pools.get(name) if name is not None else None
        if pool is None:
            return
        pool.busy = False
        self.idle.add(pool.request.name)
        pool.generation += 1
        # Idle (kept for a job of its shape) once the check passed, until the TTL ends.
        kept = retention(now, self.settings, ready=pool.ready,
                         idle_ttl=self._spec(pool.request.flavor).idle_ttl)
        pool.idle_from, pool.idle_until = kept.idle_from, kept.idle_until
        if pool.idle_until > pool.idle_from:
            self._push(pool.idle_from, _IDLE, pool.request.name, pool.generation)
        self._push(kept.delete_at, _DELETE, pool.request.name, pool.generation)

    def close(self, now: float) -> None:
        for pool in list(self.pools.values()):
            self._delete(pool, now)

    # ------------------------------------------------------------------ serving a need
    def _serve(self, need: ProvisioningNeed, now: float) -> bool:
        request = self._request(need)
        pool = self._reusable(request, now)
        if pool is not None:
            self._stop_retrying(need.job)
            self.stats.pools_reused += 1
            self.stats.pool_nodes_reused += pool.request.node_count
            self._hand_over(pool, need.job, now)
            return True
        over = self._over_limit(request)
        if over:
            # As the controller does: the quota goes back, and the job asks again later.
            self.limited.add(need.job)
            self.stats.waited_for_limits = len(self.limited)
            # Its tries stay on the grid of its first: every LIMIT_RETRY seconds from then.
            since = self.retrying.get(need.job, now)
            until = since + LIMIT_RETRY * (math.floor((now - since) / LIMIT_RETRY) + 1)
            self._release(need.job, request.flavor, now, until=until, reason=over,
                          every_job=False, failed=False, retry=False)
            if need.job not in self.retrying and not self._over_limit(request, alone=True):
                self.retrying[need.job] = now  # (else no pool's end would ever let it in)
                phase = now % LIMIT_RETRY
                self.phases[phase] = self.phases.get(phase, 0) + 1
            return True
        self._stop_retrying(need.job)
        try:
            status = self.provider.create(request)
        except Stockout as exc:  # the only failure the simulated provider has
            self.stats.stockouts += 1
            decision = failure_decision(exc, failure_summary(request.name, request.flavor, exc),
                                        now, self.settings)
            self._release(need.job, request.flavor, now, until=decision.until,
                          reason=decision.message, every_job=decision.every_job, failed=True,
                          retry=not always_out_of_stock(request.options))
            return True
        self.stats.pools_created += 1
        self.stats.pool_nodes_created += request.node_count
        pool = _Pool(request, need.job, self._nodes(request, status.nodes), created=now)
        self.pools[request.name] = pool
        self._count(request, 1)
        self.owned[need.job] = request.name
        for node in pool.nodes:
            self.meter.add(node.name, now, request.price_per_node_hour)
        self.gpus += self._gpus(request) * request.node_count
        self.stats.peak_pools = max(self.stats.peak_pools, len(self.pools))
        self.stats.peak_pool_nodes = max(self.stats.peak_pool_nodes, self._nodes_in_use())
        ready_at = self.provider.ready_at(request.name)
        self._push(ready_at, _READY, request.name, pool.generation)
        self.scheduler.set_provisioning_message(
            need.job, f"pool {request.name}: {status.state.value}: {status.message}")
        if ready_at <= now:
            return self.advance(now)
        return False

    def _reusable(self, request: PoolRequest, now: float) -> _Pool | None:
        """The job's own pool (it restarts), else a pool of its shape kept by an idle TTL."""
        config_hash = self._hash(request)
        mine = self.pools.get(self.owned.get(request.job, ""))
        if mine is not None and self._hash(mine.request) == config_hash:
            return mine
        idle = (IdlePool(p.request.name, p.request.provider, self._hash(p.request))
                for p in (self.pools[n] for n in self.idle)
                if p.ready and p.idle_from <= now < p.idle_until)
        order = reuse_order(request.provider, config_hash, idle)
        return self.pools[order[0]] if order else None

    def _hand_over(self, pool: _Pool, job: str, now: float) -> None:
        """``pool`` is reserved for ``job`` from now: its nodes are labelled and tainted
        for it, and placed on at the next cycle if it is Ready."""
        if pool.owner != job:
            taken = self.provider.reassign(pool.request.name, job)
            assert taken  # the simulated provider always can
            self.owned.pop(pool.owner, None)
            pool.owner = job
            pool.nodes = [self._reserved(n, job) for n in pool.nodes]
        pool.busy = True
        self.idle.discard(pool.request.name)
        pool.generation += 1
        self.owned[job] = pool.request.name
        if pool.ready:
            self._ready(pool, now)
        else:
            self._push(self.provider.ready_at(pool.request.name), _READY, pool.request.name,
                       pool.generation)

    def _ready(self, pool: _Pool, now: float) -> None:
        pool.ready = True
        for node in pool.nodes:
            self.scheduler.upsert_node(node)
        since = self.held_since.get(pool.owner)
        if since is not None:
            self.stats.provisioning_waits.append(now - since)
        self.scheduler.provisioning_ready(pool.owner, [n.name for n in pool.nodes])

    def _release(self, job: str, flavor: str, now: float, *, until: float, reason: str,
                 every_job: bool, failed: bool, retry: bool) -> None:
        """Give the held quota back and block ``flavor`` (for ``job``, or every job) until
        ``until``. ``failed``: a pool was asked for, so the next one is another attempt.
        ``retry``: wake the replay then (not when asking again can never succeed, so that
        a job nothing else can run ends the replay unfinished instead of looping)."""
        if failed:
            self.attempts[job] = self.attempts.get(job, 0) + 1
        self.owned.pop(job, None)
        self.scheduler.release_provisioning(job, flavor=flavor, until=until, reason=reason,
                                            every_job=every_job)
        if retry:
            self._push(until, _WAKE, "", 0)

    def _stop_retrying(self, job: str) -> None:
        since = self.retrying.pop(job, None)
        if since is not None:
            phase = since % LIMIT_RETRY
            left = self.phases[phase] - 1
            if left:
                self.phases[phase] = left
            else:
                del self.phases[phase]

    def _wake_retrying(self, now: float) -> None:
        """A pool went (or became idle, to be taken over), so a job turned away by a limit
        may fit at its next try: wake the replay then. Tries before that would meet the same
        limit and change nothing, so they are not played."""
        for phase in self.phases:
            at = now + (phase - now) % LIMIT_RETRY
            if at > now:
                self._push(at, _WAKE, "", 0)

    def _delete(self, pool: _Pool, now: float) -> None:
        name = pool.request.name
        self.provider.delete(name)
        assert self.provider.status(name) is None  # deletion confirmed before the record goes
        del self.pools[name]
        self.idle.discard(name)
        self._hashes.pop(name, None)
        self._count(pool.request, -1)
        if self.owned.get(pool.owner) == name:
            del self.owned[pool.owner]
        for node in pool.nodes:
            if pool.ready:
                self.scheduler.remove_node(node.name)
            self.meter.remove(node.name, now)
        self.gpus -= self._gpus(pool.request) * pool.request.node_count

    # ------------------------------------------------------------------ limits
    def _hash(self, request: PoolRequest) -> str:
        """The request's configuration hash, computed once per pool name."""
        found = self._hashes.get(request.name)
        if found is None:
            found = self._hashes[request.name] = request.config_hash
        return found

    def _count(self, request: PoolRequest, sign: int) -> None:
        """Keep the pools, nodes and spend per hour of each flavor ("": all) up to date."""
        for key in (request.flavor, ""):
            used = self.totals.get(key, PoolUsage())
            self.totals[key] = PoolUsage(used.pools + sign,
                                         used.nodes + sign * request.node_count,
                                         used.spend + sign * request.cost_per_hour)

    def _over_limit(self, request: PoolRequest, alone: bool = False) -> str:
        """Why ``request`` must wait (a limit it would pass), or "". ``alone``: even with
        no other pool."""
        if alone:
            return over_limit(request, self.config, PoolUsage(), PoolUsage())
        return over_limit(request, self.config, self.totals.get(request.flavor, PoolUsage()),
                          self.totals.get("", PoolUsage()))

    # ------------------------------------------------------------------ building requests
    def _spec(self, flavor: str) -> FlavorProvisioning:
        spec = self.flavors[flavor].provisioning
        assert spec is not None
        return spec

    def _request(self, need: ProvisioningNeed) -> PoolRequest:
        """Any provider is played by the simulated one in a replay."""
        return pool_request(self.config, need, self.attempts.get(need.job, 0) + 1, "simulated")

    def _nodes(self, request: PoolRequest, names: tuple[str, ...]) -> list[Node]:
        template = self._templates.get(request.flavor)
        if template is None:
            template = self._templates[request.flavor] = Node.model_validate({
                "name": "template", "allocatable": {r: f"{v}m" for r, v in request.node.items()},
            })
        taints = [Taint(key=k, value=v, effect=e) for k, v, e in request.node_taints]
        return [template.model_copy(update={"name": n, "labels": dict(request.node_labels),
                                            "taints": list(taints)}) for n in names]

    @staticmethod
    def _reserved(node: Node, job: str) -> Node:
        taints = [t if t.key != RESERVED_FOR else Taint(key=RESERVED_FOR, value=job)
                  for t in node.taints]
        return node.model_copy(update={"labels": {**node.labels, RESERVED_FOR: job},
                                       "taints": taints})

    @staticmethod
    def _gpus(request: PoolRequest) -> int:
        return request.node.get(GPU, 0) // 1000

    def _nodes_in_use(self) -> int:
        return self.totals.get("", PoolUsage()).nodes

def check_timeouts(config: QueueConfig) -> None:
    """Refuse a flavor whose pools boot no sooner than they time out: every attempt would
    fail, and the replay would retry for ever."""
    for name, flavor in sorted(config.provisionable_flavors().items()):
        spec = flavor.provisioning
        assert spec is not None
        delay = pool_delay(spec.options)
        if delay >= spec.timeout:
            raise SpecError(
                f"flavor {name}'s pools boot in {delay:g}s (options.delay) but time out after "
                f"{spec.timeout:g}s, so none would ever be Ready",
                field=f"ResourceFlavor {name}: provisioning.timeout",
                fix="raise timeout above options.delay, or lower the delay")


def node_price(config: QueueConfig, node: Node) -> float:
    """A node's price per hour: that of the provisionable flavor whose labels it carries (a
    fixed node of that flavor costs what a bought one does), else 0."""
    for flavor in config.provisionable_flavors().values():
        spec = flavor.provisioning
        assert spec is not None
        if all(node.labels.get(k) == v for k, v in flavor.node_labels.items()):
            return spec.price_per_node_hour
    return 0.0


def pool_gpus(config: QueueConfig) -> int:
    """The most GPUs a node of any flavor's pools has."""
    return max((f.provisioning.node.get(GPU, 0) // 1000
                for f in config.provisionable_flavors().values() if f.provisioning is not None),
               default=0)


@dataclass(frozen=True, slots=True)
class FixedCluster:
    config: QueueConfig
    nodes: list[Node]
    prices: dict[str, float]  # per node-hour, by node name


def fixed_equivalent(config: QueueConfig, nodes: list[Node]) -> FixedCluster:
    """The same cluster bought up front, for comparison: ``nodes`` plus, for every flavor
    with ``provisioning``, its ``maxNodes`` nodes (its peak) as fixed nodes with its labels,
    taints, node shape and price; the flavors lose ``provisioning``."""
    added: list[Node] = []
    prices: dict[str, float] = {n.name: node_price(config, n) for n in nodes}
    flavors = dict(config.flavors)
    for name, flavor in sorted(config.provisionable_flavors().items()):
        spec = flavor.provisioning
        assert spec is not None
        if spec.max_nodes is None:
            raise SpecError(
                f"flavor {name} has no maxNodes, so a fixed cluster of its peak size is "
                "undefined", field=f"ResourceFlavor {name}: provisioning.maxNodes",
                fix="set maxNodes (the most nodes its pools may have), or leave out "
                    "--against-fixed")
        template = Node.model_validate({
            "name": "template", "labels": dict(flavor.node_labels),
            "taints": [t.model_dump() for t in flavor.node_taints],
            "allocatable": {r: f"{v}m" for r, v in spec.node.items()},
        })
        width = len(str(spec.max_nodes - 1))
        mine = [template.model_copy(update={"name": f"{name}-fixed-{i:0{width}d}"})
                for i in range(spec.max_nodes)]
        prices.update((n.name, spec.price_per_node_hour) for n in mine)
        added += mine
        flavors[name] = flavor.model_copy(update={"provisioning": None})
    taken = {n.name for n in nodes} & {n.name for n in added}
    if taken:
        raise SpecError(f"node {sorted(taken)[0]} of the nodes file has the name a fixed node "
                        "of the comparison gets", field="nodes",
                        fix="rename that node")
    return FixedCluster(config.model_copy(update={"flavors": flavors}), [*nodes, *added],
                        prices)
