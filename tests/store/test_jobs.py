"""Jobs and events in the store, on SQLite and PostgreSQL."""

from __future__ import annotations

import pytest
from pydantic_core import PydanticUndefined

from phalanx.errors import Conflict, InternalError, NotFound, SpecError
from phalanx.spec.status import JobRecord, JobStatus
from phalanx.store import Store
from tests.store.factories import full_record, make_event, make_record

# Computed when the API serves a job (the plane from the placement, the estimate from the
# live forecast), never stored.
SERVED_ONLY = {"plane", "estimate"}


def test_a_record_with_every_field_set_round_trips(store: Store) -> None:
    record = full_record()
    for name, field in JobRecord.model_fields.items():
        if name in SERVED_ONLY:
            continue
        default = None if field.default is PydanticUndefined else field.default
        assert getattr(record, name) != default, f"full_record leaves {name} at its default"

    store.create_job(record)

    assert store.get_job(record.name) == record
    assert store.get_job(record.name).to_dict() == record.to_dict()
    assert store.list_jobs() == [record]


def test_create_job_stores_its_first_event(store: Store) -> None:
    store.create_job(make_record("a"), make_event("a", 10.0, "Submitted", "queued in default"))

    events = store.list_events("a")
    assert [(e.job, e.time, e.reason, e.message) for e in events] == [
        ("a", 10.0, "Submitted", "queued in default")
    ]


def test_a_taken_name_is_a_conflict_and_changes_nothing(store: Store) -> None:
    first = make_record("train", queue="team-a")
    store.create_job(first, make_event("train", 1.0))

    again = make_record("train", queue="team-b", status=JobStatus.RUNNING, priority=7)
    with pytest.raises(Conflict) as caught:
        store.create_job(again, make_event("train", 2.0, "Resubmitted"))

    assert caught.value.field == "name"
    assert caught.value.fix
    assert store.get_job("train") == first
    assert [e.reason for e in store.list_events("train")] == ["Submitted"]
    assert store.list_jobs(queue="team-b") == []


def test_an_event_of_another_job_is_refused_before_anything_is_stored(store: Store) -> None:
    with pytest.raises(InternalError) as caught:
        store.create_job(make_record("a"), make_event("b", 1.0))
    assert caught.value.field == "event.job"
    with pytest.raises(NotFound):
        store.get_job("a")


def test_a_missing_job_is_not_found(store: Store) -> None:
    with pytest.raises(NotFound) as caught:
        store.get_job("nope")
    assert caught.value.field == "name"
    assert "nope" in caught.value.message


def test_list_jobs_orders_by_submission_then_name_and_filters(store: Store) -> None:
    specs = [  # (name, submitted_at, status, queue)
        ("d", 3.0, JobStatus.RUNNING, "team-a"),
        ("b", 1.0, JobStatus.QUEUED, "team-a"),
        ("c", 2.0, JobStatus.SUCCEEDED, "team-b"),
        ("a", 2.0, JobStatus.QUEUED, "team-b"),  # same time as c: name breaks the tie
        ("e", 4.0, JobStatus.FAILED, "team-a"),
    ]
    for name, at, status, queue in specs:
        store.create_job(make_record(name, submitted_at=at, status=status, queue=queue))

    def names(**filters: object) -> list[str]:
        return [r.name for r in store.list_jobs(**filters)]  # type: ignore[arg-type]

    assert names() == ["b", "a", "c", "d", "e"]
    assert names(statuses=[JobStatus.QUEUED]) == ["b", "a"]
    assert names(statuses={JobStatus.RUNNING, JobStatus.FAILED}) == ["d", "e"]
    assert names(statuses=[]) == []
    assert names(queue="team-b") == ["a", "c"]
    assert names(queue="team-a", statuses=[JobStatus.QUEUED, JobStatus.RUNNING]) == ["b", "d"]
    assert names(queue="nobody") == []
    assert names(limit=2) == ["d", "e"]  # the newest two, still oldest first
    assert names(limit=3, queue="team-a") == ["b", "d", "e"]
    assert names(limit=100) == ["b", "a", "c", "d", "e"]
    assert names(limit=0) == []


def test_list_jobs_rejects_bad_filters(store: Store) -> None:
    with pytest.raises(SpecError) as caught:
        store.list_jobs(statuses=["Sleeping"])  # type: ignore[list-item]
    assert caught.value.field == "status"
    with pytest.raises(SpecError) as caught:
        store.list_jobs(limit=-1)
    assert caught.value.field == "limit"


def test_count_jobs_by_status_lists_every_status(store: Store) -> None:
    for i, status in enumerate([JobStatus.QUEUED, JobStatus.QUEUED, JobStatus.RUNNING]):
        store.create_job(make_record(f"j{i}", status=status))

    counts = store.count_jobs_by_status()

    assert counts == {s.value: 0 for s in JobStatus} | {"Queued": 2, "Running": 1}


