"""What a plane's worker fence needs outlives a control-plane restart (SQLite and
PostgreSQL): a control plane restarted with a shorter --worker-lost-after waits that long
before it calls the plane lost, even if its worker never reports again."""

from __future__ import annotations

from phalanx.compute.federation import PlaneSet
from phalanx.compute.remote import PlaneState, PlaneTimers
from phalanx.control.planes import PlaneRegistry
from phalanx.spec.planes import PlaneHello
from phalanx.store import AuditEntry, Store
from phalanx.store.planes import PlaneStore


def registry(store: Store, lost_after: float) -> PlaneRegistry:
    return PlaneRegistry(PlaneSet(), PlaneStore(store), timers=PlaneTimers(
        worker_grace=1, worker_lost_after=lost_after))


def test_a_restarted_control_plane_waits_as_long_as_the_workers_fence_needs(
        store: Store) -> None:
    first = registry(store, lost_after=900)
    first.add("east", AuditEntry("admin", "-", "plane-add", "east"))
    first.remote("east").hello(PlaneHello(worker="w", compute="local", fence_after=600,
                                          fence_stops_within=5.5))
    first.heard("east")
    assert PlaneStore(store).get("east").fence_needs == 615.5

    again = registry(store, lost_after=60)  # restarted with a shorter timer; no word since
    east = again.remote("east")
    assert east.lost_after == 615.5
    east.observe()
    assert east.state is not PlaneState.LOST
