"""The simulated compute plane: declared nodes, pods that run for a set time and end.

Nothing is executed. Each pod of a launched attempt is Running from its launch
until its duration has passed, then Succeeded (exit code 0) or Failed (any other
exit code, a user failure, as a real non-zero exit would be). The pod set's env
says how it behaves:

- ``PHALANX_SIM_DURATION``: how long each pod runs, as a duration ("200ms",
  "1.5s", "2m") or a number of seconds. Without it a pod runs until it is
  terminated, like a server would.
- ``PHALANX_SIM_EXIT_CODE``: the exit code each pod ends with (default 0).

A bad value makes ``launch`` raise SpecError naming ``podSets[i].env.<NAME>``;
the control plane then fails that attempt.

``terminate`` stops the attempt's running pods at once (a simulated program
honours SIGTERM immediately, so the grace period is never needed): they end
Failed with reason "Terminated" and no failure to charge, as on the local plane.

Time comes from ``clock`` (``time.monotonic`` unless one is injected, which
makes tests deterministic); the timestamps pods report are that clock shifted
to epoch seconds. A control plane that ``subscribe``s is called back as soon as
a pod's time is up, so it sees the pod end then rather than at its next tick.

Logs: each pod gets two lines in the LogStore, when it starts and when it ends,
where ``logs_root`` says (the control plane's ``<home>/logs``, from which its
API serves logs); without a ``logs_root`` no log is written. A thread of the
plane's writes them, in order, so that launching a pod never waits on the disk
(a directory and two file opens per pod cost more than the rest of a launch);
``flush_logs`` waits until every line so far is written, and ``close`` does too.

Pods live in memory only: a new plane knows none, so a restarted control plane
finds its running jobs' pods gone and handles them as lost (a system failure,
restarted under the job's budget).
"""

from __future__ import annotations

import heapq
import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from phalanx.compute.base import (
    ComputePlane,
    NodeTable,
    PodCredential,
    PodPhase,
    PodRef,
    PodState,
)
from phalanx.errors import SpecError
from phalanx.kinds import OwnAddressNetwork, framework_of
from phalanx.scheduler.types import Admission
from phalanx.spec.nodes import load_nodes
from phalanx.spec.quantity import MILLI, parse_duration
from phalanx.spec.resources import JobSpec, Node
from phalanx.store.logs import LogStore

log = logging.getLogger("phalanx.compute.simulated")

DURATION_ENV = "PHALANX_SIM_DURATION"
EXIT_CODE_ENV = "PHALANX_SIM_EXIT_CODE"
# Simulated pods have no addresses of their own; the distributed env names their nodes.
MASTER_PORT = 29500
# Pods a simulated node takes when its declaration says none, as a Kubernetes kubelet's
# default --max-pods: every node then bounds the pods a job may ask for.
DEFAULT_MAX_PODS = 110


def with_pod_cap(node: Node) -> Node:
    """``node``, offering ``DEFAULT_MAX_PODS`` pods unless it declares its own ``pods``."""
    if "pods" in node.allocatable:
        return node
    return node.model_copy(update={
        "allocatable": {**node.allocatable, "pods": DEFAULT_MAX_PODS * MILLI}})


@dataclass(slots=True)
class _Pod:
    ref: PodRef
    node: str
    started: float  # plane clock
    ends: float | None  # plane clock; None: runs until terminated
    exit_code: int
    running: PodState
    final: PodState | None = None


@dataclass(slots=True)
class _Behaviour:
    duration: float | None
    exit_code: int


