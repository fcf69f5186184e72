"""The compute planes behind this control plane: the registry ``phalanx plane`` manages.

Each registered plane is a ``RemotePlane`` member of the control loop's ``PlaneSet``,
created at start for every plane in the store (its silence clock starting then) and when
``phalanx plane add`` registers one. Its key is an API key of scope ``plane:<name>``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from functools import partial

from phalanx.compute.base import ComputePlane
from phalanx.compute.federation import PlaneSet
from phalanx.compute.remote import PlaneState, PlaneTimers, RemotePlane
from phalanx.control.service import JobService
from phalanx.control.state import DRAINED, ControlState
from phalanx.errors import Conflict, NotFound, SpecError
from phalanx.spec.planes import LOCAL_PLANE, PLANE_LABEL, PlanePhase, PlaneView, check_plane_name
from phalanx.spec.resources import Node
from phalanx.spec.status import JobRecord
from phalanx.store.identity import AuditEntry
from phalanx.store.logs import LogStore
from phalanx.store.planes import PlaneStore, RegisteredPlane

SEEN_WRITE_EVERY = 30.0  # seconds between two writes of a plane's last-seen time


def check_timers(timers: PlaneTimers) -> None:
    """Each step strictly later than the one before."""
    if timers.worker_grace <= 0:
        raise SpecError("must be more than 0", field="--worker-grace", fix="write e.g. 60s")
    if timers.worker_lost_after <= timers.worker_grace:
        raise SpecError(
            f"--worker-lost-after ({timers.worker_lost_after:g}s) must be longer than "
            f"--worker-grace ({timers.worker_grace:g}s)", field="--worker-lost-after",
            fix="give a longer --worker-lost-after (the default is 15m)")


class PlaneRegistry:
    def __init__(self, planes: PlaneSet, store: PlaneStore, *, timers: PlaneTimers,
                 logs: LogStore | None = None) -> None:
        check_timers(timers)
        self.planes = planes
        self.store = store
        self.timers = timers
        self.logs = logs
        self._lock = threading.Lock()
        self._seen_written: dict[str, float] = {}
        self._needs_written: dict[str, float] = {}
        for registered in store.list():
            self._join(registered)

    def _join(self, registered: RegisteredPlane) -> RemotePlane:
        remote = RemotePlane(registered.name, timers=self.timers, logs=self.logs,
                             owns=partial(self.planes.owns, registered.name))
        remote.set_cordoned(registered.cordoned or registered.draining)
        if registered.fence_needs:
            remote.fence_needs = registered.fence_needs
        self.planes.add(registered.name, remote)
        return remote

    def remote(self, name: str) -> RemotePlane:
        plane = self.planes.member(name)
        if not isinstance(plane, RemotePlane):
            raise NotFound(f"no compute plane {name!r} dials in", field="name",
                           fix="register it with `phalanx plane add NAME --key-file FILE`")
        return plane

    def heard(self, name: str) -> None:
        """Keep the store's last-seen time roughly current (for display), and what the
        worker's fence needs as soon as that changes (a restart must wait as long)."""
        now = time.time()
        needs = self.remote(name).fence_needs or None
        with self._lock:
            changed = needs is not None and needs != self._needs_written.get(name)
            if not changed and now - self._seen_written.get(name, 0.0) < SEEN_WRITE_EVERY:
                return
            self._seen_written[name] = now
            if needs is not None:
                self._needs_written[name] = needs
        self.store.seen(name, now, needs)

    def stopping(self) -> None:
        """The control plane is stopping: release the workers' polls, freeze their timers."""
        for name in self.planes.names():
            plane = self.planes.member(name)
            if isinstance(plane, RemotePlane):
                plane.close()

    # ------------------------------------------------------------------ admin
    def add(self, name: str, audit: AuditEntry) -> RemotePlane:
        check_plane_name(name)
        if name == LOCAL_PLANE or self.planes.member(name) is not None:
            raise Conflict(f"compute plane {name!r} exists", field="name",
                           fix="choose another name")
        return self._join(self.store.add(name, audit))

    def set_flags(self, name: str, audit: AuditEntry, *, cordoned: bool | None = None,
                  draining: bool | None = None) -> RegisteredPlane:
        remote = self.remote(name)
        registered = self.store.set_flags(name, audit, cordoned=cordoned, draining=draining)
        remote.set_cordoned(registered.cordoned or registered.draining)
        return registered

    def check_removable(self, name: str, *, running: list[str], force: bool) -> RemotePlane:
        """The plane, if it may go: refused while ``running`` jobs run there, unless
        ``force``."""
        remote = self.remote(name)
        if running and not force:
            raise Conflict(f"jobs run on compute plane {name}: {', '.join(running[:5])}",
                           field="name", fix="drain it first (`phalanx plane drain NAME "
                                             "--move`), or pass --force")
        return remote

    def remove(self, name: str, audit: AuditEntry) -> None:
        self.store.remove(name, audit)
        removed = self.planes.remove(name)
        if removed is not None:
            removed.close()

    def overview(self, jobs_by_plane: dict[str, list[str]],
                 nodes: Sequence[tuple[Node, dict[str, int]]] = ()) -> list[PlaneView]:
        """Every plane: its state, the jobs placed on it, and (from ``nodes``: each node with
        what admitted jobs hold of it) what its nodes have and what those jobs use."""
        stored = {p.name: p for p in self.store.list()}
        held: dict[str, tuple[dict[str, int], dict[str, int]]] = {}
        for node, used in nodes:
            alloc, taken = held.setdefault(node.labels.get(PLANE_LABEL, ""), ({}, {}))
            for res, amount in node.allocatable.items():
                alloc[res] = alloc.get(res, 0) + amount
            for res, amount in used.items():
                taken[res] = taken.get(res, 0) + amount
        views = []
        for name in self.planes.names():
            plane = self.planes.member(name)
            assert plane is not None
            alloc, taken = held.get(name, ({}, {}))
            common = {"name": name, "nodes": len(plane.inventory()),
                      "jobs": sorted(jobs_by_plane.get(name, [])),
                      "allocatable": _millis(alloc), "used": _millis(taken)}
            if isinstance(plane, RemotePlane):
                registered = stored.get(name) or RegisteredPlane(name)
                phase = _PHASES[plane.state]
                views.append(PlaneView.model_validate({
                    **common, "state": plane.describe_state(), "phase": phase, "remote": True,
                    "cordoned": registered.cordoned, "draining": registered.draining,
                    "lastSeen": plane.last_seen or registered.last_seen,
                    "worker": plane.worker, "fenceAfter": plane.fence_after,
                    "silentFor": None if phase == "connected" else plane.silent_for(),
                    "lostAfter": plane.lost_after}))
            else:
                views.append(PlaneView.model_validate({**common, "state": "in-process",
                                                       "phase": "in-process", "remote": False}))
        return views


