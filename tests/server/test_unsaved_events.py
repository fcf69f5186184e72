"""A job's events are answered whether they are stored, waiting to be, or being written:
a job seen in a new status always shows the event that says so, and only once."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path

from phalanx.compute.simulated import SimulatedPlane
from phalanx.control import Controller
from phalanx.spec import JobSpec, Node
from phalanx.spec.base import validate
from phalanx.spec.status import JobEvent, JobRecord
from phalanx.store import Store

NODES = [Node(name="n0", allocatable={"cpu": 4000, "memory": 2 ** 34})]


class SlowStore(Store):
    """A real store whose next batched write waits until the test lets it go on."""

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.hold = threading.Event()
        self.writing = threading.Event()
        self.go_on = threading.Event()

    def save_jobs(self, records: Sequence[JobRecord], events: Sequence[JobEvent]) -> None:
        if self.hold.is_set():
            self.writing.set()
            assert self.go_on.wait(10)
        super().save_jobs(records, events)


def reasons(ctl: Controller, name: str) -> list[str]:
    return [e.reason for e in ctl.service.events_of(name)]


def test_events_waiting_or_being_written_are_answered_once(tmp_path: Path) -> None:
    store = SlowStore(f"sqlite:///{tmp_path / 'state.db'}")
    plane = SimulatedPlane(NODES)
    ctl = Controller(store, plane)
    try:
        ctl.submit(validate(JobSpec, {"name": "j", "podSets": [{"command": ["x"]}]}))
        record = ctl.state.jobs["j"]
        with ctl.state.lock:
            ctl.state.event(record, "Noted", "not stored yet")
        assert reasons(ctl, "j") == ["Submitted", "Noted"]  # waiting to be written
        store.hold.set()
        writer = threading.Thread(target=ctl.state.persist)
        writer.start()
        assert store.writing.wait(10)
        assert reasons(ctl, "j") == ["Submitted", "Noted"]  # being written
        store.go_on.set()
        writer.join(10)
        assert reasons(ctl, "j") == ["Submitted", "Noted"]  # stored: once
    finally:
        store.go_on.set()
        ctl.stop()
        plane.close()
        store.close()
