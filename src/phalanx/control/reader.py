"""What a replica that follows answers reads with: the leader's own routes over a view of
the store that refuses every write (``Store.reader``).

The leader's ``JobService`` reads live jobs from memory, where its loop keeps them; a
follower has no loop, so ``StoreReader`` leaves that memory empty and every read falls
through to the store, as the leader's does for jobs it no longer holds. What only the
leader's loop or planes know (the pods of a live job) raises ``LeaderOnly``, which the
follower's app answers with a redirect to the leader. ``StoredPlaneNames`` names the
plane of a job's nodes as the leader's planes do, from the store alone.
"""

from __future__ import annotations

import time

from phalanx.compute.base import PodState
from phalanx.compute.federation import PlaneSet
from phalanx.control.service import JobService, acting_attempt
from phalanx.errors import LeaderOnly, NotFound
from phalanx.spec.planes import LOCAL_PLANE
from phalanx.spec.status import JobRecord, JobStatus
from phalanx.store.planes import PlaneStore

PLANE_NAMES_SECONDS = 1.0  # how long the registered planes' names are reused


class StoreReader(JobService):
    """A ``JobService`` over an empty state: every read is the store's."""

    def running_attempt(self, name: str, attempt: int) -> JobRecord | None:
        try:
            return acting_attempt(self.store.get_job(name), attempt)
        except NotFound:
            return None

    def pods_of(self, name: str) -> list[PodState]:
        """None for a job that has ended or never started (the leader holds none either);
        the pods of a live job are the leader's planes' to tell."""
        status = self.store.get_job(name).status
        if status.terminal or status is JobStatus.QUEUED:
            return []
        raise LeaderOnly(f"job {name!r} is {status.value}: its pods are what the leader's "
                         "compute planes observe", field="leader",
                         fix="ask the leader (this replica redirects there)")


class StoredPlaneNames(PlaneSet):
    """No member: the plane of a node as the leader names it. A worker's nodes are
    ``<plane>.<node>``, for the planes registered in the store; any other node is the local
    plane's, when the replicas run one."""

    def __init__(self, planes: PlaneStore, *, local_plane: bool) -> None:
        super().__init__()
        self.registered = planes
        self.local_plane = local_plane
        self._names: tuple[float, list[str]] = (-PLANE_NAMES_SECONDS, [])

    def plane_of_node(self, node: str) -> str | None:
        read_at, names = self._names
        if time.monotonic() - read_at >= PLANE_NAMES_SECONDS:
            names = [plane.name for plane in self.registered.list()]
            self._names = (time.monotonic(), names)
        for name in names:
            if node.startswith(f"{name}."):
                return name
        return LOCAL_PLANE if self.local_plane else None
