"""Buy the peak up front, or buy node pools as gangs arrive? Fixed vs autoscaled on Philly.

The question an operator asks before buying: on the same workload and the same quotas, what
does a fixed cluster cost against one whose nodes are bought per gang, in node-hours paid,
idle node-hours and spend, and what does each do to the jobs' queueing delay (mean, p95)?

Both clusters have the same peak size, ``--gpus`` (512: 64 nodes of 8 GPUs). The queues are
the Philly benchmark's (``benchmarks/philly.py``: one ClusterQueue per virtual cluster, in
one cohort, nominal quotas proportional to GPU-time, the ``phalanx`` policy). The fixed
cluster has its 64 nodes all along. The autoscaled ones have no node at first: their flavor
has ``provisioning`` (the ``simulated`` provider, pools Ready ``--delay`` after they are
asked for, ``maxNodes`` the peak), and every gang that fits its quota but no node gets a
pool of its own, deleted after it (``phalanx.sim.autoscale``), through the same scheduler
core hold as the control plane. Every node costs the same per GPU-hour
(``--price-per-gpu-hour``), so spend compares across node sizes.

Variants: ``fixed``; ``pools`` (8-GPU nodes, no idle TTL); ``pools + idleTTL`` (a pool
waits ``--idle-ttl`` for the next job of its shape); ``1-GPU pools`` (nodes of one GPU,
maxNodes 512: a 1-GPU job does not pay for 8). Node-hours are in each variant's own node
size; GPU-hours paid compare across sizes.

By default it replays a week of the trace from day 70 (the trace's quieter second half:
about 300 GPUs asked for on average against 512), a few minutes in all (most of it in the
variants where thousands of jobs wait for ``maxNodes``, each asking again every 30 s as the
controller has them do); ``--days 0`` replays from ``--from-day`` to the end.

    python -m benchmarks.philly_autoscaling                  # days 70-77, four variants
    python -m benchmarks.philly_autoscaling --from-day 21    # the busiest weeks instead
    python -m benchmarks.philly_autoscaling --workers 2      # variants in parallel

Prints a table, writes ``benchmarks/results/philly_autoscaling.json`` and PNG plots under
``benchmarks/results/philly_autoscaling/``.
"""

from __future__ import annotations

import argparse
import sys
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from rich.table import Table

from benchmarks import philly
from benchmarks.harness import RESULTS, write_json
from phalanx.sim import SimResult, TraceJob, read_trace, simulate
from phalanx.sim.autoscale import fixed_equivalent
from phalanx.sim.report import span
from phalanx.spec import GPU, Node, QueueConfig, parse_config_documents

DAY = 86400.0
POLICY = "phalanx"
PRICE_PER_GPU_HOUR = 2.5
DELAY = "5m"  # a cloud GPU VM: boot, drivers, image pull
IDLE_TTL = "10m"


@dataclass(frozen=True, slots=True)
class Variant:
    name: str
    gpus_per_node: int  # of the pool nodes (the fixed cluster has philly.GPUS_PER_NODE)
    idle_ttl: str
    fixed: bool = False


VARIANTS = (
    Variant("fixed", philly.GPUS_PER_NODE, "0s", fixed=True),
    Variant("pools", philly.GPUS_PER_NODE, "0s"),
    Variant("pools + idleTTL", philly.GPUS_PER_NODE, IDLE_TTL),
    Variant("1-GPU pools", 1, "0s"),
)


def window(trace: list[TraceJob], from_day: float, days: float) -> list[TraceJob]:
    """The jobs submitted in [from_day, from_day + days) (to the end when days is 0), with
    times counted from the window's start."""
    start = from_day * DAY
    end = start + days * DAY if days else float("inf")
    return [replace(j, submit=j.submit - start) for j in trace if start <= j.submit < end]


