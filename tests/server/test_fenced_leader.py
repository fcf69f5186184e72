"""A control plane whose lease another replica took: its submits, cancels and loop steps
are refused by the store's fence, and its plane is sent nothing (no launch, no stop)."""

from __future__ import annotations

import contextlib
import time
from pathlib import Path

import pytest

from phalanx.compute.simulated import SimulatedPlane
from phalanx.control import Controller
from phalanx.errors import NotLeader
from phalanx.spec import JobSpec, Node
from phalanx.spec.base import validate
from phalanx.spec.status import JobStatus
from phalanx.store import Store
from phalanx.store.leases import Fence, LeaseStore

NODES = [Node(name="n0", allocatable={"cpu": 4000, "memory": 2 ** 34})]


def _job(name: str) -> JobSpec:
    return validate(JobSpec, {"name": name, "podSets": [{"command": ["sleep", "600"]}]})


def test_an_old_leader_writes_nothing_and_sends_its_plane_nothing(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'state.db'}"
    store = Store(url)
    lease = LeaseStore(store).try_acquire("old", "http://old:7780", 5.0)
    store.fence = Fence(lease.name, "old", lease.term)
    plane = SimulatedPlane(NODES)
    ctl = Controller(store, plane)
    try:
        ctl.submit(_job("running"))
        ctl.step()
        ctl.step()
        assert ctl.get("running").status is JobStatus.RUNNING
        ctl.submit(_job("admitted-next"))  # stored; its admission is the next step's

        # The old leader was paused past its lease; another replica took it.
        with Store(url) as other:
            taken = LeaseStore(other).try_acquire("new", "http://new:7780", 5.0,
                                                  now=time.time() + 60)
        assert taken.term == lease.term + 1

        with pytest.raises(NotLeader):
            ctl.submit(_job("late"))
        with pytest.raises(NotLeader):
            ctl.cancel("running")
        with pytest.raises(NotLeader):
            ctl.step()
        launched = {pod.ref.job for pod in plane.observe()}
        assert launched == {"running"}  # nothing new launched, the running job not stopped
        assert all(pod.phase.value == "Running" for pod in plane.observe())
    finally:
        with contextlib.suppress(NotLeader):
            ctl.stop()
        store.close()
    with Store(url) as after:
        stored = {r.name: r.status for r in after.list_jobs()}
    assert stored == {"running": JobStatus.RUNNING, "admitted-next": JobStatus.QUEUED}
