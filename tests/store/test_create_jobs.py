"""Creating many jobs in one transaction, on SQLite and PostgreSQL."""

from __future__ import annotations

import pytest

from phalanx.errors import Conflict
from phalanx.spec.status import JobStatus
from phalanx.store import Store
from tests.store.factories import make_event, make_record


def test_a_batch_is_stored_with_its_events(store: Store) -> None:
    records = [make_record(f"j{i}", submitted_at=100.0 + i) for i in range(5)]
    store.create_jobs(records, [make_event(r.name, 1.0) for r in records])
    assert store.list_jobs() == records
    assert [e.job for e in store.list_events("j3")] == ["j3"]


def test_one_taken_name_stores_none_of_the_batch(store: Store) -> None:
    store.create_job(make_record("taken"))
    batch = [make_record("new-0"), make_record("taken"), make_record("new-1")]
    with pytest.raises(Conflict) as caught:
        store.create_jobs(batch, [make_event(r.name, 1.0) for r in batch])
    assert caught.value.field == "items[1].name" and "taken" in caught.value.message
    assert [r.name for r in store.list_jobs()] == ["taken"]
    assert store.list_events("new-0") == []


def test_a_name_twice_in_the_batch_is_a_conflict(store: Store) -> None:
    batch = [make_record("a"), make_record("b"), make_record("a")]
    with pytest.raises(Conflict) as caught:
        store.create_jobs(batch)
    assert caught.value.field == "items[2].name"
    assert store.list_jobs() == []


def test_an_empty_batch_does_nothing(store: Store) -> None:
    store.create_jobs([])
    assert store.list_jobs() == []


def test_a_manifest_is_kept_with_its_job_and_goes_with_it(store: Store) -> None:
    manifest = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "m0"},
                "spec": {"parallelism": 2}}
    store.create_jobs([make_record("m0"), make_record("plain")], manifests={"m0": manifest})
    store.create_job(make_record("m1"), manifest={**manifest, "metadata": {"name": "m1"}})
    assert store.get_manifest("m0") == manifest
    assert store.get_manifest("m1") == {**manifest, "metadata": {"name": "m1"}}
    assert store.get_manifest("plain") is None
    # The job's records are saved every cycle; the manifest stays as submitted.
    store.save_jobs([make_record("m0", status=JobStatus.SUCCEEDED, finished_at=5.0)])
    assert store.get_manifest("m0") == manifest
    assert store.delete_finished_jobs(["m0"]) == ["m0"]
    assert store.get_manifest("m0") is None
