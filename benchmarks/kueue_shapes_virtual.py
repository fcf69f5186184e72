"""Kueue's scalability shapes in virtual time, through the scheduler core alone.

The same queues, jobs and creation schedule as ``benchmarks.kueue_shapes``, with
no server, store or HTTP: a loop submits each job when it is due, runs a
scheduling cycle every ``--tick`` of virtual time, ends each admitted job
``runtimeMs`` later and requeues preemption victims at once. What it reports is
the policy's own floor (what the live benchmark could reach with a control plane
that cost nothing), so the two together say how much of a live figure is the
policy and how much the server.

    python -m benchmarks.kueue_shapes_virtual --shape baseline [--tick 0.01] [--node-cpu N]
"""

from __future__ import annotations

import argparse
import heapq
import statistics
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make `benchmarks` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import yaml
from rich.console import Console
from rich.table import Table

from benchmarks.harness import RESULTS, machine, write_json
from benchmarks.kueue_shapes import SHAPES, Shape, nodes_yaml, queue_documents, schedule
from phalanx.scheduler import Scheduler
from phalanx.spec import JobSpec, Node, QueueConfig
from phalanx.spec.config import parse_config_documents


def replay(shape: Shape, node_cpu: int, tick: float) -> dict[str, Any]:
    config = QueueConfig().merged(parse_config_documents(queue_documents(shape)))
    nodes = [Node.model_validate(n) for n in yaml.safe_load(nodes_yaml(shape, node_cpu))["nodes"]]
    scheduler = Scheduler(config, nodes)
    plan = schedule(shape, "v")
    specs = [JobSpec.model_validate(p.spec) for p in plan]
    runtime = {ws.name: ws.runtime_ms / 1000 for ws in shape.sets}
    cpu = {ws.name: ws.cpu for ws in shape.sets}
    cls = {p.name: p.cls for p in plan}
    created: dict[str, float] = {}
    admitted: dict[str, float] = {}  # the last admission, as Kueue's recorder counts it
    running: dict[str, float] = {}  # job -> when it ends
    ends: list[tuple[float, str]] = []
    evictions: Counter[str] = Counter()
    used = 0.0  # CPU-seconds held by admitted jobs
    i = done = cycles = 0
    now = 0.0
    started = time.perf_counter()
    while done < len(plan):
        while i < len(plan) and plan[i].due <= now:
            spec = specs[i]
            scheduler.submit(spec, priority=config.priority_value(spec.priority), submitted_at=now)
            created[spec.name] = now
            i += 1
        while ends and ends[0][0] <= now:
            end, name = heapq.heappop(ends)
            if running.get(name) == end:
                del running[name]
                scheduler.remove(name)
                done += 1
        result = scheduler.cycle()
        cycles += 1
        for a in result.admissions:
            admitted[a.job] = now
            running[a.job] = end = now + runtime[cls[a.job]]
            used += cpu[cls[a.job]] * (end - now)
            heapq.heappush(ends, (end, a.job))
        for p in result.preemptions:
            end_at = running.pop(p.victim, None)
            if end_at is not None:
                used -= cpu[cls[p.victim]] * (end_at - now)  # it held quota only until now
                evictions[cls[p.victim]] += 1
                scheduler.requeue(p.victim, submitted_at=created[p.victim])
        now = round(now + tick, 9)
    wall = now
    classes = {}
    for ws in shape.sets:
        waits = [admitted[n] - created[n] for n in admitted if cls[n] == ws.name]
        classes[ws.name] = {
            "mean_time_to_admission_s": round(statistics.fmean(waits), 3),
            "evictions": evictions[ws.name],
        }
    return {
        "wall_s": round(wall, 3),
        "usage": round(used / (shape.queues * shape.nominal_cpu * wall), 4),
        "cycles": cycles,
        "real_seconds": round(time.perf_counter() - started, 2),
        "workload_classes": classes,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--shape", choices=sorted(SHAPES), default="baseline")
    parser.add_argument("--tick", type=float, default=0.01, help="virtual seconds per cycle")
    parser.add_argument("--node-cpu", type=int, default=None,
                        help="CPU per node (default: all nominal capacity in one node)")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    if args.tick <= 0:
        parser.error("--tick must be above 0 (virtual seconds between cycles)")
    shape = SHAPES[args.shape]
    node_cpu = args.node_cpu or shape.queues * shape.nominal_cpu
    result = replay(shape, node_cpu, args.tick)
    table = Table(title=f"Kueue shape '{shape.name}' in virtual time (scheduler core only, "
                        f"a cycle every {args.tick * 1000:g} ms)")
    table.add_column("measure")
    table.add_column("value", justify="right")
    table.add_row("wall time (virtual)", f"{result['wall_s']:.1f} s")
    table.add_row("usage", f"{result['usage']:.1%}")
    for name, c in result["workload_classes"].items():
        table.add_row(f"mean time to admission, {name}",
                      f"{c['mean_time_to_admission_s']:.2f} s ({c['evictions']} evictions)")
    table.add_row("cycles / real time", f"{result['cycles']:,} / {result['real_seconds']:.1f} s")
    Console().print(table)
    Console().print(f"scheduler core: {machine()['scheduler_core']}")
    out = args.out or RESULTS / f"kueue_shapes_virtual_{shape.name}.json"
    write_json(f"kueue_shapes_virtual_{shape.name}",
               {"shape": shape.name, "tick_s": args.tick, "node_cpu": node_cpu, **result}, out)


if __name__ == "__main__":
    main()
