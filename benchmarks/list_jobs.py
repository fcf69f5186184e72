"""First-page latency of ``GET /v1/jobs`` (and ``phalanx jobs``) with 100,000 jobs stored.

It fills a fresh store through the store API, in batches (not over HTTP): 95 % of the
jobs finished, 5 % queued in a held ClusterQueue, spread over 10 LocalQueues, 20 users
and 10 values of a ``team`` label. Then it starts a real control plane (``phalanx up``,
simulated compute plane) on that store and times the first page of 50, unfiltered and
with each filter, over HTTP; and ``phalanx jobs`` (the CLI's default page) end to end.

    python -m benchmarks.list_jobs                    # SQLite, 100,000 jobs
    python -m benchmarks.list_jobs --db postgresql://...
    python -m benchmarks.list_jobs --jobs 5000 --samples 20   # smoke run
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
from rich.console import Console
from rich.table import Table

from benchmarks.harness import ServerProcess, percentile, write_json
from phalanx.spec import JobSpec, QueueConfig, parse_config_documents
from phalanx.spec.status import JobRecord, JobStatus
from phalanx.store import Store

console = Console(stderr=True)
QUEUES = 10
USERS = 20
TEAMS = 10
BATCH = 5000
NODES = "nodes:\n  - name: sim-a\n    allocatable: {cpu: 64, memory: 256Gi}\n"


def queue_config() -> QueueConfig:
    docs: list[dict[str, Any]] = [{"kind": "ResourceFlavor", "name": "default"}, {
        "kind": "ClusterQueue", "name": "held", "stopPolicy": "Hold",
        "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
            {"name": "default", "resources": [{"name": "cpu", "nominalQuota": "1"}]}]}],
    }]
    docs += [{"kind": "LocalQueue", "name": f"q{i}", "clusterQueue": "held"}
             for i in range(QUEUES)]
    return QueueConfig().merged(parse_config_documents(docs))


def record(run: str, i: int, now: float, finished: bool) -> JobRecord:
    queue = f"q{i % QUEUES}"
    spec = JobSpec.model_validate({
        "name": f"{run}-{i}", "queue": queue, "labels": {"team": f"t{i % TEAMS}"},
        "podSets": [{"name": "worker", "resources": {"cpu": "100m"}, "command": ["true"]}],
    })
    submitted = now - 86400 + i * 0.5
    return JobRecord(
        name=spec.name, spec=spec, queue=queue, cluster_queue="held", submitted_at=submitted,
        queued_at=submitted, user=f"user{i % USERS}",
        status=JobStatus.SUCCEEDED if finished else JobStatus.QUEUED,
        finished_at=submitted + 60 if finished else None,
    )


def fill(db_url: str, jobs: int) -> tuple[str, float]:
    """Store ``jobs`` jobs (every 20th queued) in batches; the run prefix and seconds taken."""
    run = "l" + uuid.uuid4().hex[:5]
    now = time.time()
    began = time.perf_counter()
    with Store(db_url) as store:
        store.save_config(queue_config())
        for start in range(0, jobs, BATCH):
            store.create_jobs([record(run, i, now, finished=i % 20 != 0)
                               for i in range(start, min(jobs, start + BATCH))])
    return run, time.perf_counter() - began


def time_requests(api: httpx.Client, params: dict[str, Any], samples: int) -> dict[str, Any]:
    api.get("/v1/jobs", params=params).raise_for_status()  # warm
    latencies = []
    for _ in range(samples):
        began = time.perf_counter()
        response = api.get("/v1/jobs", params=params)
        latencies.append(time.perf_counter() - began)
        response.raise_for_status()
    body = response.json()
    return {"params": params, "items": len(body["items"]),
            "remaining": body.get("remainingItemCount"),
            "p50_ms": percentile(latencies, 50) * 1000,
            "p99_ms": percentile(latencies, 99) * 1000}


def time_cli(home: Path, samples: int) -> dict[str, Any]:
    env = {**os.environ, "PHALANX_HOME": str(home), "COLUMNS": "200"}
    env.pop("PHALANX_URL", None)
    env.pop("PHALANX_TOKEN", None)
    walls = []
    for args in [["jobs"]] * samples:
        began = time.perf_counter()
        subprocess.run([sys.executable, "-m", "phalanx.cli.main", *args], env=env, check=True,
                       capture_output=True)
        walls.append(time.perf_counter() - began)
    return {"p50_s": percentile(walls, 50), "max_s": max(walls)}


def measure(store_name: str, db: str | None, jobs: int, samples: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="phalanx-bench-") as tmp:
        home = Path(tmp) / "home"
        home.mkdir()
        url = db or f"sqlite:///{home / 'phalanx.db'}"
        console.log(f"{store_name}: storing {jobs:,} jobs")
        run, fill_s = fill(url, jobs)
        (Path(tmp) / "nodes.yaml").write_text(NODES)
        args = ["--compute", "simulated", "--nodes", str(Path(tmp) / "nodes.yaml")]
        if db:
            args += ["--db", db]
        with ServerProcess(home, *args) as server:
            console.log(f"{store_name}: control plane at {server.url}")
            headers = {"Authorization": f"Bearer {server.token}"}
            with httpx.Client(base_url=server.url, headers=headers, timeout=60) as api:
                second = api.get("/v1/jobs", params={"limit": 50}).json()["continue"]
                cases = {
                    "newest 50": {"limit": 50},
                    "second page": {"limit": 50, "continue": second},
                    "queue=q3": {"limit": 50, "queue": "q3"},
                    "status=Queued": {"limit": 50, "status": "Queued"},
                    "user=user7": {"limit": 50, "user": "user7"},
                    "label team=t5": {"limit": 50, "label": "team=t5"},
                    "queue+user+label": {"limit": 50, "queue": "q5", "user": "user5",
                                         "label": "team=t5"},
                }
                results = {name: time_requests(api, params, samples)
                           for name, params in cases.items()}
            cli = time_cli(home, max(3, samples // 20))
    return {"store": store_name, "run": run, "fill_s": fill_s, "pages": results,
            "cli_jobs": cli}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--samples", type=int, default=200, help="requests per case")
    parser.add_argument("--db", default=os.environ.get("PHALANX_BENCH_POSTGRES_URL"),
                        help="also measure on this PostgreSQL URL (an empty database)")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()

    results = [measure("sqlite", None, args.jobs, args.samples)]
    if args.db:
        results.append(measure("postgresql", args.db, args.jobs, args.samples))

    table = Table(title=f"First page of GET /v1/jobs with {args.jobs:,} jobs stored")
    for column in ("store", "page", "items", "remaining", "p50 ms", "p99 ms"):
        table.add_column(column, justify="right")
    for r in results:
        for case, page in r["pages"].items():
            table.add_row(r["store"], case, str(page["items"]), f"{page['remaining']:,}",
                          f"{page['p50_ms']:.1f}", f"{page['p99_ms']:.1f}")
        table.add_row(r["store"], "`phalanx jobs` (CLI, whole run)", "50", "",
                      f"{r['cli_jobs']['p50_s'] * 1000:.0f}", "")
    Console().print(table)
    path = write_json("list_jobs", {"jobs": args.jobs, "samples": args.samples,
                                    "results": results}, args.out)
    console.log(f"wrote {path}")


if __name__ == "__main__":
    main()
