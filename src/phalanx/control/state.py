"""What the control plane holds in memory, the transitions of a job, and how they are stored.

``ControlState`` is shared by the API-facing ``JobService`` and the ``ControlLoop``.
One lock guards it, and nothing under that lock waits on a compute plane: a
transition that needs the plane (stop an attempt's pods, drop its bookkeeping)
queues a ``PlaneCommand``, which the loop sends once the change is stored. So an
attempt is never forgotten by the plane before the store says how it ended, and a
slow cluster stalls no API call.

Stores are written outside the lock too. ``persist`` copies the changed records
under the lock and writes the copies under a second lock that only writers take,
so two writes of one record land in the order they were copied.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from phalanx.compute.base import PodState
from phalanx.control.dependencies import WAITING, DependencyGate, GateDecision
from phalanx.control.forecast import RunHistory
from phalanx.control.lifecycle import restart_decision
from phalanx.control.metrics import Metrics
from phalanx.errors import NotFound
from phalanx.scheduler import Admission, Scheduler
from phalanx.spec.config import QueueConfig
from phalanx.spec.resources import JobSpec, Node
from phalanx.spec.status import JobEvent, JobRecord, JobStatus, StartEstimate, StopRequest
from phalanx.store import Store

ACTIVE = (JobStatus.ADMITTED, JobStatus.STARTING, JobStatus.RUNNING)
CANCELLED, PREEMPTED, FAILED, DEADLINE, LOST = (
    "Cancelled", "Preempted", "Failed", "DeadlineExceeded", "PodsLost",
)
# System failures of a node, not of the job: requeued at once, onto other nodes.
NODE_UNHEALTHY, DRAINED = "NodeUnhealthy", "Drained"


@dataclass(frozen=True, slots=True)
class PlaneCommand:
    verb: Literal["terminate", "forget", "release"]  # release: the job's checkpoints
    job: str
    attempt: int
    grace: float | None = None  # None: the job's or the loop's grace; 0 for a lost node


@dataclass(slots=True)
class Launch:
    record: JobRecord
    attempt: int
    admission: Admission


class ControlState:
    def __init__(
        self, store: Store, scheduler: Scheduler, config: QueueConfig, nodes: list[Node],
        *, clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.scheduler = scheduler
        self.config = config
        self.nodes = nodes
        self.clock = clock
        self.metrics = Metrics()
        self.lock = threading.RLock()
        self._persist_lock = threading.Lock()
        self.wake = threading.Event()
        self.jobs: dict[str, JobRecord] = {}  # every non-terminal job
        # The admitted subset: what the loop walks every step, so a deep queue costs nothing.
        self.active: dict[str, JobRecord] = {}
        self.backoff: dict[str, float] = {}  # queued jobs held until their restart backoff ends
        # Jobs being stopped whose next attempt may not start before a time, and why: those
        # of a plane removed by force wait until its fence has surely stopped their pods.
        self.holds: dict[str, tuple[float, str]] = {}
        self.dependencies = DependencyGate()  # queued jobs held until their dependsOn end
        self.pods: dict[str, list[PodState]] = {}  # latest observation, current attempts only
        self.commands: list[PlaneCommand] = []
        self.launches: list[Launch] = []
        self._dirty: set[str] = set()
        self._events: list[JobEvent] = []
        self._writing: list[JobEvent] = []  # events the store is being given right now
        # Finished records on their way to the store: still read from here until stored,
        # so a reader never sees a job go back to its older stored status.
        self.saving: dict[str, JobRecord] = {}
        # Estimated starts (control/estimates.py): run times of finished jobs, the latest
        # forecast (replaced whole, read without the lock) and a counter of stored changes.
        self.history = RunHistory()
        self.estimates: dict[str, StartEstimate] = {}
        self.generation = 0
        # Reservations (a ClusterQueue's reserveAfter) rest on the same expected run times.
        scheduler.set_run_estimator(self.expected_run)

    def expected_run(self, spec: JobSpec, elapsed: float) -> float:
        """A job's whole run in seconds, as estimated starts expect it (forecast.py)."""
        record = self.jobs.get(spec.name)
        user = record.user if record is not None else ""
        return self.history.expected(user, spec.name, spec.queue, spec.max_runtime,
                                     elapsed).seconds

    # ------------------------------------------------------------------ transitions (lock held)
    def event(self, record: JobRecord, reason: str, message: str, *, warning: bool = False) -> None:
        self._events.append(JobEvent(
            job=record.name, time=self.clock(), type="Warning" if warning else "Normal",
            reason=reason, message=message,
        ))
        self._dirty.add(record.name)

    def begin_stop(
        self, record: JobRecord, reason: str, message: str,
        failure: str | None = None, exit_code: int | None = None, *,
        grace: float | None = None,
    ) -> None:
        if record.stop_reason:
            return
        record.stop_reason = StopRequest.of(reason, failure)
        record.message = message
        if exit_code is not None:
            record.exit_code = exit_code
        warning = reason in (FAILED, PREEMPTED, DEADLINE, LOST, NODE_UNHEALTHY, DRAINED)
        self.event(record, reason, message, warning=warning)
        if grace is None:  # the job's own, if it sets one (a drain's --grace comes first)
            grace = record.spec.termination_grace
        self.commands.append(PlaneCommand("terminate", record.name, record.attempt, grace))

    def finish_stop(self, record: JobRecord, now: float) -> None:
        """The stopping attempt's pods are all gone: settle what happens to the job."""
        stop = record.stop_reason
        reason, failure = (stop.reason, stop.failure) if stop else ("", None)
        self.commands.append(PlaneCommand("forget", record.name, record.attempt))
        self.scheduler.remove(record.name)
        record.stop_reason = None
        if reason == CANCELLED or record.cancel_requested:
            self.finish(record, JobStatus.CANCELLED, "cancelled by the user")
        elif reason == DEADLINE:
            self.finish(record, JobStatus.FAILED, record.message)
        elif reason == PREEMPTED:
            record.preemptions += 1
            self.requeue(record, now, f"preempted: {record.message}")
        else:  # Failed or PodsLost: charge the failure to its budget
            decision = restart_decision(
                record.spec.restart, failure or "system", record.user_restarts,
                record.system_restarts,
            )
            record.user_restarts = decision.user_restarts
            record.system_restarts = decision.system_restarts
            # The node failed, not the job: no backoff, the scheduler places it elsewhere.
            delay = 0.0 if reason in (NODE_UNHEALTHY, DRAINED) else decision.delay
            until, why = self.holds.pop(record.name, (0.0, ""))
            if until - now <= delay:
                why = ""  # (its own delay is the longer)
            if decision.restart:
                self.requeue(record, now, f"{record.message}; {decision.message}",
                             delay=max(delay, until - now), why=why)
            else:
                self.finish(record, JobStatus.FAILED, f"{record.message}; {decision.message}")

    def succeed(
        self, record: JobRecord, expected: int, message: str = "", *, all_done: bool = True,
    ) -> None:
        """The job's kind says it succeeded (``message``: how, if not by every pod).

        Pods still running (a Ray cluster's after its entrypoint, MPI workers after the
        launcher) get SIGTERM and the job's grace; the job succeeds and frees its quota
        now, as Kueue frees a finished workload's, and the loop forgets the attempt once
        they are gone (``_reconcile`` tidies up a settled job's pods).
        """
        if all_done:
            self.commands.append(PlaneCommand("forget", record.name, record.attempt))
        else:
            self.commands.append(PlaneCommand("terminate", record.name, record.attempt,
                                              record.spec.termination_grace))
        self.scheduler.remove(record.name)
        record.exit_code = 0
        self.finish(record, JobStatus.SUCCEEDED, message or f"all {expected} pod(s) succeeded")

    def requeue(self, record: JobRecord, now: float, message: str, delay: float = 0.0,
                why: str = "") -> None:
        """Back to the queue; with ``delay``, held that long (``why``: for what, else a
        restart backoff)."""
        record.status = JobStatus.QUEUED
        self.active.pop(record.name, None)
        record.admission = None
        record.endpoints = {}  # the next attempt records its own
        record.queued_at = now
        record.message = message
        self.event(record, "Requeued", message + (f" (in {delay:g}s)" if delay else ""))
        if delay > 0:
            record.not_before = now + delay
            record.pending_code = "Backoff"
            record.pending_message = why or f"restarting after a {delay:g}s backoff"
            self.backoff[record.name] = record.not_before
        else:
            record.not_before = None
            self.queue(record)
        self._dirty.add(record.name)

    def queue(self, record: JobRecord) -> None:
        self.scheduler.submit(
            record.spec, priority=record.priority, submitted_at=record.submitted_at
        )

    def finish(self, record: JobRecord, status: JobStatus, message: str) -> None:
        record.status = status
        self.active.pop(record.name, None)
        # The pods' own end, when they report it: a control plane that was stopped while the
        # job ended must not stretch its run to the moment it looked again.
        ends = [p.finished_at for p in self.pods.get(record.name, ())]
        ended = max(ends) if ends and None not in ends else None  # type: ignore[type-var]
        record.finished_at = ended if ended is not None else self.clock()
        record.message = message
        record.pending_code = record.pending_message = None
        if status is JobStatus.SUCCEEDED and record.started_at is not None:
            self.history.add(record.user, record.queue, record.name,
                             record.finished_at - record.started_at)
        if not record.spec.keeps_checkpoints:
            self.commands.append(PlaneCommand("release", record.name, record.attempt))
        self.metrics.jobs_finished.labels(status.value).inc()
        self.event(record, status.value, message, warning=status is JobStatus.FAILED)
        self._apply_gate(self.dependencies.ended(record, self.jobs.get))

    # ------------------------------------------------------------------ dependencies
    def job_record(self, name: str) -> JobRecord | None:
        """The job ``name``: live from memory, finished from the store, None if there is
        no such job (lock held)."""
        record = self.jobs.get(name) or self.saving.get(name)
        if record is not None:
            return record
        try:
            return self.store.get_job(name)
        except NotFound:
            return None

    def enter_gate(self, record: JobRecord) -> None:
        """Queue a new (or reloaded, never admitted) job, hold it until its dependencies
        end, or fail it (lock held)."""
        decision = self.dependencies.enter(record, self.job_record)
        self._apply_gate([] if decision is None else [decision])

    def _apply_gate(self, decisions: list[GateDecision]) -> None:
        for d in decisions:
            record = d.record
            if d.action == "fail":
                self.finish(record, JobStatus.FAILED, d.message)
            elif d.action == "queue":
                self.queue(record)
            elif d.action == "release":
                record.pending_code = record.pending_message = None
                record.queued_at = self.clock()  # schedulable from now: its admission latency
                self.event(record, "DependenciesMet", f"{d.message}; every dependency is met, "
                           "the job is offered to the scheduler")
                self.queue(record)
            elif d.action == "wait":
                record.pending_code, record.pending_message = WAITING, d.pending
                self.event(record, "Waiting", d.message)
            else:  # progress
                record.pending_message = d.pending
                self.event(record, "DependencyMet", d.message)

    def unsaved_events(self, job: str) -> list[JobEvent]:
        """``job``'s events not yet stored, or being stored (lock held)."""
        return [e for e in (*self._writing, *self._events) if e.job == job]

    def take_commands(self) -> tuple[list[PlaneCommand], list[Launch]]:
        commands, self.commands = self.commands, []
        launches, self.launches = self.launches, []
        return commands, launches

    # ------------------------------------------------------------------ persistence
    def persist(self) -> None:
        """Store every change made so far; takes the lock itself (call it without)."""
        with self._persist_lock:
            with self.lock:
                if not self._dirty and not self._events:
                    return
                names = sorted(n for n in self._dirty if n in self.jobs)
                records = [self.jobs[n].model_copy() for n in names]
                events, self._events = self._events, []
                self._writing = events
                self.generation += 1
                self._dirty.clear()
                for record in records:
                    if record.status.terminal:
                        del self.jobs[record.name]
                        self.pods.pop(record.name, None)
                        self.saving[record.name] = record
            try:
                self.store.save_jobs(records, events)
            except BaseException:
                with self.lock:  # nothing is lost: the next write tries again
                    self._writing = []
                    for record in records:
                        if self.saving.pop(record.name, None) is not None:
                            self.jobs.setdefault(record.name, record)
                    self._dirty.update(r.name for r in records)
                    self._events[:0] = events
                raise
            with self.lock:
                self._writing = []
                for record in records:
                    self.saving.pop(record.name, None)
