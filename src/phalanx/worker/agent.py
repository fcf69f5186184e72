"""The worker loop: report the plane, take the desired state, converge, fence.

Three threads: the reporter sends what the plane has (pods, nodes when they changed or
the control plane asks, new log output) every ``report_interval`` seconds and as soon
as the plane says its pods changed; the poller long-polls the desired state and
converges the plane to it (start the attempts it lists and does not run, refuse those
placed on nodes it no longer has, stop and forget what it is told); the third takes
commands to run in its pods (``phalanx exec``, see ``execs.py``). It never stops a pod
the control plane did not name, except at the fence:

- every hello or report the control plane takes renews the lease to ``now + fence_after``; the
  fence inside the cluster (the local pods' supervisors) stops the pods once it lapses,
  even if this process was killed;
- this process stops its own pods after ``fence_after`` without an answer.

Reconnecting backs off exponentially, capped at a tenth of ``fence_after`` (5 s at most),
well below the fence, so a short blip neither fences pods nor lets the plane look silent.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from phalanx.compute.base import AttemptSecrets, ComputePlane, PodCredential, PodState
from phalanx.compute.lease import PlaneLease, fence_grace, fence_step, lost_after_needed
from phalanx.compute.terms import TermGate
from phalanx.errors import Conflict, PhalanxError, SpecError
from phalanx.scheduler.types import Admission
from phalanx.spec.base import validate
from phalanx.spec.planes import (
    DesiredState,
    LogChunk,
    PlacementRefusal,
    PlaneHello,
    PlaneReport,
    PlaneWelcome,
    PodReport,
)
from phalanx.spec.resources import JobSpec
from phalanx.spec.sources import WorkdirArchive
from phalanx.store.logs import LogStore
from phalanx.store.workdirs import MAX_ARCHIVE_BYTES
from phalanx.version import __version__
from phalanx.worker.client import PlaneClient
from phalanx.worker.execs import ExecRelay
from phalanx.worker.pools import WorkerPools, offered_providers

log = logging.getLogger("phalanx.worker")

IDENTITY_FILE = "worker.json"
OFFSETS_FILE = "log-offsets.json"
TERM_FILE = "leader-term"
LOG_CHUNK = 256 * 1024  # most output of one pod sent in one report
# Most output of all pods in one report: well under the API's body limit (16 MiB by
# default), so that a backlog after a disconnect never makes a report that always fails.
REPORT_LOG_BUDGET = 4 * 1024 * 1024
CONVERGE_WAIT = 60.0  # the longest a stopping worker waits for a converge under way


@dataclass(slots=True)
class WorkerOptions:
    fence_after: float = 600.0
    report_interval: float = 1.0
    poll_seconds: float = 25.0
    compute: str = "local"

    @property
    def backoff_cap(self) -> float:
        return fence_step(self.fence_after)


@dataclass(slots=True)
class _Outbox:
    """A numbered report's logs and refusals, kept until the control plane answers it.

    A report whose answer is lost may still have been taken: sent again under the same
    number (with the plane's pods as they are now), the control plane takes its logs and
    refusals once, so no log line is kept twice."""

    seq: int
    logs: list[LogChunk]
    offsets: dict[str, int]  # the log offsets once these logs are taken
    refusals: list[PlacementRefusal]


@dataclass(slots=True)
class _Contact:
    """When the control plane last answered (monotonic), and whether the fence acted."""

    last: float = field(default_factory=time.monotonic)
    fenced: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)


def pod_report(pod: PodState) -> PodReport:
    ref = pod.ref
    return PodReport(job=ref.job, attempt=ref.attempt, pod_set=ref.pod_set, index=ref.index,
                     rank=ref.rank, node=pod.node, phase=pod.phase.value,
                     exit_code=pod.exit_code, signal=pod.signal, reason=pod.reason,
                     failure=pod.failure, started_at=pod.started_at,
                     finished_at=pod.finished_at)


class Worker:
    def __init__(self, plane: ComputePlane, client: PlaneClient, state_dir: Path,
                 options: WorkerOptions, *, lease: PlaneLease | None = None,
                 logs: LogStore | None = None, pools: WorkerPools | None = None) -> None:
        self.plane = plane
        # The node pools it buys on its plane for the control plane (``pools.py``).
        self.pools = pools if pools is not None else WorkerPools(
            offered_providers(plane, options.compute))
        self.client = client
        self.state_dir = Path(state_dir)
        self.options = options
        self.lease = lease
        self.logs = logs
        self.id = uuid.uuid4().hex[:12]
        self.contact = _Contact()
        self.stop = threading.Event()
        self.superseded: Conflict | None = None  # why it stopped, if another worker took over
        self._changed = threading.Event()
        self._handled: set[tuple[str, int]] = set()  # launches done or refused
        self._refused: dict[tuple[str, int], PlacementRefusal] = {}  # still listed
        self._refusals: list[PlacementRefusal] = []
        self._refusals_lock = threading.Lock()
        self._sent_generation = -1
        self._seq = 0  # reports sent (numbered, so that a late one is not taken as new)
        self._outbox: _Outbox | None = None  # the report not answered yet
        self._converging = threading.Lock()  # held while the plane converges
        self._nodes_wanted = True
        self._offsets: dict[str, int] = self._load_offsets()
        self.terms = TermGate(self.state_dir / TERM_FILE)
        plane.subscribe(self._changed.set)

    # ------------------------------------------------------------------ running
    def run(self) -> None:
        """Until ``stop`` is set: register, then report, poll and take commands on three
        threads."""
        self._register()
        poller = threading.Thread(target=self._or_stop, args=(self._poll_loop,),
                                  name="phalanx-worker-poll", daemon=True)
        poller.start()
        execs = ExecRelay(self.plane, self.client, self.stop,
                          poll_seconds=self.options.poll_seconds,
                          backoff_cap=self.options.backoff_cap)
        threading.Thread(target=execs.run, name="phalanx-worker-exec", daemon=True).start()
        self._or_stop(self._report_loop)
        # Not waiting out the poller's long poll (a stop would take up to its 25 s): only a
        # converge under way, and none starts from here (a launch cut halfway would leave
        # pods the plane does not know of).
        if self._converging.acquire(timeout=CONVERGE_WAIT):
            self._converging.release()  # (a converge or stop after this sees ``stop``)

    def _or_stop(self, loop: Callable[[], None]) -> None:
        """Run one of the worker's loops; one that ends on an error it could not handle
        stops the whole worker, so that its lease lapses and the fence stops the pods
        (a worker that reports but no longer converges must not look alive)."""
        try:
            loop()
        except BaseException:
            if self.stop.is_set():  # (stopping: its client may be closed under it)
                log.debug("the worker's %s ended while stopping", threading.current_thread().name,
                          exc_info=True)
                return
            log.exception("the worker's %s stopped on an error: stopping the worker",
                          threading.current_thread().name)
            self.stop.set()
            raise

    def _register(self) -> PlaneWelcome:
        delay = 0.2
        while not self.stop.is_set():
            sent = (time.monotonic(), time.time())
            try:
                welcome = self.client.hello(PlaneHello(
                    worker=self.id, compute=self.options.compute,
                    fence_after=self.options.fence_after,
                    fence_stops_within=self.stops_within, version=__version__,
                    providers=self.pools.offered))
            except SpecError:
                raise  # refused for good (a fence the control plane does not accept)
            except PhalanxError as exc:
                log.warning("cannot register with the control plane: %s", exc)
                self._check_fence()
                self.stop.wait(delay)
                delay = min(delay * 2, self.options.backoff_cap)
                continue
            self._check_identity(welcome)
            self._contacted(sent)
            needed = lost_after_needed(self.options.fence_after, self.stops_within)
            if welcome.worker_lost_after <= needed:
                log.warning("the control plane requeues this plane's jobs after %gs, not later "
                            "than this worker's fence and its margin (%gs)",
                            welcome.worker_lost_after, needed)
            self.options.poll_seconds = min(self.options.poll_seconds, welcome.poll_seconds)
            log.info("registered compute plane %s with control plane %s", welcome.plane,
                     welcome.control_plane)
            return welcome
        raise Conflict("stopped before registering", fix="start the worker again")

    @property
    def stops_within(self) -> float:
        """How long the plane's fence takes to stop every pod once the lease lapsed."""
        return self.lease.stops_within if self.lease is not None else 0.0

    def _check_identity(self, welcome: PlaneWelcome) -> None:
        """A state directory serves one plane of one control plane: a worker acts only on
        its own pods, never on a same-named pod of someone else's."""
        path = self.state_dir / IDENTITY_FILE
        mine = {"controlPlane": welcome.control_plane, "plane": welcome.plane}
        try:
            known = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            known = None
        if known is None:
            path.write_text(json.dumps(mine) + "\n", encoding="utf-8")
            return
        if known != mine:
            self.stop.set()
            raise Conflict(
                f"the state directory {self.state_dir} belongs to compute plane "
                f"{known.get('plane')} of control plane {known.get('controlPlane')}",
                field="--state-dir", fix="give each plane and control plane its own --state-dir")

    def _contacted(self, sent: tuple[float, float]) -> None:
        """The control plane took a hello or a report sent at ``sent`` (monotonic, wall):
        renew the lease from then. Only those count, as only those reset the control
        plane's silence clock: a worker whose reports fail while its long polls succeed
        must fence itself before the plane is found lost. From the sending, not the
        answer: the control plane heard it after that, however slow the answer was, so
        the fence never ends later than its silence clock says."""
        with self.contact.lock:  # (one renewal at a time)
            self.contact.last = max(self.contact.last, sent[0])
            self.contact.fenced = False
            if self.lease is not None:
                try:
                    self.lease.renew(sent[1] + self.options.fence_after)
                except Exception as exc:  # the fence will stop the pods: say why, go on
                    log.error("cannot renew the lease at %s: %s", self.lease.where, exc)

    def _superseded(self, exc: Conflict) -> None:
        """Another worker drives this plane now: stop every pod at once and end."""
        with self._converging:  # (the worker ends once this is done, not before)
            if self.stop.is_set():
                return
            self.superseded = exc
            self.stop.set()
            running = {(p.ref.job, p.ref.attempt) for p in self.plane.observe()
                       if not p.phase.done}
            log.error("%s: stopping %d attempt(s) and this worker", exc, len(running))
            for job, attempt in sorted(running):
                try:
                    self.plane.terminate(job, attempt, fence_grace(self.options.fence_after))
                except Exception:  # the others still go; the fence stops this one
                    log.exception("could not stop %s attempt %d", job, attempt)

    def _check_fence(self) -> None:
        """Without the control plane for ``fence_after``: stop every pod of this plane."""
        with self.contact.lock:
            silent = time.monotonic() - self.contact.last
            if silent < self.options.fence_after or self.contact.fenced:
                return
            self.contact.fenced = True
        running = {(p.ref.job, p.ref.attempt) for p in self.plane.observe() if not p.phase.done}
        log.warning("no answer from the control plane for %.0fs: stopping %d attempt(s) at "
                    "the fence", silent, len(running))
        for job, attempt in sorted(running):
            self.plane.terminate(job, attempt, fence_grace(self.options.fence_after))

    # ------------------------------------------------------------------ reporting
    def _report_loop(self) -> None:
        delay = 0.2
        while not self.stop.is_set():
            self._changed.clear()
            try:
                self._report()
            except Conflict as exc:
                self._superseded(exc)
                return
            except Exception as exc:  # (the plane's own errors too: its API, its files)
                log.warning("cannot report to the control plane: %s", exc,
                            exc_info=not isinstance(exc, PhalanxError))
                self._check_fence()
                self.stop.wait(delay)
                delay = min(delay * 2, self.options.backoff_cap)
                continue
            delay = 0.2
            self._check_fence()
            if self._changed.wait(self.options.report_interval):
                self.stop.wait(0.02)  # let a burst of pod changes land in one report

    def _report(self) -> None:
        pools = self.pools.report()  # (first: a pool that came up adds its nodes now)
        generation = self.plane.inventory_generation
        send_nodes = self._nodes_wanted or generation != self._sent_generation
        nodes = self.plane.inventory() if send_nodes else None
        pods = self.plane.observe()
        outbox = self._outbox
        if outbox is None:
            chunks, offsets = self._new_output(pods)
            with self._refusals_lock:
                refusals, self._refusals = self._refusals, []
            self._seq += 1
            outbox = self._outbox = _Outbox(self._seq, chunks, offsets, refusals)
        report = PlaneReport(worker=self.id, seq=outbox.seq, nodes=nodes,
                             pods=[pod_report(p) for p in pods], refusals=outbox.refusals,
                             logs=outbox.logs, fence_after=self.options.fence_after,
                             fence_stops_within=self.stops_within,
                             providers=self.pools.offered, pools=pools)
        sent = (time.monotonic(), time.time())
        ack = self.client.report(report)  # (on an error the outbox goes again, as it is)
        self._outbox = None
        self._contacted(sent)
        if send_nodes:
            self._sent_generation = generation
        self._nodes_wanted = ack.nodes_wanted
        if outbox.offsets != self._offsets:
            self._offsets = outbox.offsets
            self._save_offsets()

    def _new_output(self, pods: list[PodState]) -> tuple[list[LogChunk], dict[str, int]]:
        """Output written to the pods' logs since the last report, and the offsets after it."""
        offsets = dict(self._offsets)
        if self.logs is None:
            return [], offsets
        chunks = []
        budget = REPORT_LOG_BUDGET
        for pod in pods:
            if budget <= 0:  # the rest goes with the next report, sent at once
                self._changed.set()
                break
            key = f"{pod.ref.job}/{pod.ref.name}"
            path = self.logs.path(pod.ref.job, pod.ref.name)
            try:
                size = path.stat().st_size
            except OSError:
                continue
            start = offsets.get(key, 0)
            if size < start:  # rotated: its start went into a kept segment
                start = 0
            if size == start:
                continue
            with path.open("rb") as handle:
                handle.seek(start)
                data = whole_characters(handle.read(min(LOG_CHUNK, budget)))
            if not data:
                continue
            budget -= len(data)
            offsets[key] = start + len(data)
            chunks.append(LogChunk(job=pod.ref.job, pod=pod.ref.name,
                                   data=data.decode("utf-8", errors="replace")))
        known = {f"{p.ref.job}/{p.ref.name}" for p in pods}
        return chunks, {k: v for k, v in offsets.items() if k in known}

    def _load_offsets(self) -> dict[str, int]:
        try:
            data = json.loads((self.state_dir / OFFSETS_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return {str(k): int(v) for k, v in data.items()} if isinstance(data, dict) else {}

    def _save_offsets(self) -> None:
        path = self.state_dir / OFFSETS_FILE
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self._offsets), encoding="utf-8")
        os.replace(tmp, path)

    # ------------------------------------------------------------------ converging
    def _poll_loop(self) -> None:
        version, delay = -1, 0.2
        while not self.stop.is_set():
            try:
                desired = self.client.desired(version, self.options.poll_seconds, self.id)
            except Conflict as exc:
                self._superseded(exc)
                return
            except PhalanxError as exc:
                log.warning("cannot read the desired state: %s", exc)
                self.stop.wait(delay)
                delay = min(delay * 2, self.options.backoff_cap)
                version = -1  # the control plane may have restarted: take it whole again
                continue
            delay = 0.2
            if not self.terms.admits(desired.term):
                log.warning("not acting on a desired state of term %s: a leader of term %d "
                            "has answered since (the replica that answered no longer leads)",
                            desired.term, self.terms.term)
                version = -1  # take the new leader's whole, as after an error
                self.stop.wait(delay)
                continue
            # (no renewal here: the lease follows the control plane's silence clock, which
            # only a hello or a report resets; see _contacted)
            # Taken whole (after an error, or from a restarted control plane): what it lists
            # it may have asked for before, and a refusal of it may not have reached it.
            fresh = version == -1 or desired.version < version
            try:
                with self._converging:
                    if self.stop.is_set():
                        return
                    self.converge(desired, fresh=fresh)
            except Exception:  # the plane's fault (its API, a file): try it whole again
                log.exception("could not converge to desired state %d", desired.version)
                version = -1
                self.stop.wait(delay)
                continue
            version = desired.version

    def converge(self, desired: DesiredState, *, fresh: bool = False) -> None:
        """Start what ``desired`` lists and this plane neither runs nor refused, stop and
        forget what it says. An attempt launched once is never launched again (its pods
        are known, or gone for good). One refused stays refused while the control plane
        lists it; with ``fresh`` the refusal goes again, since the control plane may never
        have taken it (it restarted, or the answer was lost)."""
        pods = self.plane.observe()
        known = {(p.ref.job, p.ref.attempt) for p in pods}
        names = {n.name for n in self.plane.inventory()}
        listed = {(a.job, a.attempt) for a in desired.attempts}
        for key in [k for k in self._refused if k not in listed]:  # taken, or not wanted
            del self._refused[key]
            self._handled.discard(key)
        for attempt in desired.attempts:
            key = (attempt.job, attempt.attempt)
            if key in known:
                continue
            if key in self._handled:
                refused = self._refused.get(key)
                if fresh and refused is not None:
                    self._send_refusal(refused)
                continue
            self._handled.add(key)
            nodes = {n for ps in attempt.admission.pod_sets for n in ps.nodes}
            missing = sorted(nodes - names)
            if missing:
                self._refuse(attempt.job, attempt.attempt,
                             f"node(s) {', '.join(missing[:3])} are no longer in this plane")
                continue
            try:
                spec = validate(JobSpec, attempt.spec)
                admission = Admission.from_dict(
                    attempt.admission.model_dump(by_alias=True) | {"job": attempt.job})
                # The pods call the control plane where this worker reaches it.
                credential = (PodCredential(api_url=self.client.url, key=attempt.credential,
                                            secrets=AttemptSecrets.from_wire(attempt.secrets))
                              if attempt.credential else None)
                self._fetch_workdir(spec)
                self.plane.launch(spec, attempt.attempt, admission, credential=credential)
            except SpecError as exc:
                self._refuse(attempt.job, attempt.attempt, str(exc), error=True, user=True)
            except Exception as exc:  # the cluster's fault: a system failure of the attempt
                log.exception("launch of %s failed", attempt.job)
                self._refuse(attempt.job, attempt.attempt, str(exc), error=True)
        for stop in desired.stops:
            self.plane.terminate(stop.job, stop.attempt,
                                 10.0 if stop.grace is None else stop.grace)
        for gone in desired.forget:
            self.plane.forget(gone.job, gone.attempt)
            self._handled.discard((gone.job, gone.attempt))
        self.pools.converge(desired.pools)
        store = self.plane.workdir_archives
        if store is not None:  # no copy of a team's code outlives the attempts that need it
            store.prune(a.spec["workdir"].get("sha256") for a in desired.attempts
                        if isinstance(a.spec.get("workdir"), dict))
        self._changed.set()

    def _fetch_workdir(self, spec: JobSpec) -> None:
        """The job's workdir archive, fetched by hash into the plane's store when its pods
        unpack it here and it is not there yet (it travels as the desired state does)."""
        store = self.plane.workdir_archives
        if store is not None and isinstance(spec.workdir, WorkdirArchive) \
                and not store.has(spec.workdir.sha256):
            self.client.fetch_workdir(spec.workdir.sha256, store, MAX_ARCHIVE_BYTES)

    def _refuse(self, job: str, attempt: int, reason: str, *, error: bool = False,
                user: bool = False) -> None:
        refusal = PlacementRefusal(job=job, attempt=attempt, reason=reason, error=error,
                                   failure="user" if user else "system")
        self._refused[(job, attempt)] = refusal
        self._send_refusal(refusal)

    def _send_refusal(self, refusal: PlacementRefusal) -> None:
        with self._refusals_lock:
            if refusal not in self._refusals:
                self._refusals.append(refusal)
        self._changed.set()


def whole_characters(data: bytes) -> bytes:
    """``data`` without a UTF-8 character cut short at its end (the rest of it comes with
    the next read), so that no character is lost between two reports."""
    for back in range(1, min(4, len(data)) + 1):
        byte = data[-back]
        if byte & 0xC0 != 0x80:  # not a continuation byte: the last character starts here
            need = (2 if byte >> 5 == 0b110 else 3 if byte >> 4 == 0b1110
                    else 4 if byte >> 3 == 0b11110 else 1)
            return data if back >= need else data[:-back]
    return data