def autoscaled_config(nominal: dict[str, int], variant: Variant, gpus: int, delay: str,
                      price_per_gpu_hour: float) -> QueueConfig:
    """Philly's queues with their one flavor buying pools of ``variant``'s nodes."""
    docs = philly.config_documents(nominal)
    assert docs[0]["kind"] == "ResourceFlavor"
    docs[0] = {
        "kind": "ResourceFlavor", "name": philly.FLAVOR, "nodeLabels": {"pool": philly.FLAVOR},
        "provisioning": {
            "provider": "simulated", "node": {GPU: variant.gpus_per_node},
            "maxNodes": gpus // variant.gpus_per_node,
            "pricePerNodeHour": price_per_gpu_hour * variant.gpus_per_node,
            "idleTTL": variant.idle_ttl, "options": {"delay": delay},
        },
    }
    return QueueConfig().merged(parse_config_documents(docs))


def replay(variant: Variant, config: QueueConfig, nodes: list[Node], prices: dict[str, float],
           trace: list[TraceJob], tick: float) -> SimResult:
    result = simulate(config, nodes, trace, POLICY, tick=tick, node_prices=prices)
    philly.output().print(f"  {variant.name}: done in {result.summary['wall_seconds']:.1f} s")
    return replace(result, policy=variant.name)


def figures(result: SimResult) -> dict[str, Any]:
    s = result.summary
    pools = s["autoscaling"] or {}
    return {
        "node_hours": s["node_hours"],
        "idle_node_hours": s["idle_node_hours"],
        "idle_share": s["idle_node_hours"] / s["node_hours"] if s["node_hours"] else 0.0,
        "gpu_hours_paid": s["gpu_hours_paid"],
        "gpu_utilisation": s["gpu_utilisation"],
        "spend": s["spend"],
        "queueing_delay_mean_s": s["queueing_delay"]["mean"],
        "queueing_delay_p95_s": s["queueing_delay"]["p95"],
        "jct_mean_s": s["jct"]["mean"],
        "completed": s["completed"],
        "pools_created": pools.get("pools_created", 0),
        "pools_reused": pools.get("pools_reused", 0),
        "peak_nodes": pools.get("peak_pool_nodes", s["nodes"]),
        "wall_seconds": s["wall_seconds"],
    }


def table(rows: dict[str, dict[str, Any]], title: str) -> Table:
    t = Table(title=title, title_justify="left")
    t.add_column("metric")
    for name in rows:
        t.add_column(name, justify="right")
    cells = [
        ("node-hours paid", lambda f: f"{f['node_hours']:,.0f}"),
        ("idle node-hours", lambda f: f"{f['idle_node_hours']:,.0f} ({f['idle_share']:.0%})"),
        ("GPU-hours paid", lambda f: f"{f['gpu_hours_paid']:,.0f}"),
        ("GPU utilisation (of paid)", lambda f: f"{f['gpu_utilisation']:.1%}"),
        ("spend", lambda f: f"{f['spend']:,.0f}"),
        ("queueing delay mean", lambda f: span(f["queueing_delay_mean_s"])),
        ("queueing delay p95", lambda f: span(f["queueing_delay_p95_s"])),
        ("JCT mean", lambda f: span(f["jct_mean_s"])),
        ("pools created / reused", lambda f: f"{f['pools_created']:,} / {f['pools_reused']:,}"),
        ("peak nodes", lambda f: f"{f['peak_nodes']:,}"),
        ("simulator wall time", lambda f: f"{f['wall_seconds']:.1f} s"),
    ]
    for label, cell in cells:
        t.add_row(label, *(cell(f) for f in rows.values()))
    return t


