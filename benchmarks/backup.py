"""Time of ``phalanx backup`` and ``phalanx restore`` (and of starting a control plane on the
restored store) with N jobs stored, each with one event: the figures behind the RPO and
RTO of docs/production.md.

It fills a fresh store through the store API (as benchmarks/list_jobs.py does), then runs
the CLI as an operator would: ``phalanx backup FILE``, ``phalanx restore FILE`` into a
new state directory and store, and ``phalanx up`` on it until it answers.

    python -m benchmarks.backup                        # SQLite, 10,000 jobs
    python -m benchmarks.backup --db postgresql://postgres@host/postgres   # and PostgreSQL
    python -m benchmarks.backup --jobs 1000            # smoke run
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from benchmarks.harness import ServerProcess, write_json
from benchmarks.list_jobs import BATCH, NODES, queue_config, record
from phalanx.spec.status import JobEvent
from phalanx.store import Store
from phalanx.store.backup import PASSPHRASE_ENV

console = Console(stderr=True)


@contextmanager
def databases(admin_url: str | None, count: int) -> Iterator[list[str | None]]:
    """``count`` new empty PostgreSQL databases on the server of ``admin_url`` (dropped
    after), or Nones (each state directory's own SQLite file) without one."""
    if admin_url is None:
        yield [None] * count
        return
    admin = make_url(admin_url)
    engine = create_engine(admin, isolation_level="AUTOCOMMIT")
    names = [f"phalanx_bench_{uuid.uuid4().hex[:12]}" for _ in range(count)]
    try:
        with engine.connect() as connection:
            for name in names:
                connection.execute(text(f'CREATE DATABASE "{name}"'))
        yield [admin.set(database=n).render_as_string(hide_password=False) for n in names]
    finally:
        with engine.connect() as connection:
            for name in names:
                connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        engine.dispose()


def fill(url: str, jobs: int) -> None:
    run, now = "b" + uuid.uuid4().hex[:5], time.time()
    with Store(url) as store:
        store.save_config(queue_config())
        for start in range(0, jobs, BATCH):
            records = [record(run, i, now, finished=i % 20 != 0)
                       for i in range(start, min(jobs, start + BATCH))]
            store.create_jobs(records, [JobEvent(job=r.name, time=r.submitted_at,
                                                 type="Normal", reason="Submitted",
                                                 message="submitted") for r in records])


def db_args(db: str | None) -> list[str]:
    return ["--db", db] if db else []


def cli(home: Path, *args: str) -> float:
    began = time.perf_counter()
    subprocess.run([sys.executable, "-m", "phalanx.cli.main", "--home", str(home), *args],
                   check=True, capture_output=True,
                   env={**os.environ, PASSPHRASE_ENV: "benchmark passphrase"})
    return time.perf_counter() - began


def measure(store_name: str, admin_url: str | None, jobs: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="phalanx-bench-") as tmp, \
            databases(admin_url, 2) as (source_db, target_db):
        old, new, file = Path(tmp) / "old", Path(tmp) / "new", Path(tmp) / "phalanx.backup"
        old.mkdir()
        console.log(f"{store_name}: storing {jobs:,} jobs")
        fill(source_db or f"sqlite:///{old / 'phalanx.db'}", jobs)
        backup_s = cli(old, "backup", str(file), *db_args(source_db))
        restore_s = cli(new, "restore", str(file), *db_args(target_db))
        (Path(tmp) / "nodes.yaml").write_text(NODES)
        began = time.perf_counter()
        with ServerProcess(new, "--compute", "simulated", "--nodes",
                           str(Path(tmp) / "nodes.yaml"), *db_args(target_db)) as server, \
                server.client() as client:
            start_s = time.perf_counter() - began
            page = client.list_page(limit=1)  # it answers with the restored jobs
            assert page.remaining_item_count == jobs - 1, "the restored control plane lacks jobs"
        return {"store": store_name, "jobs": jobs, "backup_s": backup_s,
                "restore_s": restore_s, "start_s": start_s, "file_bytes": file.stat().st_size}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--db", default=os.environ.get("PHALANX_BENCH_POSTGRES_URL"),
                        help="also measure on this PostgreSQL server (a URL that may create "
                        "databases)")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    results = [measure("sqlite", None, args.jobs)]
    if args.db:
        results.append(measure("postgresql", args.db, args.jobs))
    table = Table(title=f"Backup and restore with {args.jobs:,} jobs stored (CLI, whole run)")
    for column in ("store", "backup s", "restore s", "start on it s", "file MB"):
        table.add_column(column, justify="right")
    for r in results:
        table.add_row(r["store"], f"{r['backup_s']:.1f}", f"{r['restore_s']:.1f}",
                      f"{r['start_s']:.1f}", f"{r['file_bytes'] / 1e6:.1f}")
    Console().print(table)
    path = write_json("backup", {"jobs": args.jobs, "results": results}, args.out)
    console.log(f"wrote {path}")


if __name__ == "__main__":
    main()
