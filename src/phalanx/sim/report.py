"""Rich tables of simulation results, one column per run, for the CLI and the benchmarks."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from rich.table import Table

from phalanx.sim.metrics import SimResult


def span(seconds: float) -> str:
    """A duration at a readable scale: 42 s, 3.5 min, 2.1 h, 4.0 d."""
    for unit, size in (("d", 86400.0), ("h", 3600.0), ("min", 60.0)):
        if seconds >= size:
            return f"{seconds / size:.1f} {unit}"
    return f"{seconds:.0f} s"


def pct(x: float) -> str:
    return f"{100 * x:.1f} %"


Row = tuple[str, Callable[[dict[str, Any]], str]]

ROWS: list[Row] = [
    ("jobs (completed / failed / rejected / unfinished)",
     lambda s: f"{s['jobs']:,} ({s['completed']:,} / {s.get('failed', 0):,} / "
               f"{s['rejected']:,} / {s['unfinished']:,})"),
    ("cluster", lambda s: f"{s['gpus']:,} GPUs on {s['nodes']:,} nodes"),
    ("GPU utilisation", lambda s: pct(s["gpu_utilisation"])),
    ("utilisation while jobs wait", lambda s: pct(s["utilisation_while_waiting"])),
    ("time with jobs waiting", lambda s: pct(s["time_with_waiting_jobs"])),
    ("goodput (work kept)", lambda s: pct(s["goodput"])),
    ("queueing delay mean", lambda s: span(s["queueing_delay"]["mean"])),
    ("queueing delay p50", lambda s: span(s["queueing_delay"]["p50"])),
    ("queueing delay p99", lambda s: span(s["queueing_delay"]["p99"])),
    ("JCT mean", lambda s: span(s["jct"]["mean"])),
    ("makespan", lambda s: span(s["makespan"])),
    ("preemptions", lambda s: f"{s['preemptions']:,}"),
    ("GPU-hours lost to restarts", lambda s: f"{s['wasted_gpu_hours']:,.0f}"),
    ("node failures / evictions", lambda s: f"{s['node_failures']:,} / {s['evictions']:,}"),
    ("scheduling cycles", lambda s: f"{s['cycles']:,}"),
    ("simulator speed", lambda s: f"{s['jobs_per_wall_second']:,.0f} jobs/s "
                                  f"({s['wall_seconds']:.1f} s wall)"),
]


def summary_table(runs: Sequence[SimResult], title: str = "Simulation") -> Table:
    table = Table(title=title, title_justify="left")
    table.add_column("metric")
    for r in runs:
        table.add_column(r.policy, justify="right")
    for label, cell in ROWS:
        table.add_row(label, *(cell(r.summary) for r in runs))
    return table


def teams_table(runs: Sequence[SimResult]) -> Table:
    """Per ClusterQueue: entitlement and demand, then each run's share and mean delay."""
    table = Table(title="Per-team GPU share vs entitlement", title_justify="left")
    table.add_column("ClusterQueue")
    table.add_column("jobs", justify="right")
    table.add_column("entitled", justify="right")
    table.add_column("demand", justify="right")
    for r in runs:
        table.add_column(f"{r.policy} share", justify="right")
        table.add_column(f"{r.policy} mean delay", justify="right")
    if not runs:
        return table
    per_run = [{t.cluster_queue: t for t in r.teams} for r in runs]
    for team in runs[0].teams:
        cells = [team.cluster_queue, f"{team.jobs:,}", pct(team.entitlement), pct(team.demand)]
        for by_name in per_run:
            t = by_name[team.cluster_queue]
            cells += [pct(t.share), span(t.mean_delay)]
        table.add_row(*cells)
    return table
