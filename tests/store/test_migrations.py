"""Schema migrations: new databases, re-opened ones, concurrent first opens."""

from __future__ import annotations

import ast
import subprocess
import sys
import time
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import event, inspect, text

from phalanx.errors import ServerError
from phalanx.store import Store, current_revision, head_revision, migrate
from phalanx.store.migrate import downgrade, oldest_reader, upgrade
from phalanx.store.tables import metadata
from tests.store.factories import make_event, make_record

TABLES = {"jobs", "job_events", "job_labels", "queue_config", "idempotency_keys", "users",
          "teams", "api_keys", "audit_log", "secrets", "leases", "schema_info",
          "alembic_version"}


def test_a_new_database_is_migrated_to_head(store: Store) -> None:
    assert current_revision(store.engine) == head_revision() == "0011"
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


def _as_if_migrated_by_a_newer_version(store: Store, reader: str) -> None:
    with store.engine.begin() as connection:
        connection.execute(text("UPDATE alembic_version SET version_num = '9999'"))
        connection.execute(text("UPDATE schema_info SET value = :reader "
                                "WHERE name = 'oldest_reader'"), {"reader": reader})


def test_a_schema_from_a_newer_version_is_refused(db_url: str) -> None:
    with Store(db_url) as store:
        _as_if_migrated_by_a_newer_version(store, "9998")  # needs code this one is not
    with pytest.raises(ServerError) as caught:
        Store(db_url)
    assert caught.value.field == "db"
    assert "9999" in caught.value.message and "'9998' or newer" in caught.value.message
    assert "upgrade Phalanx" in (caught.value.fix or "")


def test_a_newer_schema_made_only_of_additions_runs_unmigrated(db_url: str) -> None:
    """Mid-way through a rolling upgrade: a newer version migrated the store by additions
    only and recorded that this version's head may still run on it."""
    with Store(db_url) as store:
        store.create_job(make_record("before"))
        _as_if_migrated_by_a_newer_version(store, head_revision())
    with Store(db_url) as store:
        assert current_revision(store.engine) == "9999"  # left as the newer version made it
        store.create_job(make_record("during"))
        assert sorted(r.name for r in store.list_jobs()) == ["before", "during"]


def test_each_upgrade_records_the_oldest_revision_that_may_run_on_it(db_url: str) -> None:
    with Store(db_url) as store, store.engine.connect() as connection:
        recorded = connection.execute(text(
            "SELECT value FROM schema_info WHERE name = 'oldest_reader'")).scalar_one()
    # 0011 only adds; 0010 does not say so, so code at 0010 is the oldest that may run.
    assert recorded == oldest_reader() == "0010"
    assert oldest_reader("0010") == "0010"


# What a migration that says ``expand_only = True`` may call: it only adds.
EXPANDING_OPS = {"create_table", "create_index", "add_column", "batch_alter_table"}


def _ops_called(function: ast.FunctionDef) -> list[ast.Call]:
    return [node for node in ast.walk(function) if isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name) and node.func.value.id in ("op", "batch")]


def _column_may_be_missing(call: ast.Call) -> bool:
    """An added column old code can leave out of its inserts: nullable or defaulted."""
    column = call.args[-1] if call.args else None
    if not isinstance(column, ast.Call):
        return False
    keywords = {k.arg: k.value for k in column.keywords}
    nullable = keywords.get("nullable")
    return "server_default" in keywords or nullable is None or (
        isinstance(nullable, ast.Constant) and nullable.value is True)


def _not_additions(source: str) -> list[str] | None:
    """What a migration's ``upgrade`` does beyond adding; None if it does not say
    ``expand_only = True``."""
    tree = ast.parse(source)
    flags = [node for node in tree.body if isinstance(node, ast.Assign)
             and any(isinstance(t, ast.Name) and t.id == "expand_only" for t in node.targets)]
    if not flags or not (isinstance(flags[0].value, ast.Constant) and flags[0].value.value):
        return None
    [upgrade_function] = [node for node in tree.body if isinstance(node, ast.FunctionDef)
                          and node.name == "upgrade"]
    found = []
    for call in _ops_called(upgrade_function):
        assert isinstance(call.func, ast.Attribute)
        if call.func.attr not in EXPANDING_OPS or (
                call.func.attr == "add_column" and not _column_may_be_missing(call)):
            found.append(ast.unparse(call))
    return found


def test_migrations_that_say_they_only_add_only_add() -> None:
    checked = {path.name: _not_additions(path.read_text())
               for path in sorted((Path(migrate.MIGRATIONS) / "versions").glob("*.py"))}
    assert checked["0011_schema_readers.py"] == []
    assert {name: found for name, found in checked.items() if found} == {}


@pytest.mark.parametrize(("body", "caught"), [
    ("op.drop_column('jobs', 'queue')", True),
    ("op.alter_column('jobs', 'queue', new_column_name='q')", True),
    ("op.add_column('jobs', sa.Column('x', sa.String, nullable=False))", True),
    ("op.add_column('jobs', sa.Column('x', sa.String, nullable=False, server_default='a'))",
     False),
    ("op.add_column('jobs', sa.Column('x', sa.String))", False),
    ("op.create_index('ix', 'jobs', ['queue'])", False),
])
def test_the_additions_check_catches_what_old_code_cannot_run_on(body: str,
                                                                 caught: bool) -> None:
    source = f"expand_only = True\n\ndef upgrade() -> None:\n    {body}\n"
    assert bool(_not_additions(source)) is caught
    assert _not_additions(source.replace("expand_only = True", "expand_only = False")) is None


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
