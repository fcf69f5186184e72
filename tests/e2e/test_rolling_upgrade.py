"""A rolling upgrade of replicas on one PostgreSQL store, with jobs in flight.

The next version is this one's code with one more migration that only adds (a table and a
nullable column), made in a copy of the package. Its replica starts beside the running
leader and migrates the store; the old leader goes on acknowledging submits on the newer
schema; SIGTERM hands over to the new version, which adopts the running gang; every job
succeeds with no pod started twice; and an old replica restarted mid-rollout runs on the
newer schema instead of refusing it. A next version whose migration drops a column is
refused by the old code, saying what to do.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from phalanx.store import head_revision
from tests.e2e.conftest import REPO
from tests.e2e.test_replicas import Replica, Replicas, _marking_job
from tests.leftovers import STARTUP_SECONDS
from tests.store.postgres import fresh_database, postgres_admin_url

pytestmark = [pytest.mark.slow, pytest.mark.postgres]

LEASE = 3.0
NEXT = f"{int(head_revision()) + 1:04d}"

ADDING = f'''"""The next version's migration: it only adds."""
import sqlalchemy as sa
from alembic import op

revision = "{NEXT}"
down_revision = "{head_revision()}"
branch_labels = None
depends_on = None
expand_only = True


def upgrade() -> None:
    op.create_table("next_notes", sa.Column("name", sa.String(63), primary_key=True))
    op.add_column("jobs", sa.Column("next_note", sa.String(255), nullable=True))


def downgrade() -> None:
    op.drop_column("jobs", "next_note")
    op.drop_table("next_notes")
'''

DROPPING = f'''"""A next version's migration that drops what older code reads."""
import sqlalchemy as sa
from alembic import op

revision = "{NEXT}"
down_revision = "{head_revision()}"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.drop_column("jobs", "finished_at")


def downgrade() -> None:
    op.add_column("jobs", sa.Column("finished_at", sa.Double, nullable=True))
'''


def next_version(root: Path, migration: str) -> Path:
    """A copy of this version's package with ``migration`` added: what to put first on
    PYTHONPATH to run 'the next version'."""
    shutil.copytree(REPO / "src" / "phalanx", root / "phalanx",
                    ignore=shutil.ignore_patterns("__pycache__"))
    (root / "phalanx" / "store" / "migrations" / "versions" / f"{NEXT}_next.py").write_text(
        migration)
    return root


def _revision(db: str) -> str:
    engine = create_engine(db.replace("postgresql://", "postgresql+psycopg://", 1))
    try:
        with engine.connect() as connection:
            return str(connection.execute(text("SELECT version_num FROM alembic_version"))
                       .scalar_one())
    finally:
        engine.dispose()


def _wait(condition: object, what: str, timeout: float = STARTUP_SECONDS) -> None:
    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"timed out: {what}"
        time.sleep(0.1)


def test_a_rolling_upgrade_with_jobs_in_flight_drops_nothing(tmp_path: Path) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    upgraded = next_version(tmp_path / "next", ADDING)
    with fresh_database(postgres_admin_url()) as db:
        old = Replica(0, home, db, lease=LEASE)
        new = Replica(1, home, db, lease=LEASE, pythonpath=upgraded)
        restarted = Replica(2, home, db, lease=LEASE)
        group = Replicas(home, [old, new, restarted])
        try:
            old.start()
            assert group.leader() is old
            with group.client() as client:
                client.submit(_marking_job("inflight", marks, 15, replicas=2))
                _wait(lambda: client.get("inflight").status.value == "Running",
                      "the gang runs")

                # The next version starts beside the leader and migrates the store.
                new.start()
                _wait(new.up, "the new version's replica answers")
                assert _revision(db) == NEXT
                # The old leader goes on acknowledging, on the newer schema.
                client.submit(_marking_job("during", marks, 0.5, replicas=1))

                # An old replica restarted mid-rollout runs on it instead of refusing.
                restarted.start()
                _wait(restarted.up, "the restarted old replica answers")
                assert restarted.alive()
                assert "without migrating" in restarted.log.read_text()

                assert old.proc is not None
                old.proc.send_signal(signal.SIGTERM)  # the rollout replaces the leader
                assert old.proc.wait(60) == 0
                leader = group.leader(besides=old)
                assert leader in (new, restarted)
                for name in ("inflight", "during"):
                    assert client.wait(name, timeout=120).status.value == "Succeeded", name
                client.submit(_marking_job("after", marks, 0.2, replicas=1))
                assert client.wait("after", timeout=120).status.value == "Succeeded"
            assert _revision(db) == NEXT
            started = {path.name: path.read_text().split() for path in marks.iterdir()}
            assert len([p for p in started if p.startswith("inflight-")]) == 2, started
            # Adopted, not restarted: each pod of the gang started once.
            assert all(lines == ["1"] for pod, lines in started.items()
                       if pod.startswith("inflight-")), started
        finally:
            group.stop()


OPEN = "from phalanx.store import Store; import sys; Store(sys.argv[1]).close()"


def test_a_next_version_that_drops_what_old_code_reads_is_refused_by_the_old_code(
    tmp_path: Path,
) -> None:
    dropping = next_version(tmp_path / "next", DROPPING)
    with fresh_database(postgres_admin_url()) as db:
        env = {**os.environ, "PYTHONPATH": str(dropping)}
        migrated = subprocess.run([sys.executable, "-c", OPEN, db], cwd=REPO, env=env,
                                  capture_output=True, text=True, timeout=120)
        assert migrated.returncode == 0, migrated.stderr
        assert _revision(db) == NEXT
        refused = subprocess.run([sys.executable, "-c", OPEN, db], cwd=REPO,
                                 capture_output=True, text=True, timeout=120)
        assert refused.returncode != 0
        assert f"revision {NEXT!r}" in refused.stderr
        assert f"needs the code of revision {NEXT!r} or newer" in refused.stderr
        assert "upgrade Phalanx" in refused.stderr