class SimulatedPlane(ComputePlane):
    """Pods that pretend to run on nodes declared in configuration."""

    name = "simulated"

    def __init__(
        self,
        nodes: list[Node],
        *,
        clock: Callable[[], float] = time.monotonic,
        logs_root: Path | None = None,
    ) -> None:
        if not nodes:
            raise SpecError("declares no nodes", field="nodes",
                            fix="give the simulated plane at least one node")
        super().__init__()
        self.nodes = NodeTable([with_pod_cap(n) for n in nodes], self._nodes_changed)
        self.clock = clock
        # Pods report epoch timestamps, like the local plane's, whatever the clock counts.
        self._epoch = time.time() - clock()
        self._logs = _LogWriter(LogStore(logs_root)) if logs_root is not None else None
        self._lock = threading.Lock()
        self._attempts: dict[tuple[str, int], list[_Pod]] = {}
        # Upcoming pod ends (plane clock), for subscribers; stale entries are harmless.
        self._due: list[float] = []
        self._changed = threading.Condition(self._lock)
        self._closed = False
        self._timer: threading.Thread | None = None

    @classmethod
    def from_file(
        cls, path: str | Path, *, clock: Callable[[], float] = time.monotonic,
        logs_root: Path | None = None,
    ) -> SimulatedPlane:
        """A plane with the nodes a YAML file declares (see ``phalanx.spec.nodes``)."""
        return cls(load_nodes(path), clock=clock, logs_root=logs_root)

    # ------------------------------------------------------------------ ComputePlane
    def inventory(self) -> list[Node]:
        return self.nodes.snapshot()

    def upsert_node(self, node: Node) -> None:
        """Add a node or change one (cordon it, change its health or capacity)."""
        self.nodes.upsert(with_pod_cap(node))

    def cordon(self, name: str, unschedulable: bool) -> None:
        self.nodes.cordon(name, unschedulable)

    def remove_node(self, name: str) -> None:
        """The node is gone: its running pods fail as a system failure (``NodeLost``)."""
        if not self.nodes.remove(name):
            return
        with self._lock:
            now = self.clock()
            lost = []
            for pods in self._attempts.values():
                for pod in pods:
                    if pod.node != name or pod.final is not None:
                        continue
                    if pod.ends is not None and pod.ends <= now:
                        self._end(pod)  # it ended before the node went
                    else:
                        pod.final = PodState(
                            ref=pod.ref, node=pod.node, phase=PodPhase.FAILED,
                            reason="NodeLost", failure="system",
                            started_at=pod.started + self._epoch, finished_at=now + self._epoch,
                        )
                    lost.append(pod)
        self._log_ends(lost)
        self._notify()

    def launch(self, job: JobSpec, attempt: int, admission: Admission, *,
               credential: PodCredential | None = None) -> None:
        """Start the attempt's pods now; nothing happens if this attempt was launched before.

        Everything is checked first: a bad admission or env starts nothing. Its pods run
        no command, so ``credential`` goes nowhere.
        """
        with self._lock:
            if (job.name, attempt) in self._attempts:
                return
        behaviour = {p.name: _behaviour(i, p.env) for i, p in enumerate(job.pod_sets)}
        network = OwnAddressNetwork([n for p in admission.pod_sets for n in p.nodes])
        placed = [(p.ref, p.node, p.env)
                  for p in framework_of(job).plan(job, attempt, admission, network)]
        names = self.nodes.names()
        for ref, node, _ in placed:
            if node not in names:
                raise SpecError(
                    f"pod {ref.name} is placed on node {node!r}, which this plane does not have",
                    field="admission.podSets.nodes",
                    fix="admit the job onto nodes the simulated plane's inventory declares",
                )
        with self._lock:
            if (job.name, attempt) in self._attempts:
                return
            now = self.clock()
            pods = []
            for ref, node, _ in placed:
                how = behaviour[ref.pod_set]
                ends = None if how.duration is None else now + how.duration
                running = PodState(ref=ref, node=node, phase=PodPhase.RUNNING,
                                   started_at=now + self._epoch)
                pods.append(_Pod(ref, node, now, ends, how.exit_code, running))
                if self._logs is not None:  # queued under the lock: before the pod's end line
                    runs = "until stopped" if how.duration is None else f"for {how.duration:g}s"
                    self._logs.write(ref, f"simulated pod {ref.name} (attempt {attempt}) "
                                          f"started on node {node}; runs {runs}, then exits "
                                          f"{how.exit_code}")
                if ends is not None and self._listeners:
                    heapq.heappush(self._due, ends)
            self._attempts[(job.name, attempt)] = pods
            if self._listeners:
                self._changed.notify()

    def observe(self) -> list[PodState]:
        with self._lock:
            now = self.clock()
            ended: list[_Pod] = []
            states = []
            for pods in self._attempts.values():
                for pod in pods:
                    if pod.final is None and pod.ends is not None and pod.ends <= now:
                        self._end(pod)
                        ended.append(pod)
                    states.append(pod.final or pod.running)
        self._log_ends(ended)
        return states

    def terminate(self, job: str, attempt: int, grace_seconds: float = 10.0) -> None:
        """Stop the attempt's running pods now; pods that ended already keep their outcome."""
        with self._lock:
            pods = self._attempts.get((job, attempt), [])
            now = self.clock()
            ended = []
            for pod in pods:
                if pod.final is not None:
                    continue
                if pod.ends is not None and pod.ends <= now:
                    self._end(pod)  # its time was up before the request
                else:
                    pod.final = PodState(
                        ref=pod.ref, node=pod.node, phase=PodPhase.FAILED, reason="Terminated",
                        started_at=pod.started + self._epoch, finished_at=now + self._epoch,
                    )
                ended.append(pod)
        self._log_ends(ended)

    def forget(self, job: str, attempt: int) -> None:
        """Drop the attempt (its logs stay); a pod still running is stopped first."""
        with self._lock:
            pods = self._attempts.get((job, attempt))
        if pods is not None:
            if any(p.final is None for p in pods):
                self.terminate(job, attempt, 0.0)
            with self._lock:
                self._attempts.pop((job, attempt), None)

    def subscribe(self, listener: Callable[[], None]) -> None:
        """Call ``listener`` (from a thread of the plane's) each time a pod's time is up."""
        with self._lock:
            self._listeners.append(listener)
            now = self.clock()
            for pods in self._attempts.values():
                for pod in pods:
                    if pod.final is None and pod.ends is not None:
                        heapq.heappush(self._due, max(pod.ends, now))
            if self._timer is None and not self._closed:
                self._timer = threading.Thread(
                    target=self._run_timer, name="phalanx-sim-timer", daemon=True
                )
                self._timer.start()
            self._changed.notify()

    def flush_logs(self) -> None:
        """Wait until every log line so far is written."""
        if self._logs is not None:
            self._logs.flush()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._changed.notify()
            timer, self._timer = self._timer, None
        if timer is not None:
            timer.join(timeout=5)
        if self._logs is not None:
            self._logs.close()

    # ------------------------------------------------------------------ internals
    def _end(self, pod: _Pod) -> None:
        """Settle a pod whose time is up (the lock is held)."""
        assert pod.ends is not None
        ok = pod.exit_code == 0
        pod.final = PodState(
            ref=pod.ref, node=pod.node,
            phase=PodPhase.SUCCEEDED if ok else PodPhase.FAILED,
            exit_code=pod.exit_code, reason="Completed" if ok else "Error",
            failure=None if ok else "user",
            started_at=pod.started + self._epoch, finished_at=pod.ends + self._epoch,
        )

    def _log_ends(self, pods: list[_Pod]) -> None:
        if self._logs is None:
            return
        for pod in pods:
            final = pod.final
            assert final is not None
            ran = max(0.0, (final.finished_at or 0.0) - (final.started_at or 0.0))
            if final.reason == "Terminated":
                self._logs.write(pod.ref, f"terminated after {ran:.3f}s")
            elif final.reason == "NodeLost":
                self._logs.write(pod.ref, f"lost with node {pod.node} after {ran:.3f}s")
            else:
                self._logs.write(pod.ref, f"exited with code {final.exit_code} after {ran:.3f}s")

    def _run_timer(self) -> None:
        with self._lock:
            while not self._closed:
                now = self.clock()
                fire = False
                while self._due and self._due[0] <= now:
                    heapq.heappop(self._due)
                    fire = True
                if fire:
                    listeners = list(self._listeners)
                    self._lock.release()
                    try:
                        for listener in listeners:
                            listener()
                    finally:
                        self._lock.acquire()
                    continue
                timeout = self._due[0] - now if self._due else None
                self._changed.wait(timeout)


