"""First screen of the dashboard's Jobs page (``GET /ui/jobs``) with 100,000 jobs stored.

The store is filled as ``benchmarks.list_jobs`` fills it (95 % finished, 5 % queued in
a held ClusterQueue; 10 LocalQueues, 20 users, 10 values of a ``team`` label), then a
real control plane (``phalanx up``, simulated compute plane) serves it. Signed in with
the API key, it times the whole HTML page of 50 rows, unfiltered and with each filter,
the Overview page, and the first event of the Jobs page's live stream (the page's
fragment, which the stream renders as the page does).

    python -m benchmarks.dashboard_jobs                   # SQLite, 100,000 jobs
    python -m benchmarks.dashboard_jobs --jobs 5000 --samples 10   # smoke run
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
from rich.console import Console
from rich.table import Table

from benchmarks.harness import ServerProcess, percentile, write_json
from benchmarks.list_jobs import NODES, fill

console = Console(stderr=True)


def time_page(ui: httpx.Client, path: str, params: dict[str, Any],
              samples: int) -> dict[str, Any]:
    ui.get(path, params=params).raise_for_status()  # warm
    latencies = []
    for _ in range(samples):
        began = time.perf_counter()
        response = ui.get(path, params=params)
        latencies.append(time.perf_counter() - began)
        response.raise_for_status()
    return {"path": path, "params": params, "rows": response.text.count('<tr id="job-'),
            "bytes": len(response.content), "p50_ms": percentile(latencies, 50) * 1000,
            "p99_ms": percentile(latencies, 99) * 1000}


def time_first_event(ui: httpx.Client, samples: int) -> dict[str, Any]:
    latencies = []
    for _ in range(samples):
        began = time.perf_counter()
        with ui.stream("GET", "/ui/live/jobs") as stream:
            for line in stream.iter_lines():
                if line.startswith("event: jobs"):
                    latencies.append(time.perf_counter() - began)
                    break
    return {"p50_ms": percentile(latencies, 50) * 1000,
            "p99_ms": percentile(latencies, 99) * 1000}


def measure(jobs: int, samples: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="phalanx-bench-") as tmp:
        home = Path(tmp) / "home"
        home.mkdir()
        console.log(f"storing {jobs:,} jobs")
        run, fill_s = fill(f"sqlite:///{home / 'phalanx.db'}", jobs)
        (Path(tmp) / "nodes.yaml").write_text(NODES)
        with ServerProcess(home, "--compute", "simulated", "--nodes",
                           str(Path(tmp) / "nodes.yaml")) as server, \
                httpx.Client(base_url=server.url, timeout=60) as ui:
            assert ui.post("/ui/login", data={"key": server.token}).status_code == 303
            page = ui.get("/ui/jobs").text
            second = page.split('/ui/jobs?continue=')[1].split('"')[0]
            cases = {
                "newest 50": ("/ui/jobs", {}),
                "second page": ("/ui/jobs", {"continue": second}),
                "queue=q3": ("/ui/jobs", {"queue": "q3"}),
                "status=Queued": ("/ui/jobs", {"status": "Queued"}),
                "user=user7": ("/ui/jobs", {"user": "user7"}),
                "team=t5": ("/ui/jobs", {"team": "t5"}),
                "kind=generic": ("/ui/jobs", {"kind": "generic"}),
                "Overview page": ("/ui/", {}),
            }
            results = {name: time_page(ui, path, params, samples)
                       for name, (path, params) in cases.items()}
            live = time_first_event(ui, max(3, samples // 5))
    return {"run": run, "fill_s": fill_s, "pages": results, "live_first_event": live}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--samples", type=int, default=50, help="requests per case")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()

    result = measure(args.jobs, args.samples)
    table = Table(title=f"Dashboard pages with {args.jobs:,} jobs stored (SQLite)")
    for column in ("page", "rows", "p50 ms", "p99 ms"):
        table.add_column(column, justify="right")
    for case, page in result["pages"].items():
        table.add_row(case, str(page["rows"]), f"{page['p50_ms']:.1f}", f"{page['p99_ms']:.1f}")
    live = result["live_first_event"]
    table.add_row("Jobs live stream, first event", "50", f"{live['p50_ms']:.1f}",
                  f"{live['p99_ms']:.1f}")
    Console().print(table)
    path = write_json("dashboard_jobs", {"jobs": args.jobs, "samples": args.samples,
                                         **result}, args.out)
    console.log(f"wrote {path}")


if __name__ == "__main__":
    main()
