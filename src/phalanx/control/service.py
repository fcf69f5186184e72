"""What the HTTP API asks of the control plane: submit, cancel, apply, and consistent reads.

Every read is a snapshot taken under the state's lock and handed out as copies,
so a route never iterates what the loop is changing. Nothing here calls a
compute plane while holding the lock: a cancel queues the stop for the loop,
and the plane's own reads (its events, its log flush) run unlocked.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from phalanx.compute.base import ComputePlane, ExecSession, PodState
from phalanx.compute.federation import PlaneSet
from phalanx.control.dependencies import check_new, refuse_cycles
from phalanx.control.state import ACTIVE, CANCELLED, DRAINED, ControlState
from phalanx.errors import Conflict, NotFound, PhalanxError, TooManyPending
from phalanx.kinds import framework_of
from phalanx.provisioning.registry import check_providers
from phalanx.scheduler import ClusterQueueStatus, PendingCode
from phalanx.spec.config import QueueConfig
from phalanx.spec.planes import LOCAL_PLANE
from phalanx.spec.provisioning import check_pod_sets
from phalanx.spec.resources import ConfigObject, JobSpec, Node
from phalanx.spec.sources import generated_name
from phalanx.spec.status import JobEvent, JobRecord, JobStatus
from phalanx.store import IdempotentRequest, JobFilter, JobPage, LogStore
from phalanx.store.pools import PoolStore

IDEMPOTENCY_KEY = "Idempotency-Key"
UNKNOWN_USER = "unknown"
GENERATED_NAME_TRIES = 5  # 36^5 names per prefix: a fifth clash means the prefix is full
Sees = Callable[[JobRecord], bool]  # whether a job is the submitter's to see
_NAMES_SHOWN = 5


def _request_hash(specs: list[JobSpec], batch: bool) -> str:
    """What a submit asks for, as a hash: equal documents hash equal however they were sent."""
    body = {"batch": batch, "items": [spec.to_dict() for spec in specs]}
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class LocalQueueCounts:
    name: str
    cluster_queue: str
    pending: int
    admitted: int


@dataclass(frozen=True, slots=True)
class QueueOverview:
    """The queues at one moment: the scheduler's view and the jobs of each LocalQueue."""

    cluster_queues: list[ClusterQueueStatus]
    local_queues: list[LocalQueueCounts]
    config: QueueConfig


@dataclass(frozen=True, slots=True)
class NodeOverview:
    node: Node
    used: dict[str, int]  # resource -> milli-units admitted jobs hold on the node


def acting_attempt(record: JobRecord | None, attempt: int) -> JobRecord | None:
    """``record`` while ``attempt`` is its current attempt, active and not being stopped."""
    if (record is None or record.attempt != attempt or record.status not in ACTIVE
            or record.stop_reason is not None):
        return None
    return record


