"""The leader's lease and the fence on every write, on SQLite and PostgreSQL."""

from __future__ import annotations

import threading

import pytest

from phalanx.errors import NotLeader, SpecError
from phalanx.store import Store
from phalanx.store.leases import Fence, LeaseStore
from tests.store.factories import make_record

URL_A, URL_B = "http://a:7780", "http://b:7780"


def test_the_first_replica_takes_term_1_and_renewing_keeps_it(store: Store) -> None:
    leases = LeaseStore(store)
    first = leases.try_acquire("a", URL_A, 5.0, now=100.0)
    assert (first.holder, first.term, first.expires_at) == ("a", 1, 105.0)
    renewed = leases.try_acquire("a", URL_A, 5.0, now=103.0)
    assert (renewed.holder, renewed.term, renewed.expires_at) == ("a", 1, 108.0)
    assert leases.read() == renewed


def test_a_live_lease_is_not_taken_and_an_expired_one_is_with_the_next_term(
    store: Store,
) -> None:
    leases = LeaseStore(store)
    leases.try_acquire("a", URL_A, 5.0, now=100.0)
    refused = leases.try_acquire("b", URL_B, 5.0, now=104.9)
    assert (refused.holder, refused.url, refused.term) == ("a", URL_A, 1)
    taken = leases.try_acquire("b", URL_B, 5.0, now=105.0)
    assert (taken.holder, taken.url, taken.term) == ("b", URL_B, 2)
    back = leases.try_acquire("a", URL_A, 5.0, now=111.0)
    assert (back.holder, back.term) == ("a", 3)


def test_a_write_under_a_stale_term_is_refused_and_writes_nothing(store: Store) -> None:
    leases = LeaseStore(store)
    old = leases.try_acquire("a", URL_A, 5.0, now=100.0)
    store.fence = Fence(old.name, "a", old.term)
    store.create_job(make_record("before"))
    leases.try_acquire("b", URL_B, 5.0, now=200.0)  # a was paused; b took over
    with pytest.raises(NotLeader) as caught:
        store.create_job(make_record("after"))
    assert caught.value.field == "leader"
    assert "term 2" in caught.value.message
    store.fence = None
    assert [r.name for r in store.list_jobs()] == ["before"]


def test_a_released_lease_is_taken_at_once(store: Store) -> None:
    leases = LeaseStore(store)
    held = leases.try_acquire("a", URL_A, 60.0)
    assert leases.release(Fence(held.name, "a", held.term))
    taken = leases.try_acquire("b", URL_B, 60.0)
    assert (taken.holder, taken.term) == ("b", 2)
    assert not leases.release(Fence(held.name, "a", held.term))  # not a's to give any more


def test_a_lease_of_no_time_is_refused_naming_the_option(store: Store) -> None:
    with pytest.raises(SpecError) as caught:
        LeaseStore(store).try_acquire("a", URL_A, 0.0)
    assert caught.value.field == "--lease"


def test_replicas_racing_for_a_free_lease_elect_exactly_one(db_url: str) -> None:
    stores = [Store(db_url) for _ in range(4)]
    results: dict[str, tuple[str, int]] = {}
    go = threading.Barrier(len(stores))

    def contend(i: int, store: Store) -> None:
        go.wait()
        lease = LeaseStore(store).try_acquire(f"r{i}", f"http://r{i}", 30.0)
        results[f"r{i}"] = (lease.holder, lease.term)

    threads = [threading.Thread(target=contend, args=(i, s)) for i, s in enumerate(stores)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    for store in stores:
        store.close()
    winners = {holder for holder, _ in results.values()}
    assert len(results) == 4 and len(winners) == 1
    assert {term for _, term in results.values()} == {1}


@pytest.mark.postgres
def test_a_leader_frozen_mid_write_does_not_hold_the_lease_for_ever() -> None:
    from sqlalchemy.exc import DBAPIError

    from tests.store.postgres import fresh_database, postgres_admin_url

    with fresh_database(postgres_admin_url()) as url, Store(url) as frozen, Store(url) as other:
        frozen.end_idle_transactions_after(0.5)
        held = LeaseStore(frozen).try_acquire("a", URL_A, 1.0)
        frozen.fence = Fence(held.name, "a", held.term)
        # The write holds the lease row's lock ... and freezes; the server ends it.
        with pytest.raises(DBAPIError), frozen.write():
                taken = None
                for _ in range(50):
                    try:
                        taken = LeaseStore(other).try_acquire("b", URL_B, 1.0,
                                                              now=held.expires_at + 1)
                        break
                    except DBAPIError:  # the lock wait gave up; the next try follows
                        continue
                assert taken is not None and (taken.holder, taken.term) == ("b", 2)
        frozen.fence = None
        assert LeaseStore(other).read() == taken


@pytest.mark.postgres
def test_the_idle_limit_ends_frozen_writes_only_not_slow_reads() -> None:
    """A read paused between its statements (a thread descheduled on a loaded machine)
    holds no lock a takeover waits on: the limit leaves it alone."""
    import time

    from sqlalchemy import text

    from tests.store.factories import make_record
    from tests.store.postgres import fresh_database, postgres_admin_url

    with fresh_database(postgres_admin_url()) as url, Store(url) as store:
        store.end_idle_transactions_after(0.2)
        store.create_job(make_record("kept"))
        with store.engine.connect() as connection:
            connection.execute(text("SELECT 1"))
            time.sleep(0.6)
            assert connection.execute(text("SELECT name FROM jobs")).scalars().all() == \
                ["kept"]
        assert [r.name for r in store.list_jobs()] == ["kept"]
