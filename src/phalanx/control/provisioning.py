"""The provisioning controller: buys a node pool for each gang that holds quota for one,
hands the gang its nodes when they are all Ready, fails over when a pool cannot be had, and
gives pools back when their jobs end.

It runs after each step of the control loop, and calls providers outside the state's lock.
The rules it decides by are pure and shared with the simulator (``provisioning/rules.py``);
this module keeps the I/O: store records, provider calls, the scheduler's holds, events.
Every intent is stored before the provider hears of it (``store/pools.py``), pool names are
``<job>-<attempt>``, and each stored pool carries the hash of its configuration, so a
restarted control plane adopts the pool it asked for, or replaces one made for another
configuration, and never makes two for one attempt.

Failures, by class (``provisioning/base.py``):
- Stockout: the hold is released and the flavor blocked for every job for
  ``stockout_block``; the next flavor in the queue's order is tried.
- ConfigurationError: the job fails with the provider's message; no retry.
- TransientError: the same place again after 60 s, doubling to 30 min, with jitter, three
  tries (Kueue's defaults); the quota is released meanwhile. Then the next flavor.
- Timeout (the flavor's ``timeout``, 15 min by default): that flavor is blocked for the job.
A pool whose deletion keeps failing stops failover for its job, which says so.
"""

from __future__ import annotations

import logging
import math
import random
from collections.abc import Callable, Iterable

from phalanx.compute.base import ComputePlane
from phalanx.control.state import PREEMPTED, ControlState
from phalanx.provisioning.base import (
    ConfigurationError,
    PoolRequest,
    PoolState,
    PoolStatus,
    Provider,
    ProvisioningError,
    ProvisioningTimeout,
    TransientError,
)
from phalanx.provisioning.registry import make_provider, pool_plane
from phalanx.provisioning.rules import (
    IdlePool,
    OwnerGone,
    PoolUsage,
    ProvisioningSettings,
    creation_refusal,
    failure_decision,
    failure_summary,
    idle_expired,
    over_limit,
    owner_gone,
    pool_request,
    reuse_order,
    timed_out,
)
from phalanx.scheduler.provisioning import ProvisioningNeed
from phalanx.spec.config import QueueConfig
from phalanx.spec.planes import LOCAL_PLANE, PLANE_LABEL
from phalanx.spec.provisioning import FlavorProvisioning
from phalanx.spec.status import JobStatus
from phalanx.store.pools import OWNED_PHASES, PoolPhase, PoolRecord, PoolStore

log = logging.getLogger("phalanx.provisioning")
# Providers are listed for pools no record accounts for at least this often (and at every
# reconcile that follows a pool).
GC_INTERVAL = 60.0


