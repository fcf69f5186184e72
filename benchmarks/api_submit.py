"""HTTP submission throughput and submit-to-start latency of the embedded control plane.

For each store (SQLite, and PostgreSQL when a URL is given) it starts a real
control plane (``phalanx up``, local compute plane) in a fresh state directory and:

1. times a 1-pod job from the client's POST to the first line its process prints
   (a timestamp), on an idle control plane;
2. submits N jobs over HTTP from C concurrent clients to a held ClusterQueue
   (``stopPolicy: Hold``, so they stay pending and every scheduling cycle sees
   them) and records each request's latency;
3. times the 1-pod job again with those N jobs pending.

    python -m benchmarks.api_submit                      # SQLite, 10,000 jobs
    python -m benchmarks.api_submit --db postgresql://...  # SQLite and PostgreSQL
    python -m benchmarks.api_submit --jobs 500 --quick   # smoke run
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from benchmarks.harness import ServerProcess, percentile, write_json
from phalanx.sdk import Client

console = Console(stderr=True)
STARTED = re.compile(r"started (\d+\.\d+)")

HELD_QUEUE: list[dict[str, Any]] = [
    {
        "kind": "ClusterQueue", "name": "held", "stopPolicy": "Hold",
        "resourceGroups": [{
            "coveredResources": ["cpu"],
            "flavors": [{"name": "default", "resources": [{"name": "cpu", "nominalQuota": "1"}]}],
        }],
    },
    {"kind": "LocalQueue", "name": "held", "clusterQueue": "held"},
]


def held_job(name: str) -> dict[str, Any]:
    return {
        "name": name, "queue": "held",
        "podSets": [{"name": "worker", "resources": {"cpu": "100m"},
                     "command": ["true"]}],
    }


def start_latency(client: Client, name: str) -> float:
    """Seconds from the POST of a 1-pod job to the first line its process prints."""
    spec = {
        "name": name,
        "podSets": [{
            "name": "worker", "resources": {"cpu": "100m"},
            "command": [sys.executable, "-S", "-c",
                        "import time; print(f'started {time.time():.6f}')"],
        }],
    }
    posted = time.time()
    client.submit(spec)
    record = client.wait(name, timeout=120)
    if record.status.value != "Succeeded":
        raise RuntimeError(f"{name} ended {record.status.value}: {record.message}")
    for line in client.logs(name):
        found = STARTED.search(line)
        if found:
            return float(found.group(1)) - posted
    raise RuntimeError(f"{name} printed no start time")


def submit_many(server: ServerProcess, run: str, jobs: int, clients: int) -> dict[str, Any]:
    latencies: list[float] = []
    lock = threading.Lock()
    counter = iter(range(jobs))

    def worker() -> None:
        mine: list[float] = []
        with server.client() as client:
            while True:
                with lock:
                    i = next(counter, None)
                if i is None:
                    break
                began = time.perf_counter()
                client.submit(held_job(f"{run}-{i}"))
                mine.append(time.perf_counter() - began)
        with lock:
            latencies.extend(mine)

    began = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        for future in [pool.submit(worker) for _ in range(clients)]:
            future.result()
    wall = time.perf_counter() - began
    return {
        "jobs": jobs,
        "clients": clients,
        "wall_s": wall,
        "per_second": jobs / wall,
        "p50_ms": percentile(latencies, 50) * 1000,
        "p99_ms": percentile(latencies, 99) * 1000,
        "max_ms": max(latencies) * 1000,
    }


def measure(store: str, db: str | None, jobs: int, clients: int, samples: int) -> dict[str, Any]:
    run = "b" + uuid.uuid4().hex[:6]  # unique names: a reused PostgreSQL keeps earlier runs
    with tempfile.TemporaryDirectory(prefix="phalanx-bench-") as tmp:
        args = ["--db", db] if db else []
        with ServerProcess(Path(tmp) / "home", *args) as server, server.client() as client:
            client.apply(HELD_QUEUE)
            console.log(f"{store}: control plane at {server.url}")
            idle = [start_latency(client, f"{run}-idle-{i}") for i in range(samples)]
            console.log(f"{store}: submitting {jobs:,} jobs from {clients} clients")
            submitted = submit_many(server, run, jobs, clients)
            loaded = [start_latency(client, f"{run}-loaded-{i}") for i in range(samples)]
    return {
        "store": store,
        "submit": submitted,
        "start_idle_s": {"p50": percentile(idle, 50), "max": max(idle), "samples": idle},
        "start_loaded_s": {"p50": percentile(loaded, 50), "max": max(loaded), "samples": loaded},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--clients", type=int, default=4, help="concurrent HTTP clients")
    parser.add_argument("--samples", type=int, default=5, help="start-latency samples")
    parser.add_argument("--db", default=os.environ.get("PHALANX_BENCH_POSTGRES_URL"),
                        help="also measure on this PostgreSQL URL")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()

    results = [measure("sqlite", None, args.jobs, args.clients, args.samples)]
    if args.db:
        results.append(measure("postgresql", args.db, args.jobs, args.clients, args.samples))

    table = Table(title=f"HTTP submission of {args.jobs:,} jobs ({args.clients} clients)")
    for column in ("store", "jobs/s", "p50 ms", "p99 ms", "start idle p50 s",
                   f"start with {args.jobs:,} pending p50 s"):
        table.add_column(column, justify="right")
    for r in results:
        s = r["submit"]
        table.add_row(r["store"], f"{s['per_second']:,.0f}", f"{s['p50_ms']:.1f}",
                      f"{s['p99_ms']:.1f}", f"{r['start_idle_s']['p50']:.2f}",
                      f"{r['start_loaded_s']['p50']:.2f}")
    Console().print(table)
    path = write_json("api_submit", {"jobs": args.jobs, "clients": args.clients,
                                     "results": results}, args.out)
    console.log(f"wrote {path}")


if __name__ == "__main__":
    main()
