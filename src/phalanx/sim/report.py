"""Rich tables of simulation results, one column per run, for the CLI and the benchmarks."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from rich.table import Table

from phalanx.sim.metrics import GANG_CLASSES, SimResult


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
    ("queueing delay p95", lambda s: span(s["queueing_delay"].get("p95", 0.0))),
    ("queueing delay p99", lambda s: span(s["queueing_delay"]["p99"])),
    ("JCT mean", lambda s: span(s["jct"]["mean"])),
    ("makespan", lambda s: span(s["makespan"])),
    ("preemptions", lambda s: f"{s['preemptions']:,}"),
    ("preemptions per job (p99 / max)",
     lambda s: "{p99:,.0f} / {max:,.0f}".format(**s.get("preemptions_per_job",
                                                       {"p99": 0, "max": 0}))),
    ("GPU-hours lost to restarts", lambda s: f"{s['wasted_gpu_hours']:,.0f}"),
    ("... of which to preemption",
     lambda s: f"{s.get('lost_to_preemption_gpu_hours', 0.0):,.0f}"),
    ("node failures / evictions", lambda s: f"{s['node_failures']:,} / {s['evictions']:,}"),
    ("node-hours paid (idle)", lambda s: f"{s.get('node_hours', 0.0):,.0f} "
                                         f"({s.get('idle_node_hours', 0.0):,.0f})"),
    ("spend (pricePerNodeHour x node-hours)", lambda s: f"{s.get('spend', 0.0):,.0f}"),
    ("scheduling cycles", lambda s: f"{s['cycles']:,}"),
    ("simulator speed", lambda s: f"{s['jobs_per_wall_second']:,.0f} jobs/s "
                                  f"({s['wall_seconds']:.1f} s wall)"),
]


def _pools(s: dict[str, Any]) -> dict[str, Any]:
    return s.get("autoscaling") or {}


# Shown when some run bought node pools (a flavor with provisioning).
AUTOSCALING_ROWS: list[Row] = [
    ("pools created / reused", lambda s: f"{_pools(s).get('pools_created', 0):,} / "
                                         f"{_pools(s).get('pools_reused', 0):,}"),
    ("stockouts", lambda s: f"{_pools(s).get('stockouts', 0):,}"),
    ("peak pool nodes", lambda s: f"{_pools(s).get('peak_pool_nodes', 0):,}"),
    ("jobs that waited for a limit", lambda s: f"{_pools(s).get('waited_for_limits', 0):,}"),
    ("wait for a pool (mean)", lambda s: span(_pools(s).get("provisioning_wait_mean", 0.0))),
]


def _scored(s: dict[str, Any]) -> dict[str, Any]:
    return s.get("estimates") or {}


def _share(value: float | None) -> str:
    return "-" if value is None else pct(value)


# Shown when some run scored estimated starts (sim/estimates.py).
ESTIMATE_ROWS: list[Row] = [
    ("start estimates scored (waited > 10 min)",
     lambda s: f"{_scored(s).get('scored_jobs', 0):,}"),
    ("estimate within 25 % of the wait", lambda s: _share(_scored(s).get("within_25_percent"))),
    ("estimate within a factor of 2", lambda s: _share(_scored(s).get("within_factor_2"))),
    ("estimated / actual wait, median", lambda s: _ratio(_scored(s).get("ratio_median"))),
]


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def summary_table(runs: Sequence[SimResult], title: str = "Simulation") -> Table:
    table = Table(title=title, title_justify="left")
    table.add_column("metric")
    for r in runs:
        table.add_column(r.policy, justify="right")
    rows = ROWS + (AUTOSCALING_ROWS if any(r.summary.get("autoscaling") for r in runs) else [])
    rows += ESTIMATE_ROWS if any(r.summary.get("estimates") for r in runs) else []
    for label, cell in rows:
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


def gang_table(runs: Sequence[SimResult]) -> Table:
    """Per gang-size class: each run's mean, p99 and max queueing delay, side by side
    (the first run is the reference when it is FIFO's)."""
    table = Table(title="Queueing delay by gang size (mean / p99 / max)", title_justify="left")
    table.add_column("GPUs")
    table.add_column("jobs", justify="right")
    for r in runs:
        table.add_column(r.policy, justify="right")
    for label, _, _ in GANG_CLASSES:
        cells = []
        jobs = 0.0
        for r in runs:
            figures = r.summary.get("gang_sizes", {}).get(label)
            if not figures or not figures["jobs"]:
                cells.append("-")
                continue
            jobs = max(jobs, figures["jobs"])
            cells.append(f"{span(figures['mean'])} / {span(figures['p99'])} / "
                         f"{span(figures['max'])}")
        table.add_row(label, f"{jobs:,.0f}", *cells)
    return table
