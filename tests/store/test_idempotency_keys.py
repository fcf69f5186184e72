"""Idempotency keys are stored with the jobs they created, in one transaction."""

from __future__ import annotations

import time

import pytest
from sqlalchemy import inspect

from phalanx.errors import Conflict
from phalanx.store import IdempotentRequest, Store, current_revision
from phalanx.store.migrate import downgrade, head_revision, upgrade
from tests.store.factories import make_event, make_record


def test_the_migration_adds_the_keys_table_to_an_older_database(db_url: str) -> None:
    with Store(db_url) as store:
        store.create_job(make_record("before"), make_event("before", 1.0))
        downgrade(store.engine, "0001")
        assert "idempotency_keys" not in inspect(store.engine).get_table_names()
        upgrade(store.engine)
        assert current_revision(store.engine) == head_revision()
        assert "idempotency_keys" in inspect(store.engine).get_table_names()
        assert store.get_job("before").name == "before"


def test_a_key_is_stored_with_its_jobs_or_not_at_all(store: Store) -> None:
    request = IdempotentRequest("k-1", "a" * 64, ("one", "two"))
    store.create_jobs([make_record("one"), make_record("two")], request=request)
    assert store.get_request("k-1") == request
    store.create_job(make_record("taken"))
    lost = IdempotentRequest("k-2", "b" * 64, ("taken",))
    with pytest.raises(Conflict) as caught:
        store.create_job(make_record("taken"), request=lost)
    assert caught.value.field == "name"
    assert store.get_request("k-2") is None
    again = IdempotentRequest("k-1", "a" * 64, ("three",))
    with pytest.raises(Conflict) as caught:
        store.create_job(make_record("three"), request=again)
    assert caught.value.field == "Idempotency-Key"
    assert [r.name for r in store.list_jobs()].count("three") == 0


def test_keys_older_than_the_cutoff_are_forgotten_and_younger_ones_kept(store: Store) -> None:
    old = IdempotentRequest("old", "a" * 64, ("job-old",))
    store.create_job(make_record("job-old"), request=old)
    cutoff = time.time() + 1e-3
    time.sleep(0.01)
    young = IdempotentRequest("young", "b" * 64, ("job-young",))
    store.create_job(make_record("job-young"), request=young)
    assert store.forget_requests_before(cutoff) == 1
    assert store.get_request("old") is None
    assert store.get_request("young") == young
    assert store.get_job("job-old").name == "job-old"  # the job itself stays
    assert store.forget_requests_before(cutoff) == 0
