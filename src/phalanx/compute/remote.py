"""The control plane's side of a compute plane reached through a worker: ``RemotePlane``.

The worker (``phalanx.worker``) dials out and reports what its plane has; this object
holds what it last reported (nodes, every pod it knows, placements it refused) and the
desired state it must converge to (attempts to start, attempts to stop, terminal states
the control plane has kept and the worker may drop). The control loop drives it like
any plane: ``launch``/``terminate``/``forget`` change the desired state and wake the
worker's long poll; ``observe`` returns the pods as last reported.

Timers (each strictly later than the one before; every silence clock starts no earlier
than this object, i.e. the control plane's start, so a control plane that was down for
20 minutes finds no cluster lost):

- silent for ``worker_grace``: the plane takes no new placements, its nodes show
  NotReady (unschedulable, with the reason); its jobs run on and keep their quota;
- silent for ``worker_lost_after`` (longer than the worker's ``--fence-after``, the time its
  fence takes to stop the pods and a margin, ``compute/lease.lost_after_needed``; a
  worker that says its fence needs longer, as one may after the control plane restarted
  with a shorter timer, has its plane wait that long instead): the plane is lost, its
  pods read as failed by the system (their jobs are requeued and may run elsewhere) and
  attempts it never started are refused back to pending. A worker that comes back is
  told to stop whatever it still runs of them (the control loop sees old attempts).

Commands in pods (``exec``): the worker dials out for those too. ``exec`` leaves an
``ExecRequest`` for the worker's long poll (``exec_requests``, each handed out once) and
waits: the worker has ``exec_pickup`` seconds to open the session's WebSocket
(``take_exec``), then ``exec_start`` for its plane to start the command (``exec_ready``,
with the worker's end of the command as an ``ExecSession``, or the plane's refusal).
"""

from __future__ import annotations

import logging
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from phalanx.compute.base import (
    CannotTellYet,
    ComputePlane,
    ExecSession,
    PodCredential,
    PodPhase,
    PodRef,
    PodState,
    Refusal,
    check_process_pods,
)
from phalanx.compute.lease import lost_after_needed
from phalanx.compute.remotepools import RemotePools
from phalanx.errors import Conflict, NotFound, PhalanxError, Unavailable
from phalanx.scheduler.types import Admission
from phalanx.spec.planes import (
    AttemptKey,
    DesiredAttempt,
    DesiredState,
    ExecRequest,
    PlaneHello,
    PlaneReport,
    PodReport,
)
from phalanx.spec.resources import JobSpec, Node
from phalanx.spec.status import JobAdmission
from phalanx.store.logs import LogStore

log = logging.getLogger(__name__)

PLANE_LOST = "PlaneLost"
Key = tuple[str, int]
EXEC_PICKUP = 5.0  # seconds the worker has to dial in for a command
EXEC_START = 30.0  # then for its plane to start it (a cluster's pods/exec may take a while)


class PlaneState(StrEnum):
    WAITING = "Waiting"  # no worker has reported since the control plane started
    CONNECTED = "Connected"
    SILENT = "Silent"  # past the grace: no new placements
    LOST = "Lost"  # past worker-lost-after: its jobs were requeued


@dataclass(frozen=True, slots=True)
class PlaneTimers:
    worker_grace: float = 60.0
    worker_lost_after: float = 900.0
    poll_seconds: float = 25.0


@dataclass(slots=True)
class _Exec:
    """A command waiting for the worker: handed out once, taken when the worker dials in,
    then started (``session``) or refused (``error``)."""

    request: ExecRequest
    offered: bool = False
    taken: bool = False
    session: ExecSession | None = None
    error: PhalanxError | None = None


def pod_state(report: PodReport) -> PodState:
    return PodState(
        ref=PodRef(report.job, report.attempt, report.pod_set, report.index, report.rank),
        node=report.node, phase=PodPhase(report.phase), exit_code=report.exit_code,
        signal=report.signal, reason=report.reason, failure=report.failure,
        started_at=report.started_at, finished_at=report.finished_at,
    )


