"""Snapshots of the store restored onto another: SQLite to PostgreSQL and back, every row
kept, ids continuing after the restored ones; a store with rows refused untouched."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from phalanx.errors import Conflict, NotFound, SpecError
from phalanx.spec import JobSpec
from phalanx.spec.status import JobEvent, JobRecord
from phalanx.store import Store
from phalanx.store.backup import Snapshot, restore_snapshot, seal, take_snapshot, unseal
from phalanx.store.migrate import current_revision, head_revision
from phalanx.store.store import JobFilter
from tests.store.postgres import fresh_database, postgres_admin_url


def _record(name: str) -> JobRecord:
    spec = JobSpec.model_validate({"name": name, "labels": {"team": "a"}, "podSets": [
        {"name": "w", "resources": {"cpu": "1"}, "command": ["true"]}]})
    now = time.time()
    return JobRecord(name=name, spec=spec, queue="default", cluster_queue="default",
                     submitted_at=now, queued_at=now, user="alice")


def _fill(url: str) -> None:
    with Store(url) as store:
        records = [_record(f"job-{i}") for i in range(30)]
        store.create_jobs(records, [JobEvent(job=r.name, time=r.submitted_at,
                                             reason="Submitted") for r in records])


@pytest.mark.postgres
@pytest.mark.parametrize("direction", ["sqlite-to-postgresql", "postgresql-to-sqlite"])
def test_a_snapshot_restores_across_backends(tmp_path: Path, direction: str) -> None:
    sqlite_url = f"sqlite:///{tmp_path / 'phalanx.db'}"
    with fresh_database(postgres_admin_url()) as pg_url:
        source, target = (sqlite_url, pg_url) if direction.startswith("sqlite") else (
            pg_url, sqlite_url)
        _fill(source)
        (tmp_path / "old").mkdir()
        (tmp_path / "old" / "key-pepper").write_text("ab" * 32 + "\n")
        data = seal(take_snapshot(source, tmp_path / "old"), b"passphrase")
        with pytest.raises(SpecError, match="passphrase"):
            unseal(data, b"another")
        restore_snapshot(unseal(data, b"passphrase"), target, tmp_path / "new")
        assert (tmp_path / "new" / "key-pepper").read_text() == "ab" * 32 + "\n"
        with Store(source) as old, Store(target) as new:
            assert [r.model_dump() for r in new.list_jobs()] == [
                r.model_dump() for r in old.list_jobs()]
            assert new.list_events("job-7") == old.list_events("job-7")
            assert new.page_jobs(JobFilter(), limit=1).remaining == 29
            # New rows get ids after the restored ones (PostgreSQL's sequences moved on).
            new.add_events([JobEvent(job="job-7", time=time.time() + 1, reason="Later")])
            assert [e.reason for e in new.list_events("job-7")] == ["Submitted", "Later"]
            # A store with rows is refused, naming --db, and left as it was.
            with pytest.raises(Conflict) as refused:
                restore_snapshot(unseal(data, b"passphrase"), target, tmp_path / "new")
            assert refused.value.field == "--db"
            assert len(new.list_jobs()) == 30



def test_a_snapshot_is_one_instant_while_jobs_are_written(db_url: str, tmp_path: Path) -> None:
    """Jobs are created with their event, one transaction each, while snapshots are taken:
    each snapshot has every event's job and every job's event (reading the tables in
    separate transactions would catch events of jobs created after the jobs were read)."""
    _fill(db_url)
    stop = threading.Event()

    def write() -> None:
        with Store(db_url) as store:
            i = 0
            while not stop.is_set():
                record = _record(f"more-{i}")
                store.create_job(record, JobEvent(job=record.name, time=record.submitted_at,
                                                  reason="Submitted"))
                i += 1

    writer = threading.Thread(target=write)
    writer.start()
    try:
        sizes = set()
        for _ in range(8):
            snapshot = take_snapshot(db_url, tmp_path)
            jobs = {row["name"] for row in snapshot.tables["jobs"]}
            assert {row["job"] for row in snapshot.tables["job_events"]} == jobs
            sizes.add(len(jobs))
    finally:
        stop.set()
        writer.join()
    assert len(sizes) > 1  # the writer did write between snapshots


def test_a_state_directory_with_other_keys_is_refused(db_url: str, tmp_path: Path) -> None:
    source = f"sqlite:///{tmp_path / 'source.db'}"
    _fill(source)
    old, new = tmp_path / "old", tmp_path / "new"
    old.mkdir()
    new.mkdir()
    (old / "key-pepper").write_text("ab" * 32)
    (new / "key-pepper").write_text("cd" * 32)
    snapshot = take_snapshot(source, old)
    with pytest.raises(Conflict) as refused:
        restore_snapshot(snapshot, db_url, new)
    assert refused.value.field == "--home"
    assert (new / "key-pepper").read_text() == "cd" * 32
    with Store(db_url) as store:
        assert store.list_jobs() == []  # nothing was written


def test_a_missing_sqlite_store_is_not_created_by_a_backup(tmp_path: Path) -> None:
    with pytest.raises(NotFound) as missing:
        take_snapshot(f"sqlite:///{tmp_path / 'nowhere.db'}", tmp_path)
    assert missing.value.field == "--db"
    assert not (tmp_path / "nowhere.db").exists()


def test_a_backup_of_an_older_schema_restores_into_this_one(db_url: str, tmp_path: Path) -> None:
    """A backup written at revision 0009 (before the leases table) restores onto a store
    this version already migrated: moved back to 0009 (it is empty), filled, moved on."""
    source = f"sqlite:///{tmp_path / 'source.db'}"
    _fill(source)
    snapshot = take_snapshot(source, tmp_path)
    older = Snapshot("0009", snapshot.created_at, snapshot.tables, {})
    Store(db_url).close()  # a new store, at this version's head
    restore_snapshot(older, db_url, tmp_path / "new")
    with Store(db_url) as store:
        assert len(store.list_jobs()) == 30
        assert current_revision(store.engine) == head_revision()