class _LogWriter:
    """Appends pods' log lines from a thread of its own, in the order they were queued."""

    def __init__(self, store: LogStore) -> None:
        self.store = store
        self._queue: queue.Queue[tuple[PodRef, str] | None] = queue.Queue()
        self._thread = threading.Thread(target=self._run, name="phalanx-sim-logs", daemon=True)
        self._thread.start()

    def write(self, ref: PodRef, line: str) -> None:
        self._queue.put((ref, line))

    def flush(self) -> None:
        self._queue.join()

    def close(self) -> None:
        if self._thread.is_alive():
            self._queue.put(None)
            self._thread.join(timeout=30)

    def _run(self) -> None:
        while (item := self._queue.get()) is not None:
            try:
                self._append(*item)
            finally:
                self._queue.task_done()
        self._queue.task_done()

    def _append(self, ref: PodRef, line: str) -> None:
        try:
            # Through the LogStore: rotated and time-indexed like every pod's log.
            self.store.append(ref.job, ref.name, (line + "\n").encode())
        except (OSError, SpecError) as exc:  # a log we cannot keep must not stop the pod
            log.warning("cannot keep the log of %s: %s", ref.name, exc)


def _behaviour(index: int, env: dict[str, str]) -> _Behaviour:
    duration: float | None = None
    if DURATION_ENV in env:
        duration = parse_duration(env[DURATION_ENV],
                                  field=f"podSets[{index}].env.{DURATION_ENV}")
    code = 0
    if EXIT_CODE_ENV in env:
        text = env[EXIT_CODE_ENV].strip()
        if not text.isdigit() or int(text) > 255:
            raise SpecError(
                f"{env[EXIT_CODE_ENV]!r} is not an exit code",
                field=f"podSets[{index}].env.{EXIT_CODE_ENV}",
                fix="use a whole number from 0 to 255",
            )
        code = int(text)
    return _Behaviour(duration, code)