def test_save_jobs_upserts_records_and_adds_events(store: Store) -> None:
    store.create_job(make_record("a"), make_event("a", 1.0))
    running = make_record("a", status=JobStatus.RUNNING, attempt=1, started_at=5.0)
    new = make_record("b", submitted_at=1_700_000_001.0)

    store.save_jobs([running, new], [make_event("a", 5.0, "Started"), make_event("b", 6.0)])

    assert store.get_job("a") == running
    assert store.get_job("b") == new
    # The searchable columns follow the record, not only its JSON.
    assert [r.name for r in store.list_jobs(statuses=[JobStatus.RUNNING])] == ["a"]
    assert [e.reason for e in store.list_events("a")] == ["Submitted", "Started"]
    assert [e.reason for e in store.list_events("b")] == ["Submitted"]


def test_save_jobs_keeps_the_last_record_given_for_a_name(store: Store) -> None:
    first = make_record("a", status=JobStatus.ADMITTED)
    last = make_record("a", status=JobStatus.RUNNING)

    store.save_jobs([first, last])

    assert store.get_job("a") == last
    assert store.count_jobs_by_status()["Admitted"] == 0


def test_save_jobs_applies_nothing_when_the_batch_fails_midway(store: Store) -> None:
    before = make_record("a")
    store.create_job(before, make_event("a", 1.0))
    records = [
        make_record("a", status=JobStatus.RUNNING),
        make_record("b"),
        make_record("c"),
    ]
    # The database itself refuses the second event (its job exists nowhere), after the
    # records and the first event were written in the same transaction.
    events = [make_event("a", 2.0, "Started"), make_event("ghost", 2.0), make_event("b", 2.0)]

    with pytest.raises(NotFound) as caught:
        store.save_jobs(records, events)

    assert caught.value.field == "events.job"
    assert "ghost" in caught.value.message
    assert store.get_job("a") == before
    assert [r.name for r in store.list_jobs()] == ["a"]
    assert [e.reason for e in store.list_events("a")] == ["Submitted"]
    assert store.list_events("b") == []


def test_save_jobs_with_nothing_to_save_does_nothing(store: Store) -> None:
    store.save_jobs([], [])
    assert store.list_jobs() == []


def test_save_jobs_writes_thousands_of_records_in_one_batch(store: Store) -> None:
    records = [make_record(f"job-{i:05d}", submitted_at=float(i)) for i in range(3000)]
    store.save_jobs(records, [make_event(r.name, 0.0) for r in records])

    updated = [r.model_copy(update={"status": JobStatus.RUNNING}) for r in records]
    store.save_jobs(updated, [make_event(r.name, 1.0, "Started") for r in records])

    assert store.count_jobs_by_status()["Running"] == 3000
    assert store.list_jobs(limit=1)[0] == updated[-1]
    assert [e.reason for e in store.list_events("job-01234")] == ["Submitted", "Started"]


def test_events_come_back_in_time_order_and_limit_keeps_the_newest(store: Store) -> None:
    store.create_job(make_record("a"))
    store.create_job(make_record("b"))
    store.add_events([
        make_event("a", 3.0, "Third"),
        make_event("a", 1.0, "First"),
        make_event("b", 2.0, "Other"),
        make_event("a", 2.0, "Second"),
        make_event("a", 2.0, "SecondToo"),  # same time: insertion order
    ])

    assert [e.reason for e in store.list_events("a")] == ["First", "Second", "SecondToo", "Third"]
    assert [e.reason for e in store.list_events("a", limit=2)] == ["SecondToo", "Third"]
    assert [e.reason for e in store.list_events("b")] == ["Other"]
    assert store.list_events("nobody") == []


def test_events_of_an_unknown_job_are_refused_as_a_batch(store: Store) -> None:
    store.create_job(make_record("a"))

    with pytest.raises(NotFound) as caught:
        store.add_events([make_event("a", 1.0, "Kept?"), make_event("ghost", 1.0)])

    assert caught.value.field == "events.job"
    assert store.list_events("a") == []


def test_event_fields_round_trip(store: Store) -> None:
    store.create_job(make_record("a"))
    event = make_event("a", 1_700_000_000.987654, "BackoffStarted", "retry in 20s — after exit 3")
    warning = event.model_copy(update={"type": "Warning", "time": 1_700_000_001.5})

    store.add_events([event, warning])

    assert store.list_events("a") == [event, warning]


def test_the_plane_a_served_job_carries_is_not_stored(store: Store) -> None:
    served = full_record("placed").model_copy(update={"plane": "gcp-a"})
    store.create_job(served)
    assert served.to_dict()["plane"] == "gcp-a"
    loaded = store.get_job("placed")
    assert loaded.plane is None
    assert loaded == served.model_copy(update={"plane": None})
