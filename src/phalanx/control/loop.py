"""The control loop: feeds the scheduler core, runs its decisions on a compute plane.

Level-triggered: each step reads the plane (its nodes when they changed, its
pods), then, under the state's lock and without any plane call, moves jobs
through their lifecycle and runs one scheduling cycle. It then stores every
change of the step in one batched write, and only then talks to the plane: stop
and forget what ended, launch what was admitted. So the store always knows first,
and a restart that finds a job's pods still running knows what they belong to.

On start it rebuilds the scheduler's state from the store and re-adopts whatever
the plane is still running, so a restart loses no job and runs nothing twice; a
launch the plane may not have taken yet (admitted, or starting on a worker that has
not reported since) is sent again, as launches are idempotent.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import defaultdict
from collections.abc import Callable

from phalanx.compute.base import ComputePlane, PodCredential, PodState
from phalanx.control.lifecycle import deadline_passed
from phalanx.control.provisioning import ProvisioningController
from phalanx.control.state import (
    ACTIVE,
    DEADLINE,
    FAILED,
    LOST,
    NODE_UNHEALTHY,
    PREEMPTED,
    ControlState,
    Launch,
    PlaneCommand,
)
from phalanx.errors import SpecError, is_no_space
from phalanx.kinds import GangPhase, framework_of
from phalanx.scheduler import Admission, CycleResult
from phalanx.spec.base import validate
from phalanx.spec.config import QueueConfig
from phalanx.spec.quantity import format_quantity
from phalanx.spec.resources import JobSpec, Node, NodeHealth
from phalanx.spec.status import JobAdmission, JobRecord, JobStatus
from phalanx.store.engine import unavailable_reason

log = logging.getLogger("phalanx.controller")
CHECKPOINT_POLL = 5.0  # seconds between two reads of a running job's checkpoint directory

# The credential the pods of a job's attempt call the API with (the server derives
# it); the same answer every time it is asked for the same attempt.
CredentialSource = Callable[[JobRecord, int], PodCredential]


class ControlLoop:
    def __init__(
        self, state: ControlState, plane: ComputePlane, *, grace_seconds: float = 10.0,
        tick_seconds: float = 0.2, batch_seconds: float = 0.02,
        credentials: CredentialSource | None = None,
        provisioning: ProvisioningController | None = None,
    ) -> None:
        """``credentials``: what each launched attempt's pods call the API with (None:
        pods get no credential)."""
        self.state = state
        self.plane = plane
        self.credentials = credentials
        self.provisioning = provisioning  # node pools for held gangs, after each step
        self.grace_seconds = grace_seconds
        self.tick_seconds = tick_seconds
        self.batch_seconds = batch_seconds
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.last_success: float | None = None  # clock of the last step that completed
        self.failures_in_a_row = 0
        self._generation = plane.inventory_generation
        self._checkpoints_read: dict[str, float] = {}  # job -> when its directory was read
        # A plane that knows when its pods or nodes change wakes the loop right then,
        # instead of leaving the change to the next tick.
        plane.subscribe(state.wake.set)

    # ------------------------------------------------------------------ running
    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="phalanx-controller", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self.state.wake.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
        self.state.persist()

    def _run(self) -> None:
        wake = self.state.wake
        while not self._stop.is_set():
            # Cleared before the step, so news during the step wakes the next one at once.
            wake.clear()
            try:
                self.step()
            except Exception as exc:  # keep scheduling; the next step re-reads the world
                self.failures_in_a_row += 1
                self.state.metrics.loop_errors.inc()
                unreachable = unavailable_reason(exc)
                if not is_no_space(exc) and unreachable is None:
                    log.exception("control loop step failed")
                elif self.failures_in_a_row % 100 == 1:  # one line, not one per tick
                    log.error("control loop step failed: %s; nothing is sent to the planes "
                              "until the store takes the step's changes; retried each step",
                              "no space left in the state directory (PHALANX_HOME) for "
                              "the store" if unreachable is None
                              else f"the store is unavailable: {unreachable}")
            else:
                self.failures_in_a_row = 0
                self.last_success = time.monotonic()
            if wake.wait(self.tick_seconds) and self.batch_seconds:
                # Woken (a request, pods that ended): let the rest of a burst land so one
                # cycle takes it. Cycles as often as every pod's end would also let small
                # jobs take each freed unit before a big one could ever gather its room.
                self._stop.wait(self.batch_seconds)

    def step(self) -> CycleResult:
        state = self.state
        self._sync_nodes()
        observed = self.plane.observe()
        with state.lock:
            now = state.clock()
            self._take_refusals(now)  # before: a refused attempt shows no pods, not lost
            self._reconcile(observed, now)
            self._report_checkpoints(now)
            self._stop_on_unhealthy_nodes()
            self._enforce_deadlines(now)
            self._release_backoff(now)
            started = time.perf_counter()
            result = self._cycle(now)
            state.metrics.cycle_seconds.observe(time.perf_counter() - started)
            self._apply(result, now)
        state.persist()  # the admissions are stored before any pod starts
        self.send()
        if self.provisioning is not None:  # provider calls, outside the lock
            self.provisioning.reconcile()
        return result

    def health(self, stale_after: float = 60.0) -> tuple[bool, str]:
        """Whether the loop is stepping: (healthy, a sentence saying why or why not)."""
        if self._thread is None or not self._thread.is_alive():
            return False, "the control loop is not running"
        if self.last_success is None:
            return self.failures_in_a_row == 0, (
                "the control loop has not completed a step yet" + (
                    f"; {self.failures_in_a_row} failed" if self.failures_in_a_row else ""))
        ago = time.monotonic() - self.last_success
        if ago > stale_after:
            return False, (f"the control loop's last step completed {ago:.0f}s ago "
                           f"({self.failures_in_a_row} failed since)")
        return True, f"the control loop's last step completed {ago:.1f}s ago"

    def send(self) -> None:
        """Send the plane what the stored state asks of it: stops, forgets, then launches.

        What launching changes (Starting, or a failed launch) is stored by the next
        write: the store then lags memory, which the API reads, by one step at most.
        """
        with self.state.lock:
            pending = bool(self.state.commands or self.state.launches)
        if pending:  # a replica that no longer leads (store/leases.py) sends nothing
            self.state.store.confirm_lead()
        with self.state.lock:
            commands, launches = self.state.take_commands()
        for command in commands:
            try:
                if command.verb == "terminate":
                    grace = self.grace_seconds if command.grace is None else command.grace
                    self.plane.terminate(command.job, command.attempt, grace)
                elif command.verb == "release":
                    self.plane.release_checkpoints(command.job)
                else:
                    self.plane.forget(command.job, command.attempt)
            except Exception:  # level-triggered: the next observation asks again
                log.exception("could not %s %s (attempt %d)", command.verb, command.job,
                              command.attempt)
        self._launch_all(launches)

    def _sync_nodes(self) -> None:
        """Feed the scheduler the nodes that changed since the plane's last inventory."""
        generation = self.plane.inventory_generation  # before the inventory: no change missed
        if generation == self._generation:
            return
        nodes = self.plane.inventory()
        state = self.state
        with state.lock:
            self._generation = generation
            old = {n.name: n for n in state.nodes}
            new = {n.name: n for n in nodes}
            for name in old.keys() - new.keys():
                state.scheduler.remove_node(name)
            for name, node in new.items():
                # Check results change at every doctor run; the scheduler reads none of them.
                if name not in old or _placement_view(old[name]) != _placement_view(node):
                    state.scheduler.upsert_node(node)
            state.nodes = nodes
            if state.config.follows_nodes:
                self._follow_nodes(nodes)

    def _follow_nodes(self, nodes: list[Node]) -> None:
        """The built-in default configuration, untouched: its quota is what the nodes of
        every plane hold now (a worker that joins adds its nodes). Lock held; stored and set
        together, as an apply does."""
        state = self.state
        config = QueueConfig.default_for(nodes)
        if config == state.config:
            return
        state.store.save_config(config)
        state.config = config
        state.scheduler.set_config(config)
        log.info("the default ClusterQueue follows the nodes: its quota is now %s",
                 ", ".join(f"{q.name}={format_quantity(q.nominal_quota, q.name)}" for g in
                           config.cluster_queues["default"].resource_groups
                           for f in g.flavors for q in f.resources))

    # ------------------------------------------------------------------ recovery
    def recover(self) -> None:
        """Rebuild the scheduler from the store and re-adopt what the plane still runs."""
        state = self.state
        by_job = _group(self.plane.observe())
        with state.lock:
            now = state.clock()
            active = [s for s in JobStatus if not s.terminal]
            gated = []  # never admitted, with dependencies: the gate decides once all are loaded
            for record in state.store.list_jobs(statuses=active):
                state.jobs[record.name] = record
                if record.status is JobStatus.QUEUED and record.spec.depends_on and (
                    record.attempt == 0
                ):
                    gated.append(record)
                    continue
                if record.status is JobStatus.QUEUED:
                    if record.not_before and record.not_before > now:
                        state.backoff[record.name] = record.not_before
                    else:
                        state.queue(record)
                    continue
                if record.admission is None:  # cannot happen unless the store was edited
                    state.requeue(record, now, "admission record missing; queued again")
                    continue
                admission = Admission.from_dict(
                    record.admission.model_dump(by_alias=True) | {"job": record.name})
                state.active[record.name] = record
                state.scheduler.restore(
                    record.spec, priority=record.priority, submitted_at=record.submitted_at,
                    admission=admission, started_at=record.admitted_at,
                )
                pods = [p for p in by_job.get(record.name, ()) if p.ref.attempt == record.attempt]
                if record.stop_reason:  # a stop under way: with the job's own grace
                    state.commands.append(PlaneCommand("terminate", record.name, record.attempt,
                                                       record.spec.termination_grace))
                elif not pods and (record.status is JobStatus.ADMITTED or (
                        record.status is JobStatus.STARTING and not self._seen(record))):
                    # Launched, but a worker that has not reported since this start may not
                    # have taken it: its plane's desired state was lost with the restart.
                    # Sent again (the worker skips an attempt it runs), so that its pods
                    # start, or its refusal is taken, rather than the job read as gone.
                    state.launches.append(Launch(record, record.attempt, admission))
                if pods:
                    state.event(record, "Adopted", f"re-adopted {len(pods)} pod(s) of attempt "
                                f"{record.attempt} after a control-plane restart")
            for record in gated:
                state.enter_gate(record)
        state.persist()
        self.send()
        state.persist()

    # ------------------------------------------------------------------ bad jobs (lock held)
    def _cycle(self, now: float) -> CycleResult:
        """One scheduling cycle; if it fails, fail the queued jobs that no submit would accept
        today and run it again, so one bad record cannot stop every job's admission."""
        state = self.state
        try:
            return state.scheduler.cycle(now)
        except Exception:
            failed = self._fail_inadmissible(now)
            if not failed:
                raise
            log.exception("a scheduling cycle failed; failed the job(s) it could not handle "
                          "(%s) and ran it again", ", ".join(failed))
        # Admissions the failed cycle made are lost with its result: the scheduler gives
        # them back and decides again.
        for name in state.scheduler.admitted_jobs() - state.active.keys():
            if name in state.jobs:
                state.scheduler.requeue(name)
            else:
                state.scheduler.remove(name)
        return state.scheduler.cycle(now)

    def _fail_inadmissible(self, now: float) -> list[str]:
        """Fail every queued job that the submit checks refuse now; their names."""
        state = self.state
        failed = []
        for record in list(state.jobs.values()):
            if record.status is not JobStatus.QUEUED or record.name in state.backoff:
                continue
            try:
                spec = validate(JobSpec, record.spec.to_dict())
                state.scheduler.check_feasible(spec)
            except Exception as exc:  # whatever the check trips on, this job is the fault
                state.scheduler.remove(record.name)
                self._fail_job(record, f"the control plane cannot schedule it: {exc}")
                failed.append(record.name)
        return failed

    def _fail_job(self, record: JobRecord, message: str) -> None:
        """Fail a job the loop cannot handle, for good: no restart would go otherwise.

        Pods it may have are stopped; once they are gone the loop forgets them as those of
        a settled job.
        """
        state = self.state
        if record.name in state.active:
            state.commands.append(PlaneCommand("terminate", record.name, record.attempt))
        state.scheduler.remove(record.name)
        state.backoff.pop(record.name, None)
        record.stop_reason = None
        state.finish(record, JobStatus.FAILED, message)

    # ------------------------------------------------------------------ lifecycle (lock held)
    def _reconcile(self, observed: list[PodState], now: float) -> None:
        state = self.state
        by_job = _group(observed)
        current: dict[str, list[PodState]] = {}
        for name, pods in by_job.items():
            record = state.jobs.get(name)
            settled: dict[int, list[PodState]] = {}
            for pod in pods:
                if record is not None and pod.ref.attempt == record.attempt and (
                    record.status in ACTIVE
                ):
                    current.setdefault(name, []).append(pod)
                else:  # an old attempt, a settled job, or one this store does not know
                    settled.setdefault(pod.ref.attempt, []).append(pod)
            for attempt, its_pods in settled.items():
                if all(p.phase.done for p in its_pods):  # tidy up
                    state.commands.append(PlaneCommand("forget", name, attempt))
                else:  # stop what still runs, with the job's grace, and forget it once gone
                    grace = record.spec.termination_grace if record is not None else None
                    state.commands.append(PlaneCommand("terminate", name, attempt, grace))
        state.pods = current
        for record in list(state.active.values()):
            try:
                self._reconcile_job(record, current.get(record.name, []), now)
            except Exception as exc:  # this job's fault, not the step's: fail it, go on
                log.exception("could not reconcile %s", record.name)
                self._fail_job(record, f"the control plane could not follow its pods: {exc}")

    def _reconcile_job(self, record: JobRecord, pods: list[PodState], now: float) -> None:
        state = self.state
        expected = _expected_pods(record)
        status = framework_of(record.spec).status(record.spec, pods, expected)
        if record.stop_reason:
            if not pods or status.all_done:
                state.finish_stop(record, now)
            return
        if not pods:
            if record.status is not JobStatus.ADMITTED and self._seen(record):
                state.begin_stop(record, LOST, "the job's processes are gone", "system")
                state.finish_stop(record, now)
            return
        if status.phase is GangPhase.FAILED:
            kind = status.failure or "system"
            state.begin_stop(record, FAILED, status.message, kind, status.exit_code)
            if status.all_done:
                state.finish_stop(record, now)
        elif status.phase is GangPhase.SUCCEEDED:
            state.succeed(record, expected, status.message, all_done=status.all_done)
        elif status.phase is GangPhase.RUNNING and record.status is not JobStatus.RUNNING:
            record.status = JobStatus.RUNNING
            # When the last pod started, by the pods' own clock, as ``finish`` takes their end.
            starts = [p.started_at for p in pods if p.started_at is not None]
            record.started_at = record.started_at or (max(starts) if starts else now)
            state.event(record, "Running", f"all {expected} pod(s) running")
        elif status.phase is GangPhase.STOPPED:  # pods stopped without our asking
            state.begin_stop(record, LOST, "the job's pods were stopped", "system")
            state.finish_stop(record, now)

    def _seen(self, record: JobRecord) -> bool:
        """Whether the plane sees every node of the job now: a job on a plane whose worker
        has not reported since this control plane started is not lost for showing no pods."""
        if record.admission is None:
            return True
        return all(self.plane.sees(n) for ps in record.admission.pod_sets for n in ps.nodes)

    def _take_refusals(self, now: float) -> None:
        """A placement the plane refused goes back to pending (not a failure); a launch the
        worker could not make fails the attempt as a local launch failure would."""
        state = self.state
        for refusal in self.plane.refusals():
            record = state.jobs.get(refusal.job)
            if record is None or record.attempt != refusal.attempt or record.stop_reason or (
                    record.status not in (JobStatus.ADMITTED, JobStatus.STARTING)):
                continue
            where = f"compute plane {refusal.plane}" if refusal.plane else "the compute plane"
            if refusal.error:
                state.begin_stop(record, FAILED, f"could not start pods on {where}: "
                                 f"{refusal.reason}", refusal.failure)
                continue
            state.commands.append(PlaneCommand("forget", record.name, record.attempt))
            state.scheduler.remove(record.name)
            state.requeue(record, now, f"{where} refused the placement: {refusal.reason}")

    def _report_checkpoints(self, now: float) -> None:
        """Tell the scheduler when running jobs last saved their work (read from their
        checkpoint directories at most every CHECKPOINT_POLL seconds a job)."""
        state = self.state
        for record in state.active.values():
            if record.status is not JobStatus.RUNNING:
                continue
            if now - self._checkpoints_read.get(record.name, 0.0) < CHECKPOINT_POLL:
                continue
            self._checkpoints_read[record.name] = now
            saved = self.plane.last_checkpoint(record.name)
            # A save before this attempt started is the previous attempt's: its work is in.
            started = record.admitted_at or 0.0
            if saved is not None and saved > started:
                state.scheduler.report_checkpoint(record.name, saved)
        if len(self._checkpoints_read) > 2 * len(state.active) + 64:
            for name in self._checkpoints_read.keys() - state.active.keys():
                del self._checkpoints_read[name]

    def _stop_on_unhealthy_nodes(self) -> None:
        """Stop every gang with a pod on an unhealthy node: a system failure, requeued at once.

        Pods on a lost node cannot stop by themselves: they are deleted without a grace.
        """
        state = self.state
        sick = {n.name: n for n in state.nodes if n.health is NodeHealth.UNHEALTHY}
        if not sick:
            return
        for record in list(state.active.values()):
            if record.stop_reason or record.admission is None:
                continue
            nodes = sorted({n for ps in record.admission.pod_sets for n in ps.nodes} & set(sick))
            if not nodes:
                continue
            node = sick[nodes[0]]
            why = "; ".join(node.health_reasons) or "unhealthy"
            state.begin_stop(record, NODE_UNHEALTHY, f"node {node.name} is unhealthy ({why})",
                             "system", grace=0.0 if node.lost else None)

    def _enforce_deadlines(self, now: float) -> None:
        for record in list(self.state.active.values()):
            limit = record.spec.max_runtime
            if record.stop_reason or record.status not in ACTIVE:
                continue
            if deadline_passed(limit, record.started_at, record.admitted_at, now):
                self.state.begin_stop(record, DEADLINE, f"ran longer than maxRuntime ({limit:g}s)")

    def _release_backoff(self, now: float) -> None:
        state = self.state
        for name, when in list(state.backoff.items()):
            if when <= now:
                del state.backoff[name]
                record = state.jobs[name]
                record.not_before = None
                record.pending_code = record.pending_message = None  # the scheduler's from now
                state.queue(record)

    def _apply(self, result: CycleResult, now: float) -> None:
        state = self.state
        for admission in result.admissions:
            record = state.jobs[admission.job]
            try:
                view = JobAdmission.model_validate(admission.to_dict())
            except Exception as exc:  # this job's fault, not the step's: fail it, go on
                log.exception("could not record the admission of %s", record.name)
                self._fail_job(record, f"the control plane could not record its admission: "
                                       f"{exc}")
                continue
            record.status = JobStatus.ADMITTED
            state.active[record.name] = record
            record.attempt += 1
            record.admission = view
            record.admitted_at = now
            record.cluster_queue = admission.cluster_queue
            record.pending_code = record.pending_message = None
            state.metrics.admission_latency.labels(admission.cluster_queue).observe(
                max(0.0, now - record.queued_at)
            )
            state.event(record, "Admitted", _describe_admission(admission))
            state.launches.append(Launch(record, record.attempt, admission))
        for preemption in result.preemptions:
            victim = state.jobs.get(preemption.victim)
            if victim is None or victim.status not in ACTIVE:
                continue
            state.metrics.preemptions.labels(preemption.reason.value).inc()
            state.begin_stop(victim, PREEMPTED, preemption.message)
        # Pending reasons are not stored: the service reads them from the scheduler, and the
        # first cycle after a restart works every reason out again.

    def _launch_all(self, launches: list[Launch]) -> None:
        """Start the pods of each admission, then record in one go how each launch went.

        A launch sent again after a restart (the record is Starting already) changes no
        record and adds no event; its credential is the key the first launch carried (the
        source answers the same for one attempt), so pods already running keep theirs.
        """
        if not launches:
            return
        failed: dict[int, Exception] = {}
        endpoints: dict[int, dict[str, str]] = {}
        for i, launch in enumerate(launches):
            try:
                if self.credentials is None:
                    self.plane.launch(launch.record.spec, launch.attempt, launch.admission)
                else:
                    self.plane.launch(launch.record.spec, launch.attempt, launch.admission,
                                      credential=self.credentials(launch.record,
                                                                  launch.attempt))
                endpoints[i] = self.plane.endpoints(launch.record.name, launch.attempt)
            except Exception as exc:  # a launch that fails is a system failure of that attempt
                log.exception("launch of %s failed", launch.record.name)
                failed[i] = exc
        state = self.state
        with state.lock:
            for i, launch in enumerate(launches):
                record = state.jobs.get(launch.record.name)
                if record is None or record.attempt != launch.attempt:
                    continue
                if i in failed:
                    # The plane refusing the job's own input is the job's failure; anything
                    # else (the cluster) is the system's and charged to that budget.
                    kind = "user" if isinstance(failed[i], SpecError) else "system"
                    state.begin_stop(record, FAILED, f"could not start pods: {failed[i]}",
                                     kind)
                elif record.status is JobStatus.ADMITTED:
                    record.endpoints = endpoints.get(i, {})
                    record.status = JobStatus.STARTING
                    nodes = [n for ps in launch.admission.pod_sets for n in ps.nodes]
                    where = self.plane.where(nodes[0]) if nodes else self.plane.where("")
                    state.event(record, "Starting", f"launched {_expected_pods(record)} pod(s) "
                                f"on {where}")


def _placement_view(node: Node) -> Node:
    return node.model_copy(update={"checks": []})


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

