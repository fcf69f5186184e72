"""Pages of jobs (newest first, continue tokens, filters), deleting finished jobs, on SQLite
and PostgreSQL."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import inspect

from phalanx.errors import Conflict, NotFound, SpecError
from phalanx.spec import JobSpec, validate
from phalanx.spec.status import JobRecord, JobStatus
from phalanx.store import JobFilter, Store
from tests.store.factories import make_event, make_record


def labelled(name: str, labels: dict[str, str], *, user: str = "unknown",
             **fields: Any) -> JobRecord:
    record = make_record(name, **fields)
    spec = validate(JobSpec, {**record.spec.to_dict(), "labels": labels})
    return record.model_copy(update={"spec": spec, "user": user})


def test_pages_walk_every_job_newest_first_with_a_count_of_the_rest(store: Store) -> None:
    store.create_jobs([make_record(f"j{i:02d}", submitted_at=1000.0 + i) for i in range(7)])
    # Two jobs submitted at the same instant are told apart by name.
    store.create_jobs([make_record("same-a", submitted_at=1003.0),
                       make_record("same-b", submitted_at=1003.0)])

    seen: list[str] = []
    remaining: list[int] = []
    token: str | None = None
    while True:
        page = store.page_jobs(JobFilter(), limit=4, after=token)
        seen += [r.name for r in page.items]
        remaining.append(page.remaining)
        token = page.next
        if token is None:
            break
    assert seen == ["j06", "j05", "j04", "same-b", "same-a", "j03", "j02", "j01", "j00"]
    assert remaining == [5, 1, 0]


def test_filters_by_queue_status_user_and_labels(store: Store) -> None:
    store.create_jobs([
        labelled("a", {"team": "nlp", "tier": "x"}, user="ann", submitted_at=1.0),
        labelled("b", {"team": "nlp"}, user="bob", queue="other", submitted_at=2.0),
        labelled("c", {"team": "vision"}, user="ann", submitted_at=3.0,
                 status=JobStatus.RUNNING),
    ])

    def names(**kwargs: Any) -> list[str]:
        return [r.name for r in store.page_jobs(JobFilter(**kwargs), limit=10).items]

    assert names(labels={"team": "nlp"}) == ["b", "a"]
    assert names(labels={"team": "nlp", "tier": "x"}) == ["a"]
    assert names(user="ann") == ["c", "a"]
    assert names(queue="other") == ["b"]
    assert names(statuses=[JobStatus.RUNNING]) == ["c"]
    assert names(user="ann", labels={"team": "nlp"}) == ["a"]
    assert names(labels={"team": "none"}) == []
    assert store.get_job("a").user == "ann"


def test_a_bad_continue_token_names_the_field(store: Store) -> None:
    with pytest.raises(SpecError) as caught:
        store.page_jobs(JobFilter(), limit=5, after="not-a-token")
    assert caught.value.field == "continue"
    assert caught.value.fix


def test_the_filters_have_indexes(store: Store) -> None:
    indexed = {tuple(ix["column_names"]) for ix in inspect(store.engine).get_indexes("jobs")}
    assert {("queue", "submitted_at", "name"), ("status", "submitted_at", "name"),
            ("user_name", "submitted_at", "name"), ("finished_at",)} <= indexed
    label_ix = {tuple(ix["column_names"]) for ix in inspect(store.engine).get_indexes("job_labels")}
    assert ("key", "value", "job") in label_ix


def test_deleting_finished_jobs_removes_events_and_frees_the_name(store: Store) -> None:
    store.create_job(labelled("done", {"a": "b"}, status=JobStatus.SUCCEEDED, finished_at=5.0),
                     make_event("done", 1.0))
    store.create_job(make_record("live", status=JobStatus.RUNNING), make_event("live", 1.0))

    assert store.delete_finished_jobs(["done", "live"]) == ["done"]

    with pytest.raises(NotFound):
        store.get_job("done")
    assert store.list_events("done") == []
    assert store.get_job("live").status is JobStatus.RUNNING
    store.create_job(make_record("done"))  # the name is free again
    assert store.page_jobs(JobFilter(labels={"a": "b"}), limit=5).items == []


def test_finished_before_lists_the_oldest_finished_jobs_in_batches(store: Store) -> None:
    store.create_jobs([
        make_record(f"f{i}", status=JobStatus.FAILED, finished_at=float(i)) for i in range(5)
    ] + [make_record("q", status=JobStatus.QUEUED)])

    assert store.finished_before(3.0, limit=2) == ["f0", "f1"]
    assert store.finished_before(3.0, limit=10) == ["f0", "f1", "f2"]


def test_a_batch_with_a_taken_name_still_names_its_position(store: Store) -> None:
    store.create_job(make_record("taken"))
    with pytest.raises(Conflict) as caught:
        store.create_jobs([labelled("fresh", {"k": "v"}), make_record("taken")])
    assert caught.value.field == "items[1].name"
    assert store.page_jobs(JobFilter(labels={"k": "v"}), limit=5).items == []