class ProvisioningController:
    def __init__(self, state: ControlState, plane: ComputePlane, *,
                 providers: dict[str, Provider] | None = None,
                 rng: random.Random | None = None) -> None:
        self.state = state
        self.plane = plane
        self.settings = ProvisioningSettings.of(state.config.provisioning_policy)
        self.pools = PoolStore(state.store)
        # By (provider, plane): a plane behind a worker has proxies of its worker's providers.
        self._providers: dict[tuple[str, str], Provider] = {
            (name, LOCAL_PLANE): p for name, p in (providers or {}).items()}
        self._rng = rng or random.Random()
        # Scheduler calls decided outside the lock, made under it at the end of a reconcile.
        self._actions: list[Callable[[], None]] = []
        # Whether the store may hold live pools: a control plane that buys none reads no
        # table at every step (the first reconcile looks once).
        self._maybe_pools = True
        self._collected_at = -math.inf  # when providers were last listed for leaked pools

    def close(self) -> None:
        for provider in self._providers.values():
            provider.close()

    def provider(self, name: str, where: str = LOCAL_PLANE) -> Provider:
        """Provider ``name`` of compute plane ``where`` (``pool_plane``)."""
        found = self._providers.get((name, where))
        if found is None:
            found = self._providers[(name, where)] = make_provider(name, self.plane, where)
        return found

    def _provider_of(self, row: PoolRecord) -> Provider:
        """The provider that buys ``row``'s pool, on the plane its request's labels name."""
        return self.provider(row.provider, pool_plane(row.request.get("nodeLabels", {})))

    # ------------------------------------------------------------------ the reconcile
    def reconcile(self) -> None:
        """One pass over holds and pools; nothing to do costs one store read."""
        state = self.state
        with state.lock:
            now = state.clock()
            holds = state.scheduler.provisioning_holds()
            config = state.config
            if not holds and not self._maybe_pools and not config.provisionable_flavors():
                return  # before looking at every job: this runs at every step of the loop
            owners = {n for n, r in state.jobs.items() if not r.status.terminal}
            known_nodes = {n.name for n in state.nodes}
        rows = self.pools.live()
        self._maybe_pools = bool(rows)
        gc_due = now - self._collected_at >= GC_INTERVAL
        if not holds and not rows and not gc_due:
            return
        self.settings = ProvisioningSettings.of(config.provisioning_policy)
        owned = {r.job: r for r in rows if r.state in OWNED_PHASES}
        for row in rows:
            try:
                self._follow(row, now, holds, owners, known_nodes, config)
            except Exception:  # one pool's trouble must not stop the others'
                log.exception("could not follow node pool %s", row.name)
        for job, need in sorted(holds.items()):
            mine = owned.get(job)
            if mine is not None and mine.state is not PoolPhase.INTENT:
                continue  # followed above
            try:
                self._provision(need, mine, now, config, rows)
            except Exception:
                log.exception("could not provision a node pool for %s", job)
        if rows or gc_due:
            self._collected_at = now
            self._collect_garbage(now, rows, config)
        self._flush()

    def _flush(self) -> None:
        actions, self._actions = self._actions, []
        if not actions:
            return
        with self.state.lock:
            for action in actions:
                action()
        self.state.persist()
        self.state.wake.set()

    # ------------------------------------------------------------------ one pool
    def _follow(self, row: PoolRecord, now: float, holds: dict[str, ProvisioningNeed],
                owners: set[str], known_nodes: set[str], config: QueueConfig) -> None:
        s = self.settings
        if row.state is PoolPhase.DELETING:
            self._delete(row, now)
            return
        if row.state is PoolPhase.IDLE:
            if idle_expired(row.released_at, now, _idle_ttl(config, row.flavor)):
                found = self._provider_of(row).status(row.name)
                if found is not None and found.state is PoolState.UNKNOWN:
                    return  # its plane's worker is silent: deleted once it is back
                self._start_deleting(row, now, "its idle TTL passed")
            return
        if row.state is PoolPhase.INTENT:
            if row.job in holds or row.job not in owners:
                return  # its job's hold decides (``_provision``); an orphan is collected below
            # Its job runs without a hold: a restarted control plane found the pool's nodes
            # Ready before it adopted the pool, and placed the gang on them. Adopt the pool
            # the provider made (deleting it would take the nodes from under the gang).
            found = self._provider_of(row).status(row.name)
            if found is None:
                return
            row.state = PoolPhase.READY if found.ready else PoolPhase.CREATING
            row.message = found.message
            self._save(row, now)
        # Creating or Ready: does its owner still need it? Two checks, some seconds apart,
        # so that a gang that restarts keeps its pool.
        if row.job not in owners:
            ttl = _idle_ttl(config, row.flavor)
            step = owner_gone(row.released_at, now, s, ready=row.state is PoolPhase.READY,
                              idle_ttl=ttl)
            if step is OwnerGone.FIRST_CHECK:
                row.released_at, row.checks = now, 1
                self._save(row, now)
            elif step is OwnerGone.KEEP_IDLE:
                row.state, row.released_at, row.checks = PoolPhase.IDLE, now, 2
                row.message = f"its job {row.job} ended; kept for {ttl:g}s"
                self._save(row, now)
            elif step is OwnerGone.DELETE:
                row.checks = 2
                self._start_deleting(row, now, f"its job {row.job} ended")
            return
        if row.released_at is not None:
            row.released_at, row.checks = None, 0
            self._save(row, now)
        need = holds.get(row.job)
        status = self._provider_of(row).status(row.name)
        if status is None:
            if now - row.created_at > s.list_grace:
                self._failed(row, TransientError("the provider no longer has the pool"), now)
            return
        if status.state is PoolState.UNKNOWN:
            return  # its plane's worker is silent: neither Ready, failed nor timed out yet
        if status.state is PoolState.FAILED:
            if need is None and row.state is PoolPhase.READY:
                # The gang was placed on the pool, whose capacity is going (a
                # ProvisioningRequest's CapacityRevoked): evicted, as Kueue evicts it.
                job, what = row.job, f"node pool {row.name} failed: {status.message}"
                self._act(lambda: self._evict(job, what))
            self._failed(row, status.error or TransientError(status.message), now)
            return
        if row.state is PoolPhase.CREATING:
            spec = _flavor_spec(config, row.flavor)
            timeout = spec.timeout if spec is not None else math.inf
            if timed_out(row.created_at, now, timeout, status.ready):
                self._failed(row, ProvisioningTimeout(
                    f"{status.ready_nodes} of {status.node_count} node(s) Ready after "
                    f"{timeout:g}s"), now)
                return
            if status.ready:
                row.state, row.message = PoolPhase.READY, status.message
                self._save(row, now)
        if need is not None:
            if self._request(need, row.attempt, config).config_hash != row.config_hash:
                # The gang or the flavor changed since: this pool is no longer the right one.
                self._start_deleting(row, now, "it was made for another configuration")
                return
            if status.ready and set(status.nodes) <= known_nodes:
                job, nodes = row.job, status.nodes
                self._act(lambda: self._ready(job, nodes))
            self._tell(row.job, _progress(row, status), now)

    def _provision(self, need: ProvisioningNeed, row: PoolRecord | None, now: float,
                   config: QueueConfig, rows: list[PoolRecord]) -> None:
        """Ask for the pool of a held job that has none (or only an intent)."""
        flavor = config.flavors.get(need.flavor)
        if flavor is None or flavor.provisioning is None:
            self._release(need.job, need.flavor, now + self.settings.limit_retry,
                          f"flavor {need.flavor} buys no node pools any more")
            return
        spec = flavor.provisioning
        if row is not None:  # an intent stored before a restart: adopt, replace or ask again
            request = self._request(need, row.attempt, config)
            status = self._provider_of(row).status(row.name)
            if status is not None and status.config_hash != request.config_hash:
                self._start_deleting(row, now, "it was made for another configuration")
            else:
                self._create(row, request, now)
                return
        refused = creation_refusal(config.provisioning_policy)
        if refused:
            self._release(need.job, need.flavor, now + self.settings.limit_retry, refused)
            return
        deleting = [r for r in self.pools.of_job(need.job) if r.state is PoolPhase.DELETING]
        stuck = [r for r in deleting if r.tries >= self.settings.delete_tries]
        if stuck:
            self._stop_failover(need, stuck[0], config)
            return
        if deleting:  # one pool of a job at a time: none leaks while the next is bought
            self._tell(need.job, f"waiting for node pool {deleting[0].name} to be deleted "
                       "before another is bought", now)
            return
        attempt = self.pools.last_attempt(need.job) + 1
        request = self._request(need, attempt, config)
        if self._reuse_idle(need, request, rows, now):
            return
        live = [r for r in rows if r.state is not PoolPhase.DELETED]
        over = over_limit(request, config,
                          _usage(r for r in live if r.flavor == request.flavor), _usage(live))
        if over:
            self._release(need.job, need.flavor, now + self.settings.limit_retry, over)
            return
        record = PoolRecord(
            name=request.name, job=need.job, attempt=attempt, flavor=need.flavor,
            provider=spec.provider, config_hash=request.config_hash, state=PoolPhase.INTENT,
            node_count=request.node_count, price_per_node_hour=spec.price_per_node_hour,
            created_at=now, updated_at=now, request=request.to_dict(),
        )
        self.pools.insert(record)  # the intent first: a crash now leaves a record to follow
        rows.append(record)
        self._create(record, request, now)

    def _reuse_idle(self, need: ProvisioningNeed, request: PoolRequest,
                    rows: list[PoolRecord], now: float) -> bool:
        """Give the job an idle pool of the same configuration (a flavor's idleTTL)."""
        idle = {r.name: r for r in rows if r.state is PoolPhase.IDLE}
        for name in reuse_order(request.provider, request.config_hash,
                                (IdlePool(r.name, r.provider, r.config_hash)
                                 for r in idle.values())):
            row = idle[name]
            if not self._provider_of(row).reassign(row.name, need.job):
                continue
            previous = row.job
            row.job, row.state, row.released_at, row.checks = need.job, PoolPhase.READY, None, 0
            row.message = f"reused after its job {previous} ended (idleTTL)"
            self._save(row, now)
            self._event(need.job, "PoolReused", f"node pool {row.name} ({row.flavor}), idle "
                        f"since {previous} ended, is reserved for this job")
            return True
        return False

    def _create(self, row: PoolRecord, request: PoolRequest, now: float) -> None:
        try:
            status = self._provider_of(row).create(request)
        except ProvisioningError as exc:
            self._failed(row, exc, now)
            return
        row.state = PoolPhase.READY if status.ready else PoolPhase.CREATING
        row.message = status.message
        self._save(row, now)
        self._tell(row.job, _progress(row, status), now)

    def _request(self, need: ProvisioningNeed, attempt: int, config: QueueConfig
                 ) -> PoolRequest:
        return pool_request(config, need, attempt)

    # ------------------------------------------------------------------ failures
    def _failed(self, row: PoolRecord, error: ProvisioningError, now: float) -> None:
        """The pool will not serve: give it back, and decide what its job does next."""
        row.error_kind, row.message = error.kind, error.message
        self._start_deleting(row, now, f"{error.kind}: {error.message}")
        job, flavor = row.job, row.flavor
        what = failure_summary(row.name, flavor, error)
        self._event(job, "ProvisioningFailed", what)
        tries = 0
        if isinstance(error, TransientError):
            tries = sum(1 for r in self.pools.of_job(job)
                        if r.flavor == flavor and r.error_kind == TransientError.kind)
        decision = failure_decision(error, what, now, self.settings, transient_tries=tries,
                                    rng=self._rng)
        if decision.fail_job:
            self._act(lambda: self._fail_job(job, decision.message))
            return
        if decision.every_flavor:  # the same place again after the backoff
            row.blocked_until = decision.until
            self._save(row, now)
        self._release(job, flavor, decision.until, decision.message,
                      every_job=decision.every_job, every_flavor=decision.every_flavor)

    def _stop_failover(self, need: ProvisioningNeed, stuck: PoolRecord,
                       config: QueueConfig) -> None:
        why = (f"the cleanup of node pool {stuck.name} keeps failing ({stuck.message}); no "
               "further node pool is bought for this job until it is deleted")
        self._release(need.job, need.flavor, math.inf, why, every_flavor=True)

    def _release(self, job: str, flavor: str, until: float, reason: str, *,
                 every_job: bool = False, every_flavor: bool = False) -> None:
        def release() -> None:
            scheduler = self.state.scheduler
            if every_flavor:
                for name in self.state.config.provisionable_flavors():
                    scheduler.block_provisioning(name, until=until, reason=reason, job=job)
            scheduler.release_provisioning(job, flavor=flavor, until=until, reason=reason,
                                           every_job=every_job)
        self._act(release)

    def _fail_job(self, job: str, message: str) -> None:  # lock held
        state = self.state
        record = state.jobs.get(job)
        if record is None or record.status.terminal:
            return
        state.scheduler.remove(job)
        state.backoff.pop(job, None)
        state.finish(record, JobStatus.FAILED, message)

    def _evict(self, job: str, message: str) -> None:  # lock held
        """Stop a placed job that has not finished; it is queued again (not charged to its
        restart budget) and asks for a new pool."""
        record = self.state.jobs.get(job)
        if record is None or record.status.terminal or record.admission is None:
            return
        self.state.begin_stop(record, PREEMPTED, f"evicted: {message}")

    # ------------------------------------------------------------------ cleanup
    def _start_deleting(self, row: PoolRecord, now: float, why: str) -> None:
        row.state = PoolPhase.DELETING
        if not row.error_kind:
            row.message = f"deleting: {why}"
        self._save(row, now)
        self._delete(row, now)

    def _delete(self, row: PoolRecord, now: float) -> None:
        """Ask again, and drop the record only once the provider confirms it is gone."""
        try:
            provider = self._provider_of(row)
        except ConfigurationError:  # no such provider here: it cannot have made the pool
            row.state = PoolPhase.DELETED
            self._save(row, now)
            return
        try:
            provider.delete(row.name)
            gone = provider.status(row.name) is None
        except Exception as exc:  # counted: a cleanup that keeps failing stops failover
            row.tries += 1
            row.message = f"deletion failed ({row.tries}x): {exc}"
            self._save(row, now)
            if row.tries == self.settings.delete_tries:
                self._event(row.job, "PoolCleanupFailing", f"node pool {row.name}: "
                            f"{row.message}; no further node pool is bought for this job")
            return
        if gone:
            row.state = PoolPhase.DELETED
            self._save(row, now)

    def _collect_garbage(self, now: float, rows: list[PoolRecord], config: QueueConfig) -> None:
        """Pools a provider has that no live record accounts for (listed from the provider:
        a failed pool with no nodes shows in no node list); intents with no hold left."""
        with self.state.lock:
            holding = set(self.state.scheduler.provisioning_holds())
        for row in rows:
            if row.state is PoolPhase.INTENT and row.job not in holding:
                self._start_deleting(row, now, "its job no longer waits for it")
        names = {(f.provisioning.provider, pool_plane(f.node_labels))
                 for f in config.flavors.values() if f.provisioning is not None} | {
            (r.provider, pool_plane(r.request.get("nodeLabels", {}))) for r in rows}
        known = {r.name for r in rows if r.state is not PoolPhase.DELETED}
        for provider_name, where in sorted(names):
            try:
                listed = self.provider(provider_name, where).list()
            except Exception:
                log.exception("could not list the pools of provider %s of compute plane %s",
                              provider_name, where)
                continue
            for status in listed:
                if status.name in known:
                    continue
                stored = self.pools.get(status.name)
                if stored is not None and stored.state is not PoolPhase.DELETED:
                    continue  # recorded since this pass began
                log.warning("deleting node pool %s: no record accounts for it", status.name)
                leaked = PoolRecord(
                    name=status.name, job="", attempt=0, flavor="", provider=provider_name,
                    config_hash=status.config_hash, state=PoolPhase.DELETING,
                    node_count=status.node_count, price_per_node_hour=0.0, created_at=now,
                    updated_at=now, message="deleting: no record accounted for it",
                    request={"nodeLabels": {PLANE_LABEL: where}})
                if stored is None:
                    self.pools.insert(leaked)  # followed until the provider confirms
                else:
                    self.pools.save(leaked)
                self._delete(leaked, now)

    # ------------------------------------------------------------------ helpers
    def _save(self, row: PoolRecord, now: float) -> None:
        row.updated_at = now
        self.pools.save(row)

    def _act(self, action: Callable[[], None]) -> None:
        self._actions.append(action)

    def _ready(self, job: str, nodes: tuple[str, ...]) -> None:  # lock held
        self.state.scheduler.provisioning_ready(job, nodes)

    def _tell(self, job: str, message: str, now: float) -> None:
        history = _history(self.pools.of_job(job), exclude_live=True)
        text = message + (f"; tried before: {history}" if history else "")
        self._act(lambda: self.state.scheduler.set_provisioning_message(job, text))

    def _event(self, job: str, reason: str, message: str) -> None:
        def add() -> None:
            record = self.state.jobs.get(job)
            if record is not None:
                self.state.event(record, reason, message, warning=True)
        self._act(add)

    def tried(self, job: str) -> list[PoolRecord]:
        """The job's pools, every attempt (why-pending and describe show them)."""
        return self.pools.of_job(job)


def _progress(row: PoolRecord, status: PoolStatus) -> str:
    what = (f"node pool {row.name} ({row.flavor}, {row.provider}): {status.state.value}, "
            f"{status.ready_nodes}/{status.node_count or row.node_count} node(s) Ready")
    return what + (f" ({status.message})" if status.message else "")


def _history(rows: list[PoolRecord], exclude_live: bool = False) -> str:
    done = [r for r in rows if r.error_kind and not (
        exclude_live and r.state in OWNED_PHASES)]
    return "; ".join(f"{r.name} ({r.flavor}): {r.error_kind}: {r.message}" for r in done)


def _flavor_spec(config: QueueConfig, flavor: str) -> FlavorProvisioning | None:
    found = config.flavors.get(flavor)
    return None if found is None else found.provisioning


def _idle_ttl(config: QueueConfig, flavor: str) -> float:
    spec = _flavor_spec(config, flavor)
    return spec.idle_ttl if spec is not None else 0.0


def _usage(rows: Iterable[PoolRecord]) -> PoolUsage:
    return PoolUsage.of((r.node_count, r.cost_per_hour) for r in rows)
