"""Job records stored before admission and stop reason were typed still load, and a control
plane restarted on them carries on."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from phalanx.compute.simulated import SimulatedPlane
from phalanx.control import Controller
from phalanx.spec import Node
from phalanx.spec.status import JobAdmission, JobRecord, JobStatus, StopRequest
from phalanx.store import Store
from phalanx.store.rows import job_from_row

OLD_ADMISSION = {
    "job": "old", "clusterQueue": "default", "borrowing": False,
    "podSets": [{"name": "w", "count": 2, "flavors": {"cpu": "local"}, "nodes": ["n1", "n1"]}],
}


def old_record(**fields: Any) -> dict[str, Any]:
    return {
        "name": "old", "spec": {"name": "old", "podSets": [{"name": "w", "replicas": 2}]},
        "status": "Running", "queue": "default", "clusterQueue": "default",
        "submittedAt": 1.0, "queuedAt": 1.0, "attempt": 1, "admission": OLD_ADMISSION,
        **fields,
    }


@pytest.mark.parametrize(
    ("stored", "expected"),
    [
        ("Preempted", StopRequest(reason="Preempted")),
        ("Failed:user", StopRequest(reason="Failed", failure="user")),
        ("PodsLost:system", StopRequest(reason="PodsLost", failure="system")),
        ({"reason": "Cancelled"}, StopRequest(reason="Cancelled")),
    ],
)
def test_old_stop_reason_strings_and_admission_dicts_load(
    stored: object, expected: StopRequest
) -> None:
    record = job_from_row({"name": "old", "record": old_record(stopReason=stored)})
    assert record.stop_reason == expected
    assert isinstance(record.admission, JobAdmission)
    assert record.admission.pod_count == 2 and record.admission.pod_sets[0].nodes == ["n1", "n1"]
    # Written back, the record has the typed shape, and reads back the same.
    again = JobRecord.model_validate(record.to_dict())
    assert again == record
    assert record.to_dict()["admission"] == OLD_ADMISSION


def test_a_stop_reason_outside_the_known_ones_is_refused() -> None:
    with pytest.raises(ValueError, match="reason"):
        StopRequest.model_validate("Exploded:user")
    with pytest.raises(ValueError, match="failure"):
        StopRequest.model_validate("Failed:someone")


def test_a_restart_on_an_old_record_finishes_its_stop(tmp_path: Path) -> None:
    """A job stopped (Failed:user) by an older control plane is settled by the new one."""
    store = Store.for_home(tmp_path)
    store.close()
    with sqlite3.connect(tmp_path / "phalanx.db") as db:
        db.execute(
            "INSERT INTO jobs (name, status, queue, cluster_queue, priority, submitted_at, "
            "finished_at, record) VALUES ('old', 'Running', 'default', 'default', 0, 1.0, "
            "NULL, ?)", (json.dumps(old_record(stopReason="Failed:user", message="exit 3")),),
        )
    store = Store.for_home(tmp_path)
    plane = SimulatedPlane([Node(name="n1", allocatable={"cpu": "4", "memory": "8Gi"})])
    try:
        controller = Controller(store, plane)
        controller.step()  # no pods are left: the stop is finished and charged to the user
        record = store.get_job("old")
        assert record.status is JobStatus.FAILED  # maxRestarts 0: a user failure is final
        assert record.stop_reason is None and record.admission is not None
        assert "exit 3" in record.message
    finally:
        plane.close()
        store.close()
