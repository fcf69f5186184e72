"""Estimated starts: the forecast for 10,000 pending jobs on 5,000 nodes, in CPU seconds.

The cluster of the scheduler-core benchmark (8-GPU nodes in racks and blocks, queues in
cohorts that oversubscribe it) is filled by admitting jobs until nothing more fits; then
10,000 more wait. Running jobs have a maxRuntime, history or neither (a third each), so
every rule of the expected run time takes part. ``forecast`` (phalanx.control.forecast)
then gives every pending job its position and estimated start; the benchmark reports the
CPU seconds of the snapshot and of the forecast, and how many jobs got an estimate.

    python -m benchmarks.estimate            # 10,000 pending on 5,000 nodes
    python -m benchmarks.estimate --quick    # smoke run
"""

from __future__ import annotations

import argparse
import math
import random
import sys
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from benchmarks.harness import write_json
from benchmarks.scheduler_core import Scale, build_config, build_jobs, build_nodes
from phalanx.control.forecast import Limits, RunHistory, forecast
from phalanx.scheduler import JobView, Scheduler
from phalanx.spec.status import EstimateBasis

NOW = 1_000_000.0


def run(nodes: int, pending: int, queues: int, cohorts: int, seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    scale = Scale(jobs=pending, queues=queues, cohorts=cohorts, nodes=nodes, cycles=0,
                  seed=seed)
    config = build_config(scale)
    scheduler = Scheduler(config, build_nodes(nodes))
    history = RunHistory()
    max_runtime: dict[str, float] = {}
    # Fill the cluster: admit in waves until a cycle admits nothing more.
    filler = build_jobs(scale, nodes, rng, prefix="running")
    for i, spec in enumerate(filler):
        scheduler.submit(spec, priority=0, submitted_at=NOW - 7200 + i * 0.01)
    admitted = 0
    while True:
        started = NOW - rng.uniform(0, 3600)
        got = scheduler.cycle(started).admissions
        admitted += len(got)
        if not got:
            break
    for spec in filler:  # what did not fit leaves: the pending jobs below are the queue
        if spec.name not in scheduler.admitted_jobs():
            scheduler.remove(spec.name)
    waiting = build_jobs(scale, pending, rng, prefix="waiting")
    for i, spec in enumerate(filler + waiting):
        kind = i % 3
        if kind == 0:
            max_runtime[spec.name] = rng.uniform(1800, 4 * 3600)
        elif kind == 1:
            history.add("bench", spec.queue, spec.name, rng.uniform(600, 3 * 3600))
    for i, spec in enumerate(waiting):
        scheduler.submit(spec, priority=0, submitted_at=NOW + i * 0.001)

    def expected(view: JobView, elapsed: float) -> Any:
        name = view.spec.name
        return history.expected("bench", name, view.spec.queue, max_runtime.get(name), elapsed)

    cpu = time.process_time()
    snapshot = scheduler.snapshot()
    snapshot_cpu = time.process_time() - cpu
    out: dict[str, Any] = {
        "nodes": nodes, "gpus": nodes * 8, "queues": queues, "cohorts": cohorts,
        "running": admitted, "pending": len(waiting), "snapshot_cpu_seconds": snapshot_cpu,
    }
    # The control plane's caps (what a live forecast does), then none: every job estimated.
    for label, limits in (("capped", Limits()),
                          ("full", Limits(max_cycles=10**6, max_starts=10**9,
                                          max_seconds=math.inf))):
        cpu = time.process_time()
        estimates = forecast(snapshot, NOW, expected, limits)
        forecast_cpu = time.process_time() - cpu
        known = [e for e in estimates.values() if e.starts_at is not None]
        bases: dict[str, int] = {}
        for e in estimates.values():
            bases[e.basis.value] = bases.get(e.basis.value, 0) + 1
        out[label] = {
            "limits": {"max_cycles": limits.max_cycles, "max_starts": limits.max_starts,
                       "max_seconds": limits.max_seconds},
            "forecast_cpu_seconds": forecast_cpu,
            "cpu_seconds": snapshot_cpu + forecast_cpu,
            "estimated": len(known),
            "unknown": bases.get(EstimateBasis.UNKNOWN.value, 0),
            "bases": bases,
            "horizon_hours": max((e.starts_at - NOW for e in known if e.starts_at),
                                 default=0) / 3600,
        }
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="500 pending on 250 nodes")
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pending", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--json", type=Path, default=None, help="where to write the JSON")
    args = parser.parse_args(argv)
    nodes, pending = (250, 500) if args.quick else (args.nodes, args.pending)
    result = run(nodes, pending, queues=max(10, nodes // 50), cohorts=max(2, nodes // 500),
                 seed=args.seed)
    table = Table(title=f"Estimated starts: {result['pending']:,} pending, "
                        f"{result['running']:,} running on {result['nodes']:,} nodes")
    table.add_column("forecast")
    for key in ("CPU (snapshot + forecast)", "estimated", "unknown", "horizon", "bases"):
        table.add_column(key, justify="right")
    for label in ("capped", "full"):
        run_ = result[label]
        table.add_row(
            f"{label} (max {run_['limits']['max_starts']:,} starts, "
            f"{run_['limits']['max_seconds']:g} s)" if label == "capped" else "full (no caps)",
            f"{run_['cpu_seconds']:.2f} s", f"{run_['estimated']:,}", f"{run_['unknown']:,}",
            f"{run_['horizon_hours']:.1f} h",
            ", ".join(f"{k} {v}" for k, v in sorted(run_["bases"].items())))
    Console().print(table)
    if not args.quick or args.json:
        path = write_json("estimate", result, args.json)
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