def run(args: argparse.Namespace) -> list[SimResult]:
    console = philly.output()
    trace = window(read_trace(args.trace), args.from_day, args.days)
    if args.limit:
        trace = trace[:args.limit]
    if not trace:
        raise SystemExit("no job of the trace falls in that window; change --from-day/--days")
    nominal = philly.quotas(trace, args.gpus)
    chosen = [v for v in VARIANTS if not args.variant or v.name in args.variant]
    jobs = []
    for v in chosen:
        config = autoscaled_config(nominal, v, args.gpus, args.delay, args.price_per_gpu_hour)
        if v.fixed:
            fixed = fixed_equivalent(config, [])
            jobs.append((v, fixed.config, fixed.nodes, fixed.prices, trace, args.tick))
        else:
            jobs.append((v, config, [], {}, trace, args.tick))
    console.print(f"replaying {len(trace):,} jobs (days {args.from_day:g} to "
                  f"{args.from_day + trace[-1].submit / DAY:.0f}) on at most {args.gpus} GPUs, "
                  f"{len(jobs)} variant(s), policy {POLICY}, pools Ready after {args.delay} ...")
    if args.workers > 1 and len(jobs) > 1:
        with ProcessPoolExecutor(min(args.workers, len(jobs))) as pool:
            runs = list(pool.map(replay, *zip(*jobs, strict=True)))
    else:
        runs = [replay(*job) for job in jobs]
    rows = {r.policy: figures(r) for r in runs}
    console.print(table(rows, f"Philly, {len(trace):,} jobs: a fixed cluster of {args.gpus} "
                              "GPUs against node pools bought per gang, same peak"))
    payload = {
        "benchmark": "philly_autoscaling",
        "command": "python -m benchmarks.philly_autoscaling " + " ".join(args.argv),
        "trace": str(args.trace), "from_day": args.from_day, "days": args.days,
        "jobs": len(trace), "tick_seconds": args.tick, "policy": POLICY,
        "peak_gpus": args.gpus, "pool_delay": args.delay,
        "price_per_gpu_hour": args.price_per_gpu_hour, "idle_ttl": IDLE_TTL,
        "nominal_gpus": nominal,
        "variants": [{"name": v.name, "gpus_per_node": v.gpus_per_node,
                      "idle_ttl": v.idle_ttl, "fixed": v.fixed} for v in chosen],
        "figures": rows,
        "runs": [r.to_dict(bins=300) for r in runs],
    }
    path = write_json("philly_autoscaling", payload, args.json)
    console.print(f"wrote {path}")
    if args.plots:
        from phalanx.sim.plots import write_plots

        for p in write_plots(runs, args.plots):
            console.print(f"wrote {p}")
    return runs


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--trace", type=Path, default=philly.TRACE)
    parser.add_argument("--from-day", type=float, default=70.0,
                        help="first day of the trace to replay (default 70)")
    parser.add_argument("--days", type=float, default=7.0,
                        help="days to replay (default 7; 0: to the end)")
    parser.add_argument("--limit", type=int, default=0, help="replay only the first N jobs")
    parser.add_argument("--gpus", type=int, default=philly.GPUS,
                        help="peak size in GPUs, fixed and autoscaled alike")
    parser.add_argument("--delay", default=DELAY,
                        help=f"how long a pool takes to be Ready (default {DELAY})")
    parser.add_argument("--price-per-gpu-hour", type=float, default=PRICE_PER_GPU_HOUR)
    parser.add_argument("--tick", type=float, default=philly.TICK,
                        help="scheduling period in simulated seconds")
    parser.add_argument("--variant", action="append",
                        choices=[v.name for v in VARIANTS], help="variants (default: all)")
    parser.add_argument("--workers", type=int, default=1,
                        help="replay this many variants at once, in processes")
    parser.add_argument("--json", type=Path, default=None,
                        help="output JSON (default: benchmarks/results/philly_autoscaling.json)")
    parser.add_argument("--plots", type=lambda v: Path(v) if v else None,
                        default=RESULTS / "philly_autoscaling",
                        help="directory for PNG plots (none: no plots)")
    args = parser.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)
    if args.gpus < philly.GPUS_PER_NODE or args.gpus % philly.GPUS_PER_NODE:
        parser.error(f"--gpus must be a positive multiple of {philly.GPUS_PER_NODE}")
    return args


def main(argv: list[str] | None = None) -> None:
    run(parse_args(argv))


if __name__ == "__main__":
    main()