def _pending(wanted: DesiredAttempt) -> list[PodState]:
    """The pods of an attempt sent to the worker that it has not reported yet."""
    pods, rank = [], 0
    for pod_set in wanted.admission.pod_sets:
        for index in range(pod_set.count):
            node = pod_set.nodes[index] if index < len(pod_set.nodes) else ""
            pods.append(PodState(ref=PodRef(wanted.job, wanted.attempt, pod_set.name, index,
                                            rank), node=node, phase=PodPhase.PENDING))
            rank += 1
    return pods


class RemotePlane(ComputePlane):
    """What one worker last reported, and what it must run."""

    name = "remote"
    # The pods are on the worker's network, which only dials out: nothing there is reached
    # from here (the worker's relay carries commands, not HTTP).
    endpoints_reachable = False

    def __init__(self, plane: str, *, timers: PlaneTimers | None = None,
                 logs: LogStore | None = None, clock: Callable[[], float] | None = None,
                 wall: Callable[[], float] | None = None,
                 owns: Callable[[str, int], bool] | None = None) -> None:
        super().__init__()
        self.plane = plane
        # Whether an attempt may be this plane's (False: the job's current attempt is placed
        # on another plane): what a worker reports of anything else is not taken, so a
        # plane's key cannot end, fail or write the logs of a job running elsewhere.
        self.owns = owns
        self._disowned: set[Key] = set()  # (warned about once)
        self.timers = timers or PlaneTimers()
        self.logs = logs
        # The timers run on ``clock``, monotonic, so that a step of the system clock (NTP, a
        # VM resumed) finds no plane lost; ``wall`` dates what is shown (last seen). A clock
        # given alone (tests) drives both.
        self.clock = wall or clock or time.time
        self._tick = clock or time.monotonic
        self.started = self._tick()
        self._heard: float | None = None  # when a hello or a report came, on _tick
        self._changed = threading.Condition()
        self.last_seen: float | None = None
        # A report (not a hello) came since this start: until one does, the plane's pods are
        # unknown, and a job there is not gone for showing none.
        self.reported = False
        self._seq = 0  # the latest report's number
        self.worker: str | None = None
        self.fence_after: float | None = None
        # The shortest lost-after the worker's fence allows, as it last said (kept in the
        # store: a restarted control plane starts from it, for a worker that never reports)
        self.fence_needs = 0.0
        self.compute: str | None = None
        self.cordoned = False  # the whole plane: `phalanx plane cordon/drain`
        self._state = PlaneState.WAITING
        self._nodes: dict[str, Node] = {}
        self._node_cordons: set[str] = set()
        self._pods: dict[Key, list[PodState]] = {}
        self._launches: dict[Key, DesiredAttempt] = {}
        # Pending stand-ins for launched attempts the worker has not reported yet: until it
        # does, "not seen" is "not started yet", never "gone" (a Kubernetes worker takes a
        # few requests to create an attempt's objects).
        self._stops: dict[Key, float] = {}
        self._forget: set[Key] = set()
        self._refused: list[Refusal] = []
        self._version = 0
        self._closed = False  # the control plane is stopping: timers frozen, polls released
        self._execs: dict[str, _Exec] = {}
        self._execs_changed = threading.Condition()
        self.exec_pickup = EXEC_PICKUP
        self.exec_start = EXEC_START
        # Node pools bought for this plane (``remotepools.py``): edits wake the worker's poll.
        self.pools = RemotePools(self._desire_changed)

    def _desire_changed(self) -> None:
        with self._changed:
            self._version += 1
            self._changed.notify_all()

    # ------------------------------------------------------------------ the worker's side
    def _check_worker(self, worker: str | None) -> None:
        """One worker drives a plane: the one that said hello last (or, after a restart of
        the control plane, the first that reports). Any other is told so (409) and stops
        its pods: two workers of one plane would both start what it should run."""
        if worker is not None and self.worker is not None and worker != self.worker:
            raise Conflict(
                f"compute plane {self.plane} is driven by worker {self.worker}, which "
                f"registered after worker {worker}", field="worker",
                fix="run one worker per plane; this one stops its pods")

    def hello(self, hello: PlaneHello) -> None:
        with self._changed:
            if hello.worker != self.worker:
                self._seq = 0  # (a new worker numbers its reports from 1)
            self.worker = hello.worker
            self._fenced_by(hello.fence_after, hello.fence_stops_within)
            self.compute = hello.compute
            self.pools.offered = list(hello.providers)
            self.last_seen = self.clock()
            self._heard = self._tick()
        if self._update_state():
            self._nodes_changed()

    def report(self, report: PlaneReport) -> bool:
        """Take what the worker has now; terminal states it held are kept from here.
        True when the worker should send its nodes (none known since this start)."""
        nodes_changed = False
        with self._changed:
            self._check_worker(report.worker)
            if report.seq and report.worker == self.worker and report.seq <= self._seq:
                # Taken already: the same report sent again because its answer was lost
                # (its logs and refusals are kept once), or one answered late. The worker
                # is there all the same; its pods come with its next report.
                self.last_seen = self.clock()
                self._heard = self._tick()
                # Nodes it carried were not taken: asked for again, with the next number.
                return report.nodes is not None or not self._nodes
            self._seq = report.seq
            self.worker = report.worker
            if report.fence_after is not None:
                self._fenced_by(report.fence_after, report.fence_stops_within or 0.0)
            self.last_seen = self.clock()
            self._heard = self._tick()
            self.reported = True
            self.pools.take(report.pools, report.providers)
            if report.nodes is not None:
                fresh = {n.name: n for n in report.nodes}
                nodes_changed = fresh != self._nodes
                self._nodes = fresh
            pods: dict[Key, list[PodState]] = {}
            for pod in report.pods:
                key = (pod.job, pod.attempt)
                if key in pods or self._owned(key):
                    pods.setdefault(key, []).append(pod_state(pod))
            self._pods = pods
            # Started: the worker's plane keeps the attempt from here (a restarted worker
            # re-lists it), so the desired state it polls stays small.
            for key in pods.keys() & self._launches.keys():
                del self._launches[key]
            # A terminal state the worker no longer reports was dropped: the ack is done.
            self._forget &= pods.keys()
            for refusal in report.refusals:
                key = (refusal.job, refusal.attempt)
                if self._launches.pop(key, None) is not None:
                    self._refused.append(Refusal(refusal.job, refusal.attempt, refusal.reason,
                                                 self.plane, refusal.error, refusal.failure))
                    self._version += 1
                    self._changed.notify_all()
        if self.logs is not None:
            mine = {(p.ref.job, p.ref.name) for group in pods.values() for p in group}
            for chunk in report.logs:
                if (chunk.job, chunk.pod) in mine:
                    self.logs.append(chunk.job, chunk.pod, chunk.data.encode())
        state_changed = self._update_state()
        if nodes_changed or state_changed:
            self._nodes_changed()
        else:
            self._notify()
        return report.nodes is None and not self._nodes

    def _fenced_by(self, fence_after: float, stops_within: float) -> None:
        needs = lost_after_needed(fence_after, stops_within)
        if needs > self.timers.worker_lost_after and needs != self.fence_needs:
            log.warning(
                "the worker of compute plane %s fences its pods after %gs (%gs with their "
                "stop and the margin), longer than --worker-lost-after (%gs): the plane is "
                "lost after %gs of silence instead", self.plane, fence_after, needs,
                self.timers.worker_lost_after, needs)
        self.fence_after, self.fence_needs = fence_after, needs

    @property
    def lost_after(self) -> float:
        """Seconds of silence after which the plane is lost: ``--worker-lost-after``, or
        longer if its worker's fence needs it (no rank may still run when its job is
        requeued)."""
        return max(self.timers.worker_lost_after, self.fence_needs)

    def _owned(self, key: Key) -> bool:
        if self.owns is None or self.owns(*key):
            return True
        if key not in self._disowned:
            if len(self._disowned) > 1000:
                self._disowned.clear()
            self._disowned.add(key)
            log.warning("compute plane %s reported pods of %s attempt %d, which runs on "
                        "another plane: not taken", self.plane, *key)
        return False

    def desired(self, after: int, timeout: float, worker: str | None = None) -> DesiredState:
        """The desired state once its version passes ``after``, or as it is at ``timeout``."""
        deadline = time.monotonic() + timeout
        with self._changed:
            self._check_worker(worker)
            while self._version <= after and not self._closed:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._changed.wait(left)
            return DesiredState(
                version=self._version, attempts=list(self._launches.values()),
                stops=[AttemptKey(job=j, attempt=a, grace=g) for (j, a), g in
                       self._stops.items()],
                forget=[AttemptKey(job=j, attempt=a) for j, a in sorted(self._forget)],
                pools=self.pools.desired(),
            )

    # ------------------------------------------------------------------ state and timers
    @property
    def state(self) -> PlaneState:
        return self._state

    def silent_for(self, now: float | None = None) -> float:
        """Seconds since the worker was last heard, counted from the control plane's start."""
        now = self._tick() if now is None else now
        return now - (self.started if self._heard is None else max(self.started, self._heard))

    def _update_state(self) -> bool:
        """Move between the states the timers say; True when that changed the state."""
        now = self._tick()
        lost_now: list[Refusal] = []
        with self._changed:
            if self._closed:
                # A stopping control plane (draining its connections) judges no plane: the
                # workers cannot reach it, which says nothing about them.
                return False
            silent = self.silent_for(now)
            if silent >= self.lost_after:
                state = PlaneState.LOST
            elif not self.reported:
                # (a hello alone says nothing of the pods: WAITING until the first report)
                state = PlaneState.WAITING
            elif silent < self.timers.worker_grace:
                state = PlaneState.CONNECTED
            else:
                state = PlaneState.SILENT
            if state is self._state:
                return False
            self._state = state
            if state is PlaneState.LOST:
                # Attempts it never started go back to pending; what it runs reads as failed.
                for (job, attempt) in list(self._launches):
                    if (job, attempt) not in self._pods:
                        del self._launches[(job, attempt)]
                        lost_now.append(Refusal(job, attempt, self._lost_reason(silent),
                                                self.plane))
                self._refused.extend(lost_now)
        return True

    def _lost_reason(self, silent: float) -> str:
        return f"compute plane {self.plane} is lost: its worker has been silent for {silent:.0f}s"

    def describe_state(self) -> str:
        silent = self.silent_for()
        if self._state is PlaneState.CONNECTED:
            return "connected"
        if self._state is PlaneState.WAITING or self.last_seen is None:
            return ("waiting for its worker's first report" if self._heard is not None
                    else "waiting for its worker")
        if self._state is PlaneState.SILENT:
            return f"disconnected (silent for {silent:.0f}s)"
        return f"lost (silent for {silent:.0f}s)"

    # ------------------------------------------------------------------ ComputePlane
    def inventory(self) -> list[Node]:
        with self._changed:
            nodes = [n.model_copy(deep=True) for n in self._nodes.values()]
            state, cordoned, cordons = self._state, self.cordoned, set(self._node_cordons)
        not_ready = state in (PlaneState.SILENT, PlaneState.LOST, PlaneState.WAITING)
        for node in nodes:
            if not_ready:
                node.unschedulable = True
                node.health_reasons = [*node.health_reasons,
                                       f"NotReady: compute plane {self.plane} is "
                                       f"{self.describe_state()}"]
            if cordoned:
                node.unschedulable = True
                node.health_reasons = [*node.health_reasons,
                                       f"compute plane {self.plane} is cordoned"]
            if node.name in cordons:
                node.unschedulable = True
        return nodes

    def observe(self) -> list[PodState]:
        if self._update_state():
            self._nodes_changed()
        with self._changed:
            pods = [p for group in self._pods.values() for p in group]
            # Launched but not reported yet: pending, not gone.
            pods += [p for key, wanted in self._launches.items() if key not in self._pods
                     for p in _pending(wanted)]
            lost = self._state is PlaneState.LOST
            reason = self._lost_reason(self.silent_for()) if lost else ""
        if not lost:
            return pods
        return [p if p.phase.done else PodState(
            ref=p.ref, node=p.node, phase=PodPhase.FAILED, reason=PLANE_LOST,
            failure="system", started_at=p.started_at, finished_at=self.clock())
            for p in pods] if reason else pods

    def check_job(self, job: JobSpec) -> None:
        """A worker that runs pods as processes (the local plane) needs every command, as
        that plane does; of a worker not heard from yet, the plane cannot tell."""
        if self.compute is None:
            raise CannotTellYet(f"compute plane {self.plane} has no worker yet", field="queue",
                                fix="wait for its worker, or give what the other planes need")
        if self.compute == "local":
            check_process_pods(job)

    def sees(self, node: str) -> bool:
        """Whether a pod missing from the plane is gone: once the worker has reported since
        this start (the worker re-lists its pods first), or once the plane is lost."""
        return self.reported or self._state is PlaneState.LOST

    def refusals(self) -> list[Refusal]:
        with self._changed:
            taken, self._refused = self._refused, []
        return taken

    def launch(self, job: JobSpec, attempt: int, admission: Admission, *,
               credential: PodCredential | None = None) -> None:
        key = (job.name, attempt)
        with self._changed:
            if key in self._launches or key in self._stops:
                return
            self._launches[key] = DesiredAttempt(
                job=job.name, attempt=attempt, epoch=attempt, spec=job.to_dict(),
                admission=JobAdmission.model_validate(admission.to_dict()),
                credential=credential.key if credential is not None else None,
                secrets=credential.secrets.to_wire()
                if credential is not None and credential.secrets else None)
            self._version += 1
            self._changed.notify_all()

    def terminate(self, job: str, attempt: int, grace_seconds: float = 10.0) -> None:
        key = (job, attempt)
        with self._changed:
            self._launches.pop(key, None)
            if self._stops.get(key) == grace_seconds:
                return
            self._stops[key] = grace_seconds
            self._version += 1
            self._changed.notify_all()

    def forget(self, job: str, attempt: int) -> None:
        key = (job, attempt)
        with self._changed:
            self._launches.pop(key, None)
            self._stops.pop(key, None)
            self._pods.pop(key, None)
            if key not in self._forget:
                self._forget.add(key)
                self._version += 1
                self._changed.notify_all()

    def cordon(self, name: str, unschedulable: bool) -> None:
        with self._changed:
            if unschedulable:
                self._node_cordons.add(name)
            else:
                self._node_cordons.discard(name)
        self._nodes_changed()

    def set_cordoned(self, cordoned: bool) -> None:
        with self._changed:
            changed, self.cordoned = self.cordoned != cordoned, cordoned
        if changed:
            self._nodes_changed()

    def holds(self) -> list[str]:
        """The jobs whose pods it reports, still running or pending."""
        with self._changed:
            return sorted({j for (j, _), pods in self._pods.items()
                           if any(not p.phase.done for p in pods)})

    def close(self) -> None:
        """The control plane is stopping: release the worker's polls and freeze the timers."""
        with self._changed:
            self._closed = True
            self._changed.notify_all()
        with self._execs_changed:
            self._execs_changed.notify_all()

    # ------------------------------------------------------------------ commands in pods
    def exec(self, job: str, pod: str | None, argv: list[str], *, tty: bool = False,
             cols: int = 80, rows: int = 24) -> ExecSession:
        """Have the worker run ``argv`` in the pod; blocks until it runs or is refused."""
        self._check_exec(job, pod)
        pending = _Exec(ExecRequest(session=secrets.token_urlsafe(18), job=job, pod=pod,
                                    argv=argv, tty=tty, cols=cols, rows=rows))
        fix = (f"check that the worker of compute plane {self.plane} runs and is as new as "
               "the control plane (its log says why), then run the command again")
        with self._execs_changed:
            self._execs[pending.request.session] = pending
            self._execs_changed.notify_all()
            try:
                if not self._execs_changed.wait_for(lambda: pending.taken or self._closed,
                                                    self.exec_pickup) or self._closed:
                    raise Unavailable(
                        f"the worker of compute plane {self.plane} did not take the command "
                        f"within {self.exec_pickup:g}s", field="pod", fix=fix)
                if not self._execs_changed.wait_for(
                        lambda: pending.session is not None or pending.error is not None
                        or self._closed, self.exec_start) or self._closed:
                    raise Unavailable(
                        f"compute plane {self.plane} did not start the command within "
                        f"{self.exec_start:g}s", field="pod", fix=fix)
            finally:
                del self._execs[pending.request.session]  # too late for exec_ready from here
        if pending.error is not None:
            raise pending.error
        assert pending.session is not None
        return pending.session

    def _check_exec(self, job: str, pod: str | None) -> None:
        """Refuse at once what the worker could not do: a plane that is not connected, a job
        with no such running pod as last reported (a name the control plane does not know,
        such as a cluster's own pod name, is left to the worker)."""
        if self._state is not PlaneState.CONNECTED:
            raise Unavailable(f"compute plane {self.plane} is {self.describe_state()}: its "
                              "pods take no commands now", field="pod",
                              fix="run the command once its worker is connected again "
                                  "(phalanx plane list)")
        with self._changed:
            running = [p.ref for group in self._pods.values() for p in group
                       if p.ref.job == job and p.phase is PodPhase.RUNNING]
        named = [r for r in running if (pod is None and r.rank == 0)
                 or pod in (str(r.rank), r.name)]
        if not named and (not running or pod is None or pod.isdigit()):
            raise NotFound(
                f"job {job!r} has no running pod {pod if pod is not None else 'of rank 0'}",
                field="pod", fix="name a running pod by rank or name (phalanx describe lists "
                "them), or wait until the job runs")

    def exec_requests(self, timeout: float) -> list[ExecRequest]:
        """Commands not handed out yet (each is, once), waiting up to ``timeout`` for one."""
        with self._execs_changed:
            self._execs_changed.wait_for(
                lambda: self._closed or any(not e.offered for e in self._execs.values()),
                timeout)
            fresh = [e for e in self._execs.values() if not e.offered]
            for pending in fresh:
                pending.offered = True
            return [e.request for e in fresh]

    def take_exec(self, session: str) -> ExecRequest | None:
        """The worker dialed in for ``session``: its request, or None (unknown, timed out or
        taken already)."""
        with self._execs_changed:
            pending = self._execs.get(session)
            if pending is None or pending.taken:
                return None
            pending.taken = True
            self._execs_changed.notify_all()
            return pending.request

    def exec_ready(self, session: str, running: ExecSession | None = None,
                   error: PhalanxError | None = None) -> bool:
        """The worker's plane started the command (``running``) or refused it (``error``).
        False when nobody waits for it any more: the caller ends the command."""
        with self._execs_changed:
            pending = self._execs.get(session)
            if pending is None or not pending.taken or pending.session is not None \
                    or pending.error is not None:
                return False
            pending.session, pending.error = running, error
            if running is None and error is None:
                pending.error = Unavailable("the worker neither ran nor refused the command",
                                            field="pod", fix="see the worker's log")
            self._execs_changed.notify_all()
            return True

