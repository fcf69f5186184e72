"""The control loop: feeds the scheduler core, runs its decisions on a compute plane.

Level-triggered: each step observes the plane's pods, moves jobs through their
lifecycle, runs one scheduling cycle and persists every change of the step in
one batched store write. On start it rebuilds the scheduler's state from the
store and re-adopts whatever the plane is still running, so a restart loses no
job and runs nothing twice.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from phalanx.compute.base import ComputePlane, PodState
from phalanx.errors import Conflict, NotFound, PhalanxError
from phalanx.scheduler import Admission, CycleResult, PendingCode, Scheduler
from phalanx.server.lifecycle import GangPhase, gang_status, restart_decision
from phalanx.server.metrics import Metrics
from phalanx.spec.config import QueueConfig
from phalanx.spec.resources import ConfigObject, JobSpec, Node
from phalanx.spec.status import JobAdmission, JobEvent, JobRecord, JobStatus, StopRequest
from phalanx.store import Store

log = logging.getLogger("phalanx.controller")

ACTIVE = (JobStatus.ADMITTED, JobStatus.STARTING, JobStatus.RUNNING)
CANCELLED, PREEMPTED, FAILED, DEADLINE, LOST = (
    "Cancelled", "Preempted", "Failed", "DeadlineExceeded", "PodsLost",
)


@dataclass(slots=True)
class _Launch:
    spec: JobSpec
    attempt: int
    admission: Admission


class Controller:
    def __init__(
        self,
        store: Store,
        plane: ComputePlane,
        *,
        grace_seconds: float = 10.0,
        tick_seconds: float = 0.2,
        batch_seconds: float = 0.02,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.plane = plane
        self.grace_seconds = grace_seconds
        self.tick_seconds = tick_seconds
        self.batch_seconds = batch_seconds
        self.clock = clock
        self.metrics = Metrics()
        self.started_at = clock()
        self._lock = threading.RLock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.jobs: dict[str, JobRecord] = {}  # every non-terminal job
        # The admitted subset: what the loop walks every step, so a deep queue costs nothing.
        self.active: dict[str, JobRecord] = {}
        self._backoff: dict[str, float] = {}  # queued jobs held until their restart backoff ends
        self._dirty: set[str] = set()
        self._events: list[JobEvent] = []
        self._to_launch: list[_Launch] = []
        self.pods: dict[str, list[PodState]] = {}  # latest observation, current attempts only
        # A plane whose nodes change (a cluster's) counts the changes in
        # ``inventory_generation``; read before the inventory so no change is missed.
        self._inventory_generation: int | None = getattr(plane, "inventory_generation", None)
        self.nodes: list[Node] = plane.inventory()
        # A plane that knows when its pods change (a watch, a timer) wakes the loop right
        # then, instead of leaving the change to the next tick.
        subscribe = getattr(plane, "subscribe", None)
        if callable(subscribe):
            subscribe(self._wake.set)
        stored = store.load_config()
        self.config = stored or QueueConfig.default_for(self.nodes)
        if stored is None:
            store.save_config(self.config)
        self.scheduler = Scheduler(self.config, self.nodes)
        self._recover()

    # ------------------------------------------------------------------ API-facing
    def submit(self, spec: JobSpec) -> JobRecord:
        with self._lock:
            now = self.clock()
            record, event = self._new_job(spec, now)
            self.store.create_job(record, event)
            self.jobs[spec.name] = record
            self.scheduler.submit(spec, priority=record.priority, submitted_at=now)
        self._wake.set()
        return record.model_copy()

    def submit_many(self, specs: list[JobSpec]) -> list[JobRecord]:
        """Submit jobs all or nothing, in one store transaction.

        Every job is checked before any is stored; an error names the job's position
        (``items[i]``) and field, and nothing is submitted.
        """
        with self._lock:
            now = self.clock()
            records, events = [], []
            seen: set[str] = set()
            for i, spec in enumerate(specs):
                if spec.name in seen:
                    raise Conflict(f"the batch names job {spec.name!r} twice",
                                   field=f"items[{i}].name", fix="give every job its own name")
                seen.add(spec.name)
                try:
                    record, event = self._new_job(spec, now)
                except PhalanxError as exc:
                    raise type(exc)(
                        exc.message, fix=exc.fix,
                        field=f"items[{i}]" + (f".{exc.field}" if exc.field else ""),
                    ) from None
                records.append(record)
                events.append(event)
            self.store.create_jobs(records, events)
            for record in records:
                self.jobs[record.name] = record
                self.scheduler.submit(record.spec, priority=record.priority, submitted_at=now)
        self._wake.set()
        return [record.model_copy() for record in records]

    def _new_job(self, spec: JobSpec, now: float) -> tuple[JobRecord, JobEvent]:
        """The record and first event of a job, once it is known to be admissible ever."""
        cq = self.config.cluster_queue_for(spec.queue)
        priority = self.config.priority_value(spec.priority)
        self.scheduler.check_feasible(spec)
        record = JobRecord(
            name=spec.name, spec=spec, queue=spec.queue, cluster_queue=cq.name,
            priority=priority, submitted_at=now, queued_at=now,
            pending_code="Queued", pending_message="waiting for the next scheduling cycle",
        )
        event = JobEvent(job=spec.name, time=now, reason="Submitted",
                         message=f"queued in {spec.queue} (ClusterQueue {cq.name})")
        return record, event

    def cancel(self, name: str) -> JobRecord:
        with self._lock:
            record = self.jobs.get(name)
            if record is None:
                return self.store.get_job(name)  # finished already (or NotFound)
            if not record.cancel_requested:
                record.cancel_requested = True
                self._event(record, "CancelRequested", "cancelled by the user")
                if record.status is JobStatus.QUEUED:
                    self.scheduler.remove(name)
                    self._backoff.pop(name, None)
                    self._finish(record, JobStatus.CANCELLED, "cancelled before it ran")
                else:
                    self._begin_stop(record, CANCELLED, "cancelled by the user")
            self._flush()
        self._wake.set()
        return record.model_copy()

    def get(self, name: str) -> JobRecord:
        with self._lock:
            record = self.jobs.get(name)
            if record is not None:
                return self._view(record)
        return self.store.get_job(name)

    def live(self, names: Iterable[str]) -> dict[str, JobRecord]:
        """Copies of the records of ``names`` that are still active, with current reasons."""
        with self._lock:
            return {name: self._view(record) for name in names
                    if (record := self.jobs.get(name)) is not None}

    def _view(self, record: JobRecord) -> JobRecord:
        """A copy of a live record; a queued job's reason is the scheduler's of this moment.

        Reasons are read, not copied after each cycle: a cycle gives one to whole classes of
        jobs at once, and copying it to every waiting record would cost more than the cycle.
        """
        view = record.model_copy()
        if record.status is JobStatus.QUEUED:
            reason = self.scheduler.pending_reason(record.name)
            # A record that says why it waits outside the scheduler (a backoff) keeps saying so
            # until the scheduler has looked at the job.
            if reason is not None and not (reason.code is PendingCode.QUEUED
                                           and record.pending_code):
                view.pending_code = reason.code.value
                view.pending_message = reason.message
        return view

    def apply_config(self, objects: list[ConfigObject]) -> list[dict[str, str]]:
        with self._lock:
            new = self.config.merged(objects)
            actions = []
            for obj in objects:
                old = self.config._table(obj.kind).get(obj.name)
                action = "created" if old is None else "unchanged" if old == obj else "configured"
                actions.append({"kind": obj.kind, "name": obj.name, "action": action})
            self.store.save_config(new)
            self.config = new
            self.scheduler.set_config(new)
        self._wake.set()
        return actions

    def flush_logs(self) -> None:
        """Wait for the logs of what the plane has reported, if it writes them in the background."""
        flush = getattr(self.plane, "flush_logs", None)
        if callable(flush):
            flush()

    def pods_of(self, name: str) -> list[PodState]:
        with self._lock:
            return list(self.pods.get(name, ()))

    # ------------------------------------------------------------------ the loop
    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="phalanx-controller", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=30)

    def _run(self) -> None:
        while not self._stop.is_set():
            # Cleared before the step, so news during the step wakes the next one at once.
            self._wake.clear()
            try:
                self.step()
            except Exception:  # keep scheduling; the next step re-reads the world
                log.exception("control loop step failed")
            if self._wake.wait(self.tick_seconds) and self.batch_seconds:
                # Woken (a request, pods that ended): let the rest of a burst land so one
                # cycle takes it. Cycles as often as every pod's end would also let small
                # jobs take each freed unit before a big one could ever gather its room.
                self._stop.wait(self.batch_seconds)
        with self._lock:
            self._flush()

    def step(self) -> CycleResult:
        self._sync_nodes()
        observed = self.plane.observe()
        with self._lock:
            now = self.clock()
            self._reconcile(observed, now)
            self._enforce_deadlines(now)
            self._release_backoff(now)
            started = time.perf_counter()
            result = self.scheduler.cycle(now)
            self.metrics.cycle_seconds.observe(time.perf_counter() - started)
            self._apply(result, now)
            self._flush()  # the admissions are stored before any pod starts
            launches, self._to_launch = self._to_launch, []
        # What launching changes (Starting, or a failed launch) is stored by the next step's
        # write: the store then lags memory, which the API reads, by one step at most.
        self._launch_all(launches)
        return result

    def _sync_nodes(self) -> None:
        """Feed the scheduler the nodes that changed since the plane's last inventory."""
        generation = getattr(self.plane, "inventory_generation", None)
        if generation is None or generation == self._inventory_generation:
            return
        nodes = self.plane.inventory()
        with self._lock:
            self._inventory_generation = generation
            old = {n.name: n for n in self.nodes}
            new = {n.name: n for n in nodes}
            for name in old.keys() - new.keys():
                self.scheduler.remove_node(name)
            for name, node in new.items():
                if old.get(name) != node:
                    self.scheduler.upsert_node(node)
            self.nodes = nodes

    def plane_events(self, name: str) -> list[JobEvent]:
        """What the compute plane itself says about the job's pods (a cluster's Events)."""
        read = getattr(self.plane, "pod_events", None)
        return list(read(name)) if callable(read) else []

    def refresh_metrics(self) -> None:
        with self._lock:
            self.metrics.observe_queues(self.scheduler.queue_status())
            self.metrics.observe_nodes(self.nodes)

    # ------------------------------------------------------------------ recovery
    def _recover(self) -> None:
        observed = self.plane.observe()
        by_job = _group(observed)
        now = self.clock()
        active = [s for s in JobStatus if not s.terminal]
        for record in self.store.list_jobs(statuses=active):
            self.jobs[record.name] = record
            if record.status is JobStatus.QUEUED:
                if record.not_before and record.not_before > now:
                    self._backoff[record.name] = record.not_before
                else:
                    self._queue(record)
                continue
            if record.admission is None:  # cannot happen unless the store was edited
                self._requeue(record, now, "admission record missing; queued again")
                continue
            admission = Admission.from_dict(
                record.admission.model_dump(by_alias=True) | {"job": record.name}
            )
            self.active[record.name] = record
            self.scheduler.restore(
                record.spec, priority=record.priority, submitted_at=record.submitted_at,
                admission=admission,
            )
            pods = [p for p in by_job.get(record.name, ()) if p.ref.attempt == record.attempt]
            if record.stop_reason:
                self.plane.terminate(record.name, record.attempt, self.grace_seconds)
            elif record.status is JobStatus.ADMITTED and not pods:
                self._to_launch.append(_Launch(record.spec, record.attempt, admission))
            if pods:
                self._event(record, "Adopted", f"re-adopted {len(pods)} pod(s) of attempt "
                            f"{record.attempt} after a control-plane restart")
        self._flush()
        launches, self._to_launch = self._to_launch, []
        self._launch_all(launches)
        self._flush()

    # ------------------------------------------------------------------ lifecycle
    def _reconcile(self, observed: list[PodState], now: float) -> None:
        by_job = _group(observed)
        current: dict[str, list[PodState]] = {}
        for name, pods in by_job.items():
            record = self.jobs.get(name)
            for pod in pods:
                if record is not None and pod.ref.attempt == record.attempt and (
                    record.status in ACTIVE
                ):
                    current.setdefault(name, []).append(pod)
                elif pod.phase.done:  # an old attempt or a job already settled: tidy up
                    self.plane.forget(pod.ref.job, pod.ref.attempt)
                else:  # an orphan (old attempt, or a job this store does not know)
                    self.plane.terminate(pod.ref.job, pod.ref.attempt, self.grace_seconds)
        self.pods = current
        for record in list(self.active.values()):
            pods = current.get(record.name, [])
            expected = _expected_pods(record)
            status = gang_status(pods, expected)
            if record.stop_reason:
                if not pods or status.all_done:
                    self._finish_stop(record, now)
                continue
            if not pods:
                if record.status is not JobStatus.ADMITTED:
                    self._begin_stop(record, LOST, "the job's processes are gone", "system")
                    self._finish_stop(record, now)
                continue
            if status.phase is GangPhase.FAILED:
                kind = status.failure or "system"
                self._begin_stop(record, FAILED, status.message, kind, status.exit_code)
                if status.all_done:
                    self._finish_stop(record, now)
            elif status.phase is GangPhase.SUCCEEDED:
                self.plane.forget(record.name, record.attempt)
                self.scheduler.remove(record.name)
                record.exit_code = 0
                self._finish(record, JobStatus.SUCCEEDED, f"all {expected} pod(s) succeeded")
            elif status.phase is GangPhase.RUNNING and record.status is not JobStatus.RUNNING:
                record.status = JobStatus.RUNNING
                record.started_at = record.started_at or now
                self._event(record, "Running", f"all {expected} pod(s) running")
            elif status.phase is GangPhase.STOPPED:  # pods stopped without our asking
                self._begin_stop(record, LOST, "the job's pods were stopped", "system")
                self._finish_stop(record, now)

    def _begin_stop(
        self, record: JobRecord, reason: str, message: str,
        failure: str | None = None, exit_code: int | None = None,
    ) -> None:
        if record.stop_reason:
            return
        record.stop_reason = StopRequest.of(reason, failure)
        record.message = message
        if exit_code is not None:
            record.exit_code = exit_code
        warning = reason in (FAILED, PREEMPTED, DEADLINE, LOST)
        self._event(record, reason, message, warning=warning)
        self.plane.terminate(record.name, record.attempt, self.grace_seconds)

    def _finish_stop(self, record: JobRecord, now: float) -> None:
        """The stopping attempt's pods are all gone: settle what happens to the job."""
        stop = record.stop_reason
        reason, failure = (stop.reason, stop.failure) if stop else ("", None)
        self.plane.forget(record.name, record.attempt)
        self.scheduler.remove(record.name)
        record.stop_reason = None
        if reason == CANCELLED or record.cancel_requested:
            self._finish(record, JobStatus.CANCELLED, "cancelled by the user")
        elif reason == DEADLINE:
            self._finish(record, JobStatus.FAILED, record.message)
        elif reason == PREEMPTED:
            record.preemptions += 1
            self._requeue(record, now, f"preempted: {record.message}")
        else:  # Failed or PodsLost: charge the failure to its budget
            decision = restart_decision(
                record.spec.restart, failure or "system", record.user_restarts,
                record.system_restarts,
            )
            record.user_restarts = decision.user_restarts
            record.system_restarts = decision.system_restarts
            if decision.restart:
                self._requeue(record, now, f"{record.message}; {decision.message}",
                              delay=decision.delay)
            else:
                self._finish(record, JobStatus.FAILED, f"{record.message}; {decision.message}")

    def _requeue(self, record: JobRecord, now: float, message: str, delay: float = 0.0) -> None:
        record.status = JobStatus.QUEUED
        self.active.pop(record.name, None)
        record.admission = None
        record.queued_at = now
        record.message = message
        self._event(record, "Requeued", message + (f" (in {delay:g}s)" if delay else ""))
        if delay > 0:
            record.not_before = now + delay
            record.pending_code = "Backoff"
            record.pending_message = f"restarting after a {delay:g}s backoff"
            self._backoff[record.name] = record.not_before
        else:
            record.not_before = None
            self._queue(record)
        self._dirty.add(record.name)

    def _queue(self, record: JobRecord) -> None:
        self.scheduler.submit(
            record.spec, priority=record.priority, submitted_at=record.submitted_at
        )

    def _finish(self, record: JobRecord, status: JobStatus, message: str) -> None:
        record.status = status
        self.active.pop(record.name, None)
        record.finished_at = self.clock()
        record.message = message
        record.pending_code = record.pending_message = None
        self.metrics.jobs_finished.labels(status.value).inc()
        self._event(record, status.value, message, warning=status is JobStatus.FAILED)

    def _enforce_deadlines(self, now: float) -> None:
        for record in list(self.active.values()):
            limit = record.spec.max_runtime
            if limit is None or record.stop_reason or record.status not in ACTIVE:
                continue
            since = record.started_at or record.admitted_at
            if since is not None and now - since > limit:
                self._begin_stop(record, DEADLINE, f"ran longer than maxRuntime ({limit:g}s)")

    def _release_backoff(self, now: float) -> None:
        for name, when in list(self._backoff.items()):
            if when <= now:
                del self._backoff[name]
                record = self.jobs[name]
                record.not_before = None
                record.pending_code = record.pending_message = None  # the scheduler's from now
                self._queue(record)

    def _apply(self, result: CycleResult, now: float) -> None:
        for admission in result.admissions:
            record = self.jobs[admission.job]
            record.status = JobStatus.ADMITTED
            self.active[record.name] = record
            record.attempt += 1
            record.admission = JobAdmission.model_validate(admission.to_dict())
            record.admitted_at = now
            record.cluster_queue = admission.cluster_queue
            record.pending_code = record.pending_message = None
            self.metrics.admission_latency.labels(admission.cluster_queue).observe(
                max(0.0, now - record.queued_at)
            )
            self._event(record, "Admitted", _describe_admission(admission))
            self._to_launch.append(_Launch(record.spec, record.attempt, admission))
        for preemption in result.preemptions:
            victim = self.jobs.get(preemption.victim)
            if victim is None or victim.status not in ACTIVE:
                continue
            self.metrics.preemptions.labels(preemption.reason.value).inc()
            self._begin_stop(victim, PREEMPTED, preemption.message)
        # Pending reasons are not stored: ``_view`` reads them from the scheduler, and the first
        # cycle after a restart works every reason out again.

    def _launch_all(self, launches: list[_Launch]) -> None:
        """Start the pods of each admission, then record in one go how each launch went."""
        if not launches:
            return
        failed: dict[int, Exception] = {}
        for i, launch in enumerate(launches):
            try:
                self.plane.launch(launch.spec, launch.attempt, launch.admission)
            except Exception as exc:  # a launch that fails is a system failure of that attempt
                log.exception("launch of %s failed", launch.spec.name)
                failed[i] = exc
        with self._lock:
            for i, launch in enumerate(launches):
                record = self.jobs.get(launch.spec.name)
                if record is None or record.attempt != launch.attempt:
                    continue
                if i in failed:
                    self._begin_stop(record, FAILED, f"could not start pods: {failed[i]}",
                                     "system")
                elif record.status is JobStatus.ADMITTED:
                    record.status = JobStatus.STARTING
                    self._event(record, "Starting", f"launched {_expected_pods(record)} pod(s) "
                                f"on the {self.plane.name} compute plane")

    # ------------------------------------------------------------------ persistence
    def _event(
        self, record: JobRecord, reason: str, message: str, *, warning: bool = False
    ) -> None:
        self._events.append(JobEvent(
            job=record.name, time=self.clock(), type="Warning" if warning else "Normal",
            reason=reason, message=message,
        ))
        self._dirty.add(record.name)

    def _flush(self) -> None:
        if not self._dirty and not self._events:
            return
        records = [self.jobs[n] for n in sorted(self._dirty) if n in self.jobs]
        self.store.save_jobs(records, self._events)
        self._dirty.clear()
        self._events = []
        for record in records:
            if record.status.terminal:
                del self.jobs[record.name]
                self.pods.pop(record.name, None)

    # ------------------------------------------------------------------ views
    def status(self) -> dict[str, object]:
        return {
            "startedAt": self.started_at,
            "compute": self.plane.name,
            "jobs": self.store.count_jobs_by_status(),
            "nodes": len(self.nodes),
        }

    def require(self, name: str) -> JobRecord:
        record = self.get(name)
        if record is None:
            raise NotFound(f"job {name!r} does not exist", field="name")
        return record


def _group(pods: list[PodState]) -> dict[str, list[PodState]]:
    grouped: dict[str, list[PodState]] = defaultdict(list)
    for pod in pods:
        grouped[pod.ref.job].append(pod)
    return grouped


def _expected_pods(record: JobRecord) -> int:
    if record.admission is None:
        return record.spec.pod_count
    return record.admission.pod_count


def _describe_admission(admission: Admission) -> str:
    parts = []
    for ps in admission.pod_sets:
        flavors = ",".join(sorted(set(ps.flavors.values()))) or "-"
        nodes = sorted(set(ps.nodes))
        shown = ",".join(nodes[:3]) + (f" +{len(nodes) - 3}" if len(nodes) > 3 else "")
        parts.append(f"{ps.name}: {ps.count} pod(s) on {flavors} [{shown}]")
    borrow = " (borrowing from the cohort)" if admission.borrowing else ""
    return f"admitted by ClusterQueue {admission.cluster_queue}{borrow}: " + "; ".join(parts)
