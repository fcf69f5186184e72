"""Several threads (and several Store instances) writing at once."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from phalanx.errors import Conflict
from phalanx.spec.status import JobStatus
from phalanx.store import Store
from tests.store.factories import make_event, make_record

THREADS = 6
JOBS_PER_THREAD = 20


def run_threads(target: Callable[[int], None], count: int = THREADS) -> list[BaseException]:
    """Start ``count`` threads together; the exceptions they raised."""
    errors: list[BaseException] = []
    barrier = threading.Barrier(count)

    def body(index: int) -> None:
        barrier.wait()
        try:
            target(index)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=body, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not any(t.is_alive() for t in threads), "a writer hung"
    return errors


def test_threads_creating_and_updating_jobs_lose_nothing(store: Store) -> None:
    def writer(index: int) -> None:
        names = [f"t{index}-{i}" for i in range(JOBS_PER_THREAD)]
        for n, name in enumerate(names):
            store.create_job(make_record(name, submitted_at=float(n)), make_event(name, 1.0))
            store.list_jobs(limit=5)  # readers interleave with writers
        store.save_jobs(
            [make_record(name, status=JobStatus.RUNNING, submitted_at=float(n))
             for n, name in enumerate(names)],
            [make_event(name, 2.0, "Started") for name in names],
        )

    assert run_threads(writer) == []

    total = THREADS * JOBS_PER_THREAD
    assert store.count_jobs_by_status()["Running"] == total
    assert len(store.list_jobs()) == total
    for index in range(THREADS):
        assert [e.reason for e in store.list_events(f"t{index}-7")] == ["Submitted", "Started"]


def test_racing_creations_of_one_name_let_exactly_one_win(store: Store) -> None:
    def create(index: int) -> None:
        store.create_job(make_record("contested", priority=index), make_event("contested", 1.0))

    errors = run_threads(create)

    assert len(errors) == THREADS - 1
    assert all(isinstance(e, Conflict) for e in errors), errors
    assert len(store.list_events("contested")) == 1


@pytest.mark.parametrize("stores", [2])
def test_separate_store_instances_write_the_same_database(db_url: str, stores: int) -> None:
    # Separate instances share no lock in Python, like two processes: only the database
    # serialises their writes.
    opened = [Store(db_url) for _ in range(stores)]
    try:
        def writer(index: int) -> None:
            store = opened[index % stores]
            for i in range(JOBS_PER_THREAD):
                name = f"s{index}-{i}"
                store.create_job(make_record(name), make_event(name, 1.0))
                store.save_jobs([make_record(name, status=JobStatus.SUCCEEDED)],
                                [make_event(name, 2.0, "Succeeded")])

        assert run_threads(writer, count=2 * stores) == []
        assert opened[0].count_jobs_by_status()["Succeeded"] == 2 * stores * JOBS_PER_THREAD
    finally:
        for store in opened:
            store.close()