_PHASES: dict[PlaneState, PlanePhase] = {
    PlaneState.WAITING: "waiting", PlaneState.CONNECTED: "connected",
    PlaneState.SILENT: "silent", PlaneState.LOST: "lost"}


def _millis(amounts: dict[str, int]) -> dict[str, str]:
    """Milli-unit amounts in the wire form Quantity fields parse ("1500m")."""
    return {res: f"{amount}m" for res, amount in sorted(amounts.items())}


def plane_of_job(record: JobRecord, planes: PlaneSet) -> str | None:
    """The compute plane a job's current attempt was placed on."""
    if record.admission is None:
        return None
    for pod_set in record.admission.pod_sets:
        for node in pod_set.nodes:
            return planes.plane_of_node(node)
    return None


def unreachable_plane_of(record: JobRecord, planes: ComputePlane) -> str | None:
    """The plane a job is placed on when the control plane cannot reach the addresses its
    pods record (a plane behind a worker); None when it can."""
    if not isinstance(planes, PlaneSet):
        return None if planes.endpoints_reachable else planes.name
    name = plane_of_job(record, planes)
    member = planes.member(name) if name is not None else None
    return name if member is not None and not member.endpoints_reachable else None


def current_placement(state: ControlState, planes: PlaneSet
                      ) -> Callable[[str], tuple[int, str] | None]:
    """``PlaneSet.placement_of`` for this control plane: a job's current attempt and the
    plane it is placed on. (Called from the API's threads without the state lock: a record
    is swapped whole, and reading a dict entry is atomic.)"""
    def placed(job: str) -> tuple[int, str] | None:
        record = state.jobs.get(job)
        if record is None or record.admission is None:
            return None
        name = plane_of_job(record, planes)
        return None if name is None else (record.attempt, name)
    return placed


def with_plane(record: JobRecord, planes: ComputePlane) -> JobRecord:
    """A copy of the job with the compute plane of its placement, as the API serves it."""
    if record.admission is None or not isinstance(planes, PlaneSet):
        return record
    return record.model_copy(update={"plane": plane_of_job(record, planes)})


def plane_views(registry: PlaneRegistry, service: JobService) -> list[PlaneView]:
    """Every plane with its jobs, nodes and what those jobs use (``/v1/planes``, status)."""
    nodes = [(entry.node, entry.used) for entry in service.nodes()]
    return registry.overview(jobs_by_plane(service.state, registry.planes), nodes)


def jobs_by_plane(state: ControlState, planes: PlaneSet) -> dict[str, list[str]]:
    with state.lock:
        records = list(state.active.values())
    found: dict[str, list[str]] = {}
    for record in records:
        name = plane_of_job(record, planes)
        if name is not None:
            found.setdefault(name, []).append(record.name)
    return found


def stop_jobs_on(state: ControlState, planes: PlaneSet, name: str, *,
                 removed_for: float = 0.0) -> list[str]:
    """Stop the plane's jobs now, requeued as system failures (to run elsewhere).

    ``removed_for``: the plane is being removed while they run, and its worker may not
    hear the stop; they start again elsewhere only after that many seconds, by when its
    fence has surely stopped their pods (no rank on two clusters at once)."""
    stopped = []
    with state.lock:
        now = state.clock()
        for record in list(state.active.values()):
            if record.stop_reason or plane_of_job(record, planes) != name:
                continue
            if removed_for > 0:
                state.holds[record.name] = (
                    now + removed_for,
                    f"held for {removed_for:.0f}s after compute plane {name} was removed, "
                    "until its fence has surely stopped the job's pods there")
            state.begin_stop(record, DRAINED, f"compute plane {name} is being "
                             f"{'removed' if removed_for > 0 else 'drained'}", "system")
            stopped.append(record.name)
    state.persist()
    state.wake.set()
    return stopped