class JobService:
    def __init__(
        self, state: ControlState, plane: ComputePlane, logs: LogStore | None = None,
    ) -> None:
        self.state = state
        self.plane = plane
        self.store = state.store
        self.logs = logs
        self._config_lock = threading.Lock()  # one apply at a time: none undoes another

    def _nodes_may_join(self) -> bool:
        """Whether workers bring nodes: planes behind workers, or no plane of its own."""
        if not isinstance(self.plane, PlaneSet):
            return False
        names = self.plane.names()
        return names != [LOCAL_PLANE]

    # ------------------------------------------------------------------ writes
    def submit(self, spec: JobSpec, *, user: str = UNKNOWN_USER,
               audit: Sequence[object] = (), sees: Sees | None = None) -> JobRecord:
        return self.submit_many([spec], batch=False, user=user, audit=audit, sees=sees)[0]

    def submit_keyed(
        self, specs: list[JobSpec], *, batch: bool, key: str, user: str = UNKNOWN_USER,
        audit: Sequence[object] = (), sees: Sees | None = None,
        manifests: Mapping[str, Mapping[str, Any]] | None = None,
        sent: list[JobSpec] | None = None,
    ) -> tuple[list[JobRecord], bool]:
        """Submit under an Idempotency-Key: (the jobs, whether this is a retry's answer).
        ``sent``: the specs as the client sent them, which the key covers, when the control
        plane completed them (a git ref it resolved may move between a request and its
        retry).

        The first request with ``key`` submits and stores the key with its jobs in one
        transaction; a later one with the same request gets those jobs back and submits
        nothing; one with another request under the same key is a Conflict.
        """
        digest = _request_hash(sent if sent is not None else specs, batch)
        # Submitted first and the key looked up only if that fails: a new key (nearly every
        # request) costs no read of its own. A retry fails (its jobs' names are taken, or
        # its key is, stored with them) and is answered from the key below.
        try:
            request = IdempotentRequest(key, digest, tuple(s.name for s in specs))
            return self.submit_many(specs, batch=batch, request=request, user=user,
                                    audit=audit, sees=sees, manifests=manifests), False
        except PhalanxError:
            prior = self.store.get_request(key)
            if prior is None:  # no request came with this key: the error is this one's
                raise
        if prior.request_hash != digest:
            raise Conflict(
                "this Idempotency-Key came with a different request before",
                field=IDEMPOTENCY_KEY,
                fix="send a new key with a new request (reuse a key only to retry the same one)",
            )
        return [self.get(name) for name in prior.jobs], True

    def submit_many(
        self, specs: list[JobSpec], *, batch: bool = True,
        request: IdempotentRequest | None = None, user: str = UNKNOWN_USER,
        audit: Sequence[object] = (), sees: Sees | None = None,
        manifests: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> list[JobRecord]:
        """Submit jobs all or nothing, in one store transaction (with ``audit``, the
        submit's audit entries, and ``manifests``, the Kubernetes manifests some jobs were
        submitted as, by name). ``sees``: the jobs the submitter may name in
        ``dependsOn`` (default all); another is refused as a job that does not exist.
        A job with ``generateName`` whose name is taken is named anew (the prefix and 5
        other random characters), as Kubernetes does."""
        for tries_left in range(GENERATED_NAME_TRIES - 1, -1, -1):
            try:
                return self._submit_many(specs, batch=batch, request=request, user=user,
                                         audit=audit, sees=sees, manifests=manifests)
            except Conflict as exc:
                if tries_left == 0 or not (exc.field or "").endswith("name") \
                        or not any(s.generate_name for s in specs):
                    raise
            renamed = [s.model_copy(update={"name": generated_name(s.generate_name)})
                       if s.generate_name else s for s in specs]
            if manifests is not None:  # a job's manifest follows it to its new name
                names = {old.name: new.name for old, new in zip(specs, renamed, strict=True)}
                manifests = {names.get(name, name): m for name, m in manifests.items()}
            specs = renamed
            if request is not None:
                request = replace(request, jobs=tuple(s.name for s in specs))
        raise AssertionError("unreachable")  # the loop returns or raises

    def _submit_many(
        self, specs: list[JobSpec], *, batch: bool,
        request: IdempotentRequest | None, user: str, audit: Sequence[object],
        sees: Sees | None, manifests: Mapping[str, Mapping[str, Any]] | None,
    ) -> list[JobRecord]:
        """Submit jobs all or nothing, in one store transaction.

        Every job is checked before any is stored; in a batch an error names the job's
        position (``items[i]``) and field, and nothing is submitted. The store is
        written outside the lock; the jobs join the scheduler once they are stored.
        """
        state = self.state
        refuse_cycles(specs, batch=batch)
        submitted = {spec.name for spec in specs}
        with state.lock:
            now = state.clock()
            records, events = [], []
            seen: set[str] = set()
            pending = self._pending_counts()
            for i, spec in enumerate(specs):
                try:
                    if spec.name in seen:
                        raise Conflict(f"the batch names job {spec.name!r} twice",
                                       field="name", fix="give every job its own name")
                    seen.add(spec.name)
                    record, event = self._new_job(spec, now, user)
                    check_new(state.job_record, record, submitted, sees)
                    if record.pending_message and spec.depends_on:
                        event.message += f"; {record.pending_message}"
                    self._check_pending_room(record.cluster_queue, pending)
                except PhalanxError as exc:
                    if not batch:
                        raise
                    raise type(exc)(
                        exc.message, fix=exc.fix,
                        field=f"items[{i}]" + (f".{exc.field}" if exc.field else ""),
                    ) from None
                records.append(record)
                events.append(event)
        if batch:
            self.store.create_jobs(records, events, request, audit, manifests)
        else:
            self.store.create_job(records[0], events[0], request, audit,
                                  (manifests or {}).get(records[0].name))
        with state.lock:
            for record in records:
                state.jobs[record.name] = record
            for record in records:  # each job's dependencies known first, if submitted with it
                if record.spec.depends_on:
                    state.enter_gate(record)
                else:
                    state.queue(record)
            copies = [record.model_copy() for record in records]
        state.wake.set()
        return copies

    def _pending_counts(self) -> dict[str, int] | None:
        """Queued jobs per ClusterQueue that limits them, if any does (lock held).

        The scheduler counts the jobs it holds; the few queued jobs held outside it (a
        restart's backoff, unmet dependencies) are added. Walking every live job instead
        made each submit cost as much as the backlog was long.
        """
        state = self.state
        limited = [name for name, cq in state.config.cluster_queues.items()
                   if cq.max_pending_jobs is not None]
        if not limited:
            return None
        counts = {name: state.scheduler.pending_count(name) for name in limited}
        for name in (*state.backoff, *state.dependencies.waiting):
            record = state.jobs.get(name)
            if (record is not None and record.status is JobStatus.QUEUED
                    and record.cluster_queue in counts):
                counts[record.cluster_queue] += 1
        return counts

    def _check_pending_room(self, cluster_queue: str, pending: dict[str, int] | None) -> None:
        """Count one more pending job of ``cluster_queue``; TooManyPending beyond its limit."""
        if pending is None:
            return
        limit = self.state.config.cluster_queues[cluster_queue].max_pending_jobs
        held = pending.get(cluster_queue, 0)
        if limit is not None and held >= limit:
            raise TooManyPending(
                f"ClusterQueue {cluster_queue} already holds {held} pending job(s), its "
                f"maxPendingJobs", field="queue",
                fix=f"wait until some are admitted or cancel some, or raise maxPendingJobs "
                    f"of ClusterQueue {cluster_queue}",
            )
        pending[cluster_queue] = held + 1

    def _new_job(self, spec: JobSpec, now: float, user: str) -> tuple[JobRecord, JobEvent]:
        """The record and first event of a job, once it is known to be admissible ever."""
        config = self.state.config
        cq = config.cluster_queue_for(spec.queue)
        priority = config.priority_value(spec.priority)
        framework_of(spec).check(spec)
        self.plane.check_job(spec)
        if not (config.follows_nodes and self._nodes_may_join()):
            # Against the quota of today: the built-in default grows as workers join, so
            # a job larger than it waits for them instead (as Kueue's workloads wait).
            self.state.scheduler.check_feasible(spec)
        check_pod_sets(len(spec.pod_sets), config.provisioning_of(cq.name))
        record = JobRecord(
            name=spec.name, spec=spec, queue=spec.queue, cluster_queue=cq.name,
            priority=priority, submitted_at=now, queued_at=now,
            pending_code="Queued", pending_message="waiting for the next scheduling cycle",
            user=user,
        )
        event = JobEvent(job=spec.name, time=now, reason="Submitted",
                         message=f"queued in {spec.queue} (ClusterQueue {cq.name})")
        return record, event

    def cancel(self, name: str) -> JobRecord:
        state = self.state
        with state.lock:
            record = state.jobs.get(name)
            if record is None:
                finished = state.saving.get(name)
                return finished.model_copy() if finished else self.store.get_job(name)
            self._cancel_locked(record)
            copy = record.model_copy()
        state.persist()
        state.wake.set()  # the loop sends the stop to the plane
        return copy

    def cancel_matching(
        self, where: JobFilter, allowed: Callable[[JobRecord], bool] | None = None,
    ) -> list[JobRecord]:
        """Cancel every live job ``where`` matches (and ``allowed`` lets the caller cancel),
        in one store write; copies of them.

        Live jobs are all in memory, so this reads no store and holds the lock for one pass
        over them; finished jobs that match are left as they are.
        """
        state = self.state
        with state.lock:
            matched = [r for r in state.jobs.values()
                       if where.matches(r) and (allowed is None or allowed(r))]
            for record in matched:
                self._cancel_locked(record)
            copies = [record.model_copy() for record in matched]
        state.persist()
        state.wake.set()
        return copies

    def _cancel_locked(self, record: JobRecord) -> None:
        state = self.state
        if record.cancel_requested:
            return
        record.cancel_requested = True
        state.event(record, "CancelRequested", "cancelled by the user")
        if record.status is JobStatus.QUEUED:
            state.scheduler.remove(record.name)
            state.backoff.pop(record.name, None)
            state.finish(record, JobStatus.CANCELLED, "cancelled before it ran")
        else:
            state.begin_stop(record, CANCELLED, "cancelled by the user")

    def delete_job(self, name: str) -> JobRecord:
        """Delete a finished job, its events and its logs; its name is free again.

        A live job is refused (Conflict): its pods would outlive its record.
        """
        with self.state.lock:
            live = self.state.jobs.get(name) or self.state.saving.get(name)
            if live is not None:
                raise Conflict(
                    f"job {name!r} is {live.status.value}; only finished jobs are deleted",
                    field="name", fix=f"cancel it first (`phalanx cancel {name} --wait`), "
                    "then delete it",
                )
        record = self.store.get_job(name)
        # Logs first: while the record stands the name stays taken, so no new job of that
        # name can be writing the logs being removed.
        if self.logs is not None:
            self.logs.delete(name)
        if not self.store.delete_finished_jobs([name]):
            raise NotFound(f"job {name!r} does not exist", field="name",
                           fix="check the name with `phalanx jobs`")
        return record

    def delete_finished(self, names: list[str]) -> list[str]:
        """Delete the finished jobs among ``names`` and their logs (the TTL's batches)."""
        if self.logs is not None:
            for name in names:
                self.logs.delete(name)
        deleted = self.store.delete_finished_jobs(names)
        pools = PoolStore(self.store)
        for name in deleted:  # the history of their node pools (live ones stay followed)
            pools.forget_job(name)
        return deleted

    def apply_config(self, objects: list[ConfigObject]) -> list[dict[str, str]]:
        """Create or replace the objects, all or nothing. The configuration no longer
        follows the nodes (``QueueConfig.follows_nodes``) once anything is applied."""
        state = self.state
        check_providers(objects, self.plane)
        with self._config_lock:
            with state.lock:
                old_config = state.config
            new = old_config.merged(objects)
            new.follows_nodes = False
            actions = []
            for obj in objects:
                old = old_config._table(obj.kind).get(obj.name)
                action = "created" if old is None else "unchanged" if old == obj else "configured"
                actions.append({"kind": obj.kind, "name": obj.name, "action": action})
            # Stored and set under one hold of the lock: the loop, which re-derives a
            # configuration that follows the nodes, sees the old one or this one.
            with state.lock:
                self.store.save_config(new)
                state.config = new
                state.scheduler.set_config(new)
        state.wake.set()
        return actions

    def delete_config(self, refs: list[tuple[str, str]]) -> list[tuple[str, str]]:
        """Remove flavors, cohorts, queues and priority classes, all or nothing.

        Refused (Conflict, naming what holds it) while another object left behind names one,
        or while live jobs use a LocalQueue, a ClusterQueue or a priority class.
        """
        state = self.state
        unique = list(dict.fromkeys(refs))
        with self._config_lock:
            with state.lock:
                old_config = state.config
            new = old_config.without(unique)
            new.follows_nodes = False
            # Checked, stored and set under one hold of the lock, so no job can be submitted
            # to a queue between the check that it has none and its removal. The write is
            # one small row; deletions are rare.
            with state.lock:
                for kind, name in unique:
                    self._refuse_if_jobs_use(kind, name)
                self.store.save_config(new)
                state.config = new
                state.scheduler.set_config(new)
        state.wake.set()
        return unique

    def _refuse_if_jobs_use(self, kind: str, name: str) -> None:
        """Conflict if live jobs use the object (lock held)."""
        if kind == "PriorityClass" and name == "default":
            raise Conflict(
                "PriorityClass default is the priority of every job that names none",
                field=f"{kind} {name}", fix="keep it; change its value with `phalanx apply`",
            )
        uses = {
            "LocalQueue": lambda r: r.queue == name,
            "ClusterQueue": lambda r: r.cluster_queue == name,
            "PriorityClass": lambda r: r.spec.priority == name,
        }.get(kind)
        if uses is None:
            return
        users = sorted(r.name for r in self.state.jobs.values() if uses(r))
        if users:
            shown = ", ".join(users[:_NAMES_SHOWN])
            more = f" and {len(users) - _NAMES_SHOWN} more" if len(users) > _NAMES_SHOWN else ""
            how = (f"`phalanx cancel --queue {name}`" if kind == "LocalQueue"
                   else "`phalanx cancel`")
            raise Conflict(
                f"{kind} {name} is in use by {len(users)} live job(s): {shown}{more}; "
                "nothing was deleted",
                field=f"{kind} {name}",
                fix=f"cancel them ({how}) or let them finish, then delete it",
            )

    # ------------------------------------------------------------------ reads
    def get(self, name: str) -> JobRecord:
        with self.state.lock:
            record = self.state.jobs.get(name)
            if record is not None:
                return self._view(record)
            finished = self.state.saving.get(name)
            if finished is not None:
                return finished.model_copy()
        return self.store.get_job(name)

    def running_attempt(self, name: str, attempt: int) -> JobRecord | None:
        """Job ``name``'s record while ``attempt`` is its current attempt and nothing stops
        it; None once that attempt ends, is being stopped (cancelled, preempted, failed) or
        was never launched. What a job's credential acts for: read on every request it
        makes, so without the lock (one dict read; the loop replaces fields, never tears
        one)."""
        return acting_attempt(self.state.jobs.get(name), attempt)

    def live(self, names: Iterable[str]) -> dict[str, JobRecord]:
        """Copies of the records of ``names`` that are still active, with current reasons."""
        with self.state.lock:
            return {name: self._view(record) for name in names
                    if (record := self.state.jobs.get(name)) is not None}

    def list_jobs(
        self, *, statuses: list[JobStatus] | None = None, queue: str | None = None,
        limit: int | None = None,
    ) -> list[JobRecord]:
        records = self.store.list_jobs(statuses=statuses, queue=queue, limit=limit)
        live = self.live(r.name for r in records)
        return [live.get(r.name) or r for r in records]

    def page_jobs(
        self, where: JobFilter, *, limit: int | None = None, after: str | None = None,
    ) -> JobPage:
        """A page of jobs, newest first, live ones as they are this moment."""
        page = self.store.page_jobs(where, limit=limit, after=after)
        live = self.live(r.name for r in page.items)
        return JobPage([live.get(r.name) or r for r in page.items], page.next, page.remaining)

    def _view(self, record: JobRecord) -> JobRecord:
        """A copy of a live record; a queued job's reason is the scheduler's of this moment.

        Reasons are read, not copied after each cycle: a cycle gives one to whole classes of
        jobs at once, and copying it to every waiting record would cost more than the cycle.
        """
        view = record.model_copy()
        if record.status is JobStatus.QUEUED:
            reason = self.state.scheduler.pending_reason(record.name)
            # A record that says why it waits outside the scheduler (a backoff) keeps saying so
            # until the scheduler has looked at the job.
            if reason is not None and not (reason.code is PendingCode.QUEUED
                                           and record.pending_code):
                view.pending_code = reason.code.value
                view.pending_message = reason.message
            view.estimate = self.state.estimates.get(record.name)
        return view

    def finished(self, name: str) -> bool:
        """Whether the job has ended (or is gone); cheaper than ``get``, which copies it."""
        with self.state.lock:
            record = self.state.jobs.get(name)
            if record is not None:
                return record.status.terminal
            if name in self.state.saving:
                return True
        try:  # not yet live (being submitted) or long finished: the store knows
            return self.store.get_job(name).status.terminal
        except NotFound:
            return True

    def pods_of(self, name: str) -> list[PodState]:
        with self.state.lock:
            return list(self.state.pods.get(name, ()))

    def events_of(self, name: str) -> list[JobEvent]:
        """The job's events, stored or not yet, and what the plane says about its pods,
        oldest first.

        The unstored ones are read first: one stored in between is then in the store's
        answer (and counted once), so a job seen Succeeded always shows that event.
        """
        with self.state.lock:
            unsaved = self.state.unsaved_events(name)
        stored = self.store.list_events(name)
        events = stored + [e for e in unsaved if e not in stored] + self.plane.pod_events(name)
        events.sort(key=lambda e: e.time)
        return events

    def exec(self, name: str, pod: str | None, argv: list[str], *, tty: bool = False,
             cols: int = 80, rows: int = 24) -> ExecSession:
        """Run ``argv`` inside the job's running pod ``pod`` (``ComputePlane.exec``)."""
        self.get(name)  # NotFound for a job that does not exist
        return self.plane.exec(name, pod, argv, tty=tty, cols=cols, rows=rows)

    def flush_logs(self) -> None:
        """Wait for the logs of what the plane has reported, if it writes them in the background."""
        self.plane.flush_logs()

    def config(self) -> QueueConfig:
        with self.state.lock:
            return self.state.config

    def queues(self) -> QueueOverview:
        state = self.state
        with state.lock:
            statuses = state.scheduler.queue_status()
            config = state.config
            counts: dict[str, list[int]] = {}
            for record in state.jobs.values():
                c = counts.setdefault(record.queue, [0, 0])
                c[0 if record.status is JobStatus.QUEUED else 1] += 1
        local = [
            LocalQueueCounts(lq.name, lq.cluster_queue, *counts.get(lq.name, (0, 0)))
            for lq in config.local_queues.values()
        ]
        return QueueOverview(statuses, local, config)

    def nodes(self) -> list[NodeOverview]:
        with self.state.lock:
            usage = self.state.scheduler.node_usage()
            nodes = list(self.state.nodes)
        return [NodeOverview(node, dict(usage.get(node.name, {}))) for node in nodes]

    def node(self, name: str) -> NodeOverview:
        for entry in self.nodes():
            if entry.node.name == name:
                return entry
        raise NotFound(f"no node {name!r}", field="node", fix="name a node `phalanx nodes` lists")

    def cordon(self, name: str, unschedulable: bool) -> NodeOverview:
        """Stop (or resume) placing pods on the node; what runs there keeps running."""
        self.node(name)
        self.plane.cordon(name, unschedulable)
        self.state.wake.set()
        # The loop reads the change at its next step; answer with what was asked for now.
        entry = self.node(name)
        return NodeOverview(entry.node.model_copy(update={"unschedulable": unschedulable}),
                            entry.used)

    def drain(self, name: str, grace_seconds: float | None = None) -> list[str]:
        """Cordon the node and stop the gangs on it with ``grace_seconds`` to end, requeued
        as system failures (onto other nodes, at once); the names of the jobs stopped.

        ``grace_seconds`` None gives them the control plane's usual grace."""
        self.cordon(name, True)
        state = self.state
        stopped = []
        with state.lock:
            for record in list(state.active.values()):
                nodes = {n for ps in (record.admission.pod_sets if record.admission else ())
                         for n in ps.nodes}
                if name in nodes and not record.stop_reason:
                    state.begin_stop(record, DRAINED, f"node {name} is being drained",
                                     "system", grace=grace_seconds)
                    stopped.append(record.name)
        state.persist()
        state.wake.set()
        return stopped

    def status(self, started_at: float) -> dict[str, object]:
        with self.state.lock:
            nodes = len(self.state.nodes)
        return {
            "startedAt": started_at,
            "compute": self.plane.kind,
            "jobs": self.store.count_jobs_by_status(),
            "nodes": nodes,
        }

    def refresh_metrics(self) -> None:
        with self.state.lock:
            self.state.metrics.observe_queues(self.state.scheduler.queue_status())
            self.state.metrics.observe_nodes(self.state.nodes)
