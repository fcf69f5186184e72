"""What the control loop itself costs per job, without HTTP or a busy scheduler.

N one-pod jobs are submitted to a real Controller (SQLite store in a fresh
directory, simulated compute plane keeping pod logs) and taken through three
steps of its loop, on a fake clock so nothing waits: one that admits and
launches them all, one that sees them running, and one that sees them end and
settles them. Each step's wall and CPU time is reported per job; the sum is the
loop's cost per job, the part of the quota a job holds beyond its run time that
grows with how many jobs a step handles (see ``benchmarks.kueue_shapes``).

    python -m benchmarks.control_loop [--jobs 2000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make `benchmarks` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rich.console import Console
from rich.table import Table

from benchmarks.harness import machine, write_json
from phalanx.compute.simulated.plane import SimulatedPlane
from phalanx.control import Controller
from phalanx.spec.nodes import parse_nodes
from phalanx.spec.resources import JobSpec
from phalanx.store import LogStore, Store

STEPS = ("admit and launch", "see them running", "see them end")


def run_once(jobs: int) -> dict[str, dict[str, float]]:
    home = Path(tempfile.mkdtemp(prefix="phalanx-loop-"))
    now = [1000.0]
    plane = SimulatedPlane(
        # One node that takes every job at once: declared pods, or it would take 110.
        parse_nodes(f"nodes:\n  - {{name: n0, allocatable: {{cpu: {jobs}, memory: 1Ti, "
                    f"pods: {jobs}}}}}\n"),
        clock=lambda: now[0], logs_root=LogStore.for_home(home).root,
    )
    store = Store(f"sqlite:///{home}/phalanx.db")
    controller = Controller(store, plane, clock=lambda: now[0] + 1e9)
    controller.service.submit_many([
        JobSpec.model_validate({
            "name": f"job-{i}", "queue": "default",
            "podSets": [{"name": "main", "resources": {"cpu": "1"},
                         "env": {"PHALANX_SIM_DURATION": "200ms"}}],
        })
        for i in range(jobs)
    ])
    out: dict[str, dict[str, float]] = {}
    for step in STEPS:
        if step == "see them end":
            now[0] += 1  # every pod's time is up
        wall, cpu = time.perf_counter(), time.process_time()
        controller.step()
        out[step] = {"wall_ms_per_job": (time.perf_counter() - wall) * 1e3 / jobs,
                     "cpu_ms_per_job": (time.process_time() - cpu) * 1e3 / jobs}
    statuses = store.count_jobs_by_status()
    plane.close()
    store.close()
    if statuses.get("Succeeded") != jobs:
        raise RuntimeError(f"not every job succeeded: {statuses}")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--jobs", type=int, default=2000, help="one-pod jobs per run")
    parser.add_argument("--repeat", type=int, default=3, help="runs; the best is reported")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    if args.jobs < 1 or args.repeat < 1:
        parser.error("--jobs and --repeat must be at least 1")
    runs = [run_once(args.jobs) for _ in range(args.repeat)]
    # The best run of each step: this machine's noise only ever adds time.
    best = {step: {k: min(r[step][k] for r in runs) for k in runs[0][step]} for step in STEPS}
    total = {k: sum(best[s][k] for s in STEPS) for k in ("wall_ms_per_job", "cpu_ms_per_job")}
    table = Table(title=f"Control loop cost per job ({args.jobs:,} jobs, best of {args.repeat})")
    table.add_column("step")
    table.add_column("wall ms / job", justify="right")
    table.add_column("CPU ms / job", justify="right")
    for step in STEPS:
        table.add_row(step, f"{best[step]['wall_ms_per_job']:.3f}",
                      f"{best[step]['cpu_ms_per_job']:.3f}")
    table.add_row("total", f"{total['wall_ms_per_job']:.3f}", f"{total['cpu_ms_per_job']:.3f}")
    console = Console()
    console.print(table)
    console.print(f"scheduler core: {machine()['scheduler_core']}")
    payload: dict[str, Any] = {"jobs": args.jobs, "repeat": args.repeat, "steps": best,
                               "total": total, "runs": runs}
    path = write_json("control_loop", payload, args.out)
    console.print(f"wrote {path}")


if __name__ == "__main__":
    main()
