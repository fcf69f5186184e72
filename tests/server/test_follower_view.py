"""What a replica that follows reads with: a view of the store that refuses every write,
and a control plane over it (``Controller(reader=True)``) whose service reads the store
for what the leader holds in memory."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest

from phalanx.compute.simulated import SimulatedPlane
from phalanx.control import Controller
from phalanx.control.reader import StoredPlaneNames
from phalanx.errors import LeaderOnly, NotLeader
from phalanx.spec import JobSpec, Node
from phalanx.spec.base import validate
from phalanx.spec.status import JobStatus
from phalanx.store import Store
from phalanx.store.planes import PlaneStore
from tests.store.factories import make_record

NODES = [Node(name="n0", allocatable={"cpu": 4000, "memory": 2 ** 34})]


def _job(name: str) -> JobSpec:
    return validate(JobSpec, {"name": name, "podSets": [{"command": ["sleep", "600"]}]})


def test_a_follower_reads_what_the_leader_stored_and_writes_nothing(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 'state.db'}")
    leader = Controller(store, SimulatedPlane(NODES))
    try:
        leader.submit(_job("running"))
        leader.step()
        leader.step()
        leader.submit(_job("queued"))
        leader.cancel("queued")
        leader.step()
        assert leader.get("running").status is JobStatus.RUNNING

        view = store.reader("this replica follows")
        follower = Controller(view, StoredPlaneNames(PlaneStore(view), local_plane=True),
                              reader=True)
        service = follower.service
        assert service.get("running").model_dump() == leader.get("running").model_dump()
        listed = [r.name for r in service.list_jobs()]
        assert listed == [r.name for r in leader.service.list_jobs()]
        assert sorted(listed) == ["queued", "running"]
        assert service.pods_of("queued") == []  # cancelled: none, as on the leader
        assert leader.service.pods_of("queued") == []
        with pytest.raises(LeaderOnly):
            service.pods_of("running")  # the leader's plane observes them
        assert service.running_attempt("running", 1) is not None
        assert service.running_attempt("running", 2) is None
        assert service.running_attempt("queued", 1) is None

        with pytest.raises(NotLeader, match="this replica follows"):
            service.submit(_job("late"))
        with pytest.raises(NotLeader):
            view.save_config(follower.state.config)
        assert "late" not in {r.name for r in store.list_jobs()}
        store.save_config(follower.state.config)  # the store itself still writes
    finally:
        with contextlib.suppress(Exception):
            leader.stop()
        store.close()


def test_a_follower_view_refuses_submits_too(tmp_path: Path) -> None:
    """Submits go through a group commit of their own: the view's refuses them as well."""
    with Store(f"sqlite:///{tmp_path / 'state' / 'phalanx.db'}") as store:
        view = store.reader("a follower: writes go to the leader")
        with pytest.raises(NotLeader):
            view.create_job(make_record("refused"))
        with pytest.raises(NotLeader):
            view.create_jobs([make_record("refused-too")])
        assert store.list_jobs() == []
        store.create_job(make_record("kept"))
        assert [r.name for r in view.list_jobs()] == ["kept"]
