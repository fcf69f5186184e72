"""Several compute planes behind one control loop: ``PlaneSet``.

The control loop drives one ``ComputePlane``; a ``PlaneSet`` is one that aggregates
named member planes (the in-process local plane of ``phalanx up``, and a
``RemotePlane`` for each worker that dials in). It

- labels every node with its plane (``phalanx.dev/plane=<name>``, the topmost topology
  level: the scheduler never lets a gang span two values of it);
- names the nodes of a *qualified* member ``<plane>.<node>``, so two clusters may both
  have a node ``n1`` (two local workers on one machine both report its hostname); the
  in-process member keeps its nodes' names, so the embedded default is as before;
- routes ``launch`` to the plane of the admission's nodes (node names translated back),
  ``terminate``/``forget``/``endpoints`` to the plane that launched the attempt (every
  member when it does not know, after a restart: each call is idempotent), ``cordon``
  and ``exec`` to the plane of the node or the job's pods; ``observe`` concatenates.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, replace

from phalanx.compute.base import (
    CannotTellYet,
    ComputePlane,
    ExecSession,
    PodCredential,
    PodPhase,
    PodState,
    Refusal,
)
from phalanx.errors import NotFound, SpecError
from phalanx.scheduler.types import Admission, PodSetAssignment
from phalanx.spec.planes import LOCAL_PLANE, PLANE_LABEL
from phalanx.spec.resources import JobSpec, Node
from phalanx.spec.status import JobEvent


@dataclass(slots=True)
class _Member:
    plane: ComputePlane
    qualify: bool

    def qualified(self, name: str, node: str) -> str:
        return f"{name}.{node}" if self.qualify else node


class PlaneSet(ComputePlane):
    """Named member planes, driven as one."""

    name = "federated"

    def __init__(self) -> None:
        super().__init__()
        self._members: dict[str, _Member] = {}
        self._lock = threading.RLock()
        self._launched: dict[tuple[str, int], str] = {}  # attempt -> plane that launched it
        self._base_generation = 0  # bumped as members come and go
        # Unqualified members' node names -> member, rebuilt when the inventory changes.
        self._unqualified: dict[str, str] = {}
        self._unqualified_generation = -1
        # The control plane's answer to "which attempt of this job is current, and on
        # which plane is it placed" (None: not placed); see ``owns``.
        self.placement_of: Callable[[str], tuple[int, str] | None] | None = None

    # ------------------------------------------------------------------ members
    def add(self, name: str, plane: ComputePlane, *, qualify: bool = True) -> None:
        """Add member ``name``; ``qualify``: name its nodes ``<name>.<node>``."""
        with self._lock:
            if name in self._members:
                raise SpecError(f"compute plane {name!r} is already a member", field="name",
                                fix="choose another name")
            self._members[name] = _Member(plane, qualify)
            self._base_generation += 1
        plane.subscribe(self._notify)
        self._notify()

    def remove(self, name: str) -> ComputePlane | None:
        with self._lock:
            member = self._members.pop(name, None)
            if member is None:
                return None
            # Keep the sum growing: the loop compares generations for equality only.
            self._base_generation += member.plane.inventory_generation + 1
        self._notify()
        return member.plane

    def member(self, name: str) -> ComputePlane | None:
        with self._lock:
            member = self._members.get(name)
            return member.plane if member is not None else None

    def names(self) -> list[str]:
        with self._lock:
            return sorted(self._members)

    def _snapshot(self) -> list[tuple[str, _Member]]:
        with self._lock:
            return list(self._members.items())

    def owns(self, plane: str, job: str, attempt: int) -> bool:
        """Whether member ``plane`` may report pods of ``attempt`` of ``job``: not when that
        is the job's current attempt and it is placed on another plane."""
        lookup = self.placement_of
        placed = lookup(job) if lookup is not None else None
        return placed is None or placed[0] != attempt or placed[1] == plane

    def plane_of_node(self, node: str) -> str | None:
        """The member that has node ``node`` (a name as the control plane sees it)."""
        members = self._snapshot()
        for name, member in members:
            if member.qualify and node.startswith(f"{name}."):
                return name
        generation = self.inventory_generation
        if generation != self._unqualified_generation:
            self._unqualified = {n.name: name for name, m in members if not m.qualify
                                 for n in m.plane.inventory()}
            self._unqualified_generation = generation
        return self._unqualified.get(node)

    def _local_name(self, plane: str, node: str) -> str:
        with self._lock:
            member = self._members[plane]
        return node[len(plane) + 1:] if member.qualify else node

    def _route(self, node: str) -> tuple[str, ComputePlane]:
        name = self.plane_of_node(node)
        plane = self.member(name) if name is not None else None
        if name is None or plane is None:
            raise NotFound(f"no compute plane has node {node!r}", field="node",
                           fix="name a node `phalanx nodes` lists")
        return name, plane

    # ------------------------------------------------------------------ ComputePlane
    @property
    def inventory_generation(self) -> int:
        members = self._snapshot()
        return self._base_generation + sum(m.plane.inventory_generation for _, m in members)

    def inventory(self) -> list[Node]:
        nodes = []
        for name, member in self._snapshot():
            for node in member.plane.inventory():
                nodes.append(node.model_copy(update={
                    "name": member.qualified(name, node.name),
                    "labels": {**node.labels, PLANE_LABEL: name},
                }))
        return nodes

    def launch(self, job: JobSpec, attempt: int, admission: Admission, *,
               credential: PodCredential | None = None) -> None:
        planes = {self.plane_of_node(n) for ps in admission.pod_sets for n in ps.nodes}
        if None in planes or len(planes) != 1:
            raise RuntimeError(f"the admission of {job.name} places pods on "
                               f"{len(planes)} compute planes; a gang runs on one")
        name = planes.pop()
        assert name is not None
        plane = self.member(name)
        assert plane is not None
        local = replace(admission, pod_sets=tuple(
            PodSetAssignment(name=ps.name, count=ps.count, flavors=ps.flavors,
                             nodes=tuple(self._local_name(name, n) for n in ps.nodes))
            for ps in admission.pod_sets))
        plane.launch(job, attempt, local, credential=credential)
        with self._lock:
            self._launched[(job.name, attempt)] = name

    def observe(self) -> list[PodState]:
        pods = []
        for name, member in self._snapshot():
            for pod in member.plane.observe():
                pods.append(replace(pod, node=member.qualified(name, pod.node))
                            if member.qualify else pod)
        return pods

    def sees(self, node: str) -> bool:
        name = self.plane_of_node(node)
        plane = self.member(name) if name is not None else None
        return plane is None or plane.sees(self._local_name(name, node) if name else node)

    @property
    def kind(self) -> str:
        """"simulated" for the embedded plane alone; "local, gcp-a (worker)" with workers."""
        return ", ".join(m.plane.kind if not m.qualify else f"{name} (worker)"
                         for name, m in self._snapshot()) or "workers only (none yet)"

    def where(self, node: str) -> str:
        name = self.plane_of_node(node)
        with self._lock:
            member = self._members.get(name) if name is not None else None
        if member is None or name is None:
            return "an unknown compute plane"
        return f"compute plane {name}" if member.qualify else member.plane.where(node)

    def refusals(self) -> list[Refusal]:
        return [replace(r, plane=name) for name, m in self._snapshot()
                for r in m.plane.refusals()]

    def _owners(self, job: str, attempt: int) -> list[ComputePlane]:
        with self._lock:
            name = self._launched.get((job, attempt))
            if name is not None and name in self._members:
                return [self._members[name].plane]
            return [m.plane for m in self._members.values()]

    def terminate(self, job: str, attempt: int, grace_seconds: float = 10.0) -> None:
        for plane in self._owners(job, attempt):
            plane.terminate(job, attempt, grace_seconds)

    def forget(self, job: str, attempt: int) -> None:
        for plane in self._owners(job, attempt):
            plane.forget(job, attempt)
        with self._lock:
            self._launched.pop((job, attempt), None)

    def close(self) -> None:
        for _, member in self._snapshot():
            member.plane.close()

    def flush_logs(self) -> None:
        for _, member in self._snapshot():
            member.plane.flush_logs()

    def pod_events(self, job: str) -> list[JobEvent]:
        return [e for _, m in self._snapshot() for e in m.plane.pod_events(job)]

    def check_job(self, job: JobSpec) -> None:
        """Accepted when any member could run it; refused when a member that can tell would
        not; accepted when none can tell yet (no members, or workers not heard from), as a
        worker may come."""
        error: SpecError | None = None
        for _, member in self._snapshot():
            try:
                member.plane.check_job(job)
                return
            except CannotTellYet:
                continue
            except SpecError as exc:
                error = exc
        if error is not None:
            raise error

    def last_checkpoint(self, job: str) -> float | None:
        saved = [t for _, m in self._snapshot() if (t := m.plane.last_checkpoint(job))]
        return max(saved) if saved else None

    def release_checkpoints(self, job: str) -> None:
        for _, member in self._snapshot():
            member.plane.release_checkpoints(job)

    def endpoints(self, job: str, attempt: int) -> dict[str, str]:
        found: dict[str, str] = {}
        for plane in self._owners(job, attempt):
            found.update(plane.endpoints(job, attempt))
        return found

    def cordon(self, name: str, unschedulable: bool) -> None:
        plane_name, plane = self._route(name)
        plane.cordon(self._local_name(plane_name, name), unschedulable)

    def exec(self, job: str, pod: str | None, argv: list[str], *, tty: bool = False,
             cols: int = 80, rows: int = 24) -> ExecSession:
        members = self._snapshot()
        pods = [(m, [p for p in m.plane.observe() if p.ref.job == job]) for _, m in members]
        # The plane where it runs now, before one that still keeps an earlier attempt's pods.
        for member, mine in sorted(pods, key=lambda item: not any(
                p.phase is PodPhase.RUNNING for p in item[1])):
            if mine:
                return member.plane.exec(job, pod, argv, tty=tty, cols=cols, rows=rows)
        embedded = [m.plane for _, m in members if not m.qualify]
        if len(embedded) == 1:  # the in-process plane says why (no such pod, or no exec)
            return embedded[0].exec(job, pod, argv, tty=tty, cols=cols, rows=rows)
        raise NotFound(f"job {job!r} has no running pod", field="pod",
                       fix="wait until the job runs (`phalanx describe`)")


def embedded(plane: ComputePlane) -> PlaneSet:
    """The plane set of ``phalanx up``: its in-process plane as member ``local``."""
    planes = PlaneSet()
    planes.add(LOCAL_PLANE, plane, qualify=False)
    return planes
