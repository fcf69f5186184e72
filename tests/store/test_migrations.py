"""Schema migrations: new databases, re-opened ones, concurrent first opens."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import event, inspect, text

from phalanx.errors import ServerError
from phalanx.store import Store, current_revision, head_revision
from phalanx.store.migrate import downgrade, upgrade
from phalanx.store.tables import metadata
from tests.store.factories import make_event, make_record

TABLES = {"jobs", "job_events", "job_labels", "queue_config", "idempotency_keys", "users",
          "teams", "api_keys", "audit_log", "secrets", "leases",
          "alembic_version"}


def test_a_new_database_is_migrated_to_head(store: Store) -> None:
    assert current_revision(store.engine) == head_revision() == "0010"
    assert set(inspect(store.engine).get_table_names()) >= TABLES
    indexed = {tuple(ix["column_names"]) for ix in inspect(store.engine).get_indexes("jobs")}
    assert {("status", "submitted_at", "name"), ("queue", "submitted_at", "name"),
            ("submitted_at", "name")} <= indexed


def test_the_migrations_build_exactly_the_declared_tables(store: Store) -> None:
    with store.engine.connect() as connection:
        differences = compare_metadata(MigrationContext.configure(connection), metadata)
    assert differences == []


def test_reopening_keeps_data_and_runs_no_ddl(db_url: str) -> None:
    with Store(db_url) as store:
        store.create_job(make_record("kept"), make_event("kept", 1.0))
    with Store(db_url) as store:
        assert store.get_job("kept").name == "kept"
        statements: list[str] = []
        event.listen(store.engine, "before_cursor_execute",
                     lambda _c, _cur, statement, *_: statements.append(statement))
        upgrade(store.engine)
        assert statements, "the revision check should have queried the database"
        assert all(s.lstrip().upper().startswith(("SELECT", "BEGIN", "PRAGMA"))
                   for s in statements), statements
        assert current_revision(store.engine) == head_revision()


def test_a_downgraded_database_is_upgraded_on_open(db_url: str) -> None:
    with Store(db_url) as store:
        downgrade(store.engine, "base")
        assert current_revision(store.engine) is None
        assert "jobs" not in inspect(store.engine).get_table_names()
    with Store(db_url) as store:
        assert current_revision(store.engine) == head_revision()
        store.create_job(make_record("after"))
        assert [r.name for r in store.list_jobs()] == ["after"]


def test_a_schema_from_a_newer_version_is_refused(db_url: str) -> None:
    with Store(db_url) as store, store.engine.begin() as connection:
        connection.execute(text("UPDATE alembic_version SET version_num = '9999'"))
    with pytest.raises(ServerError) as caught:
        Store(db_url)
    assert caught.value.field == "db"
    assert "9999" in caught.value.message


OPENER = """
import sys, time
from pathlib import Path
from phalanx.store import Store, current_revision
from tests.store.factories import make_record
go = Path(sys.argv[2])
(go.parent / f"ready-{sys.argv[3]}").touch()
while not go.exists():
    time.sleep(0.005)
with Store(sys.argv[1]) as store:
    store.create_job(make_record(sys.argv[3]))
    print(current_revision(store.engine))
"""


@pytest.mark.slow
def test_processes_opening_a_new_database_at_once_all_succeed(
    db_url: str, tmp_path: Path
) -> None:
    go = tmp_path / "go"
    repo = Path(__file__).resolve().parents[2]
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", OPENER, db_url, str(go), f"opener-{i}"],
            cwd=repo, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        for i in range(4)
    ]
    deadline = time.monotonic() + 60
    # Open together: release them only once every process has finished importing.
    while len(list(tmp_path.glob("ready-*"))) < len(processes):
        assert time.monotonic() < deadline, "the opening processes did not start"
        assert all(p.poll() is None for p in processes), "an opening process died early"
        time.sleep(0.01)
    go.touch()
    results = [p.communicate(timeout=60) for p in processes]

    for process, (out, err) in zip(processes, results, strict=True):
        assert process.returncode == 0, err
        assert out.strip() == head_revision()
    with Store(db_url) as store:
        assert sorted(r.name for r in store.list_jobs()) == [f"opener-{i}" for i in range(4)]


def test_jobs_stored_before_labels_had_a_table_get_their_labels(db_url: str) -> None:
    from phalanx.store import JobFilter
    from tests.store.factories import full_record

    with Store(db_url) as store:
        downgrade(store.engine, "0001")
        row = {"name": "old", "status": "Queued", "queue": "team-a", "cluster_queue": "cq",
               "priority": 0, "submitted_at": 1.0, "finished_at": None,
               "record": full_record("old").to_dict()}
        with store.engine.begin() as connection:
            connection.execute(text(
                "INSERT INTO jobs (name, status, queue, cluster_queue, priority, submitted_at,"
                " finished_at, record) VALUES (:name, :status, :queue, :cluster_queue,"
                " :priority, :submitted_at, :finished_at, :record)"),
                {**row, "record": __import__("json").dumps(row["record"])})
    with Store(db_url) as store:
        page = store.page_jobs(JobFilter(labels={"team": "a"}), limit=5)
        assert [r.name for r in page.items] == ["old"]
