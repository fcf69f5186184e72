"""Scheduling quality on Microsoft's Philly trace: strict FIFO without borrowing vs Phalanx.

Every one of the trace's 15 virtual clusters becomes a ClusterQueue (and a
LocalQueue of the same name) in one cohort. Each gets a nominal GPU quota
proportional to its share of the trace's GPU-time, but at least its largest
job, so every job can run under strict FIFO without borrowing too (quotas are
scaled so they add up to the cluster exactly). Nodes have 8 GPUs, 16 to a rack.

The default cluster, 512 GPUs (64 nodes), is one the trace keeps busy: over
its 109 days the trace asks for 374 GPUs on average and for more than 512
through most of weeks 3 to 9 (weekly means up to 714), so queues build up and
the scheduler's choices show; see the "time with jobs waiting" row.

Both policies replay every job through ``phalanx.sim`` (the scheduler core in
virtual time; preempted jobs restart from zero) with a scheduling cycle at most
once a simulated minute (``--tick``; 0 runs one at every event, slower). Prints
a table, writes ``benchmarks/results/philly.json`` and PNG plots under
``benchmarks/results/philly/``.

    python -m benchmarks.philly                 # the whole trace, both policies
    python -m benchmarks.philly --workers 2     # the two policies in parallel
    python -m benchmarks.philly --limit 5000    # a quick look
    python -m benchmarks.philly --checkpoint-every 1800   # every job saves each 30 min
    python -m benchmarks.philly --reserve-after 3600      # reservations and backfill
    python -m benchmarks.philly --write-config DIR   # queues.yaml + nodes.yaml for `phalanx sim`
    python -m benchmarks.philly --no-recovery   # without the recovery variants
    python -m benchmarks.philly --recovery-only # only them

After the policy comparison it replays the recovery variants of the phalanx policy
(``benchmarks/philly_recovery.py``): GPU-hours lost to restarts and preemptions with and
without minRuntime and checkpoints every 30 minutes, and node failures at 1 % per node
per day.
"""

from __future__ import annotations

import argparse
import cProfile
import math
import pstats
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import yaml
from rich.console import Console

from benchmarks import philly_recovery as recovery
from benchmarks.harness import RESULTS, machine, write_json
from phalanx.errors import SpecError
from phalanx.sim import SimResult, TraceJob, racked_nodes, read_trace, simulate
from phalanx.sim.report import gang_table, summary_table, teams_table
from phalanx.spec import GPU, Node, QueueConfig, parse_config_documents
from phalanx.spec.quantity import parse_duration
from phalanx.spec.resources import HoldForLargeGangs

TRACE = Path(__file__).resolve().parents[2] / "shared" / "traces" / "philly.csv"
GPUS = 512
GPUS_PER_NODE = 8
RACK_SIZE = 16
COHORT = "philly"
FLAVOR = "gpu"
POLICIES = ("fifo", "phalanx")
TICK = 60.0  # a cycle a minute at most: Philly jobs run for hours, and cycles cost time


def quotas(trace: Sequence[TraceJob], gpus: int) -> dict[str, int]:
    """Nominal GPUs per team: proportional to GPU-time, at least the team's largest job,
    summing to ``gpus`` (water-filling, then largest remainders)."""
    demand: dict[str, float] = {}
    floor: dict[str, int] = {}
    for job in trace:
        demand[job.team] = demand.get(job.team, 0.0) + job.gpu_seconds
        floor[job.team] = max(floor.get(job.team, 0), job.gpus)
    if sum(floor.values()) > gpus:
        raise SystemExit(f"{gpus} GPUs cannot hold every team's largest job "
                         f"({sum(floor.values())} GPUs in all); use a bigger cluster")
    pinned: set[str] = set()
    while True:  # teams whose floor beats their proportional share keep the floor
        rest = gpus - sum(floor[t] for t in pinned)
        free = sum(demand[t] for t in demand if t not in pinned)
        scale = rest / free
        more = {t for t in demand if t not in pinned and floor[t] >= scale * demand[t]}
        if not more:
            break
        pinned |= more
    exact = {t: float(floor[t]) if t in pinned else scale * demand[t] for t in demand}
    out = {t: max(floor[t], math.floor(v)) for t, v in exact.items()}
    short = gpus - sum(out.values())
    for t in sorted(exact, key=lambda t: (out[t] - exact[t], t))[:max(short, 0)]:
        out[t] += 1
    return dict(sorted(out.items()))


def config_documents(nominal: dict[str, int]) -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = [
        {"kind": "ResourceFlavor", "name": FLAVOR},
        {"kind": "Cohort", "name": COHORT},
    ]
    for team, gpus in nominal.items():
        docs.append({
            "kind": "ClusterQueue", "name": team, "cohort": COHORT,
            "preemption": {"reclaimWithinCohort": "Any"},
            "resourceGroups": [{"coveredResources": [GPU], "flavors": [
                {"name": FLAVOR, "resources": [{"name": GPU, "nominalQuota": gpus}]}]}],
        })
        docs.append({"kind": "LocalQueue", "name": team, "clusterQueue": team})
    return docs


def build_config(nominal: dict[str, int]) -> QueueConfig:
    return QueueConfig().merged(parse_config_documents(config_documents(nominal)))


def write_config(directory: Path, nominal: dict[str, int], gpus: int) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "queues.yaml").write_text(yaml.safe_dump_all(config_documents(nominal),
                                                              sort_keys=False))
    nodes = [{"name": "gpu", "count": gpus // GPUS_PER_NODE, "rackSize": RACK_SIZE,
              "allocatable": {GPU: GPUS_PER_NODE}}]
    (directory / "nodes.yaml").write_text(yaml.safe_dump(nodes, sort_keys=False))


def figures(result: SimResult) -> dict[str, Any]:
    """The headline numbers of one run, flat, for the README table and for comparisons."""
    s = result.summary
    return {
        "gpu_utilisation": s["gpu_utilisation"],
        "utilisation_while_waiting": s["utilisation_while_waiting"],
        "queueing_delay_mean_s": s["queueing_delay"]["mean"],
        "queueing_delay_p50_s": s["queueing_delay"]["p50"],
        "queueing_delay_p99_s": s["queueing_delay"]["p99"],
        "jct_mean_s": s["jct"]["mean"],
        "makespan_s": s["makespan"],
        "preemptions": s["preemptions"],
        "preemptions_per_job": s["preemptions_per_job"],
        "wasted_gpu_hours": s["wasted_gpu_hours"],
        "lost_to_preemption_gpu_hours": s["lost_to_preemption_gpu_hours"],
        "gang_sizes": s["gang_sizes"],
        "queueing_delay_max_s": s["queueing_delay"]["max"],
        "share_gap": share_gap(result),
        "wall_seconds": s["wall_seconds"],
        "jobs_per_wall_second": s["jobs_per_wall_second"],
    }


UNCUT = 1000  # columns for output that goes to a file or pipe: wide enough for every table


def output() -> Console:
    """A terminal's own width; into a file or a pipe, wide enough that no table is cut (a
    Console not on a terminal assumes 80 columns and ellipsizes the cells beyond)."""
    return Console() if sys.stdout.isatty() else Console(width=UNCUT)


def share_gap(result: SimResult) -> float:
    """Half the L1 distance between the teams' shares of used GPU-time and their
    entitlements: the fraction of GPU-time that went to a team beyond its quota's share."""
    return sum(abs(t.share - t.entitlement) for t in result.teams) / 2


def replay(config: QueueConfig, nodes: list[Node], trace: list[TraceJob], policy: str,
           tick: float, profile: bool, estimate_every: int = 0,
           checkpoint_every: float | None = None,
           reserve_after: float | None = None,
           hold_large: HoldForLargeGangs | None = None) -> SimResult:
    """One policy's run, with progress lines (and a profile on stderr when asked)."""
    console = output()
    began = time.perf_counter()
    if policy != "phalanx":
        reserve_after = None  # FIFO is the reference, as it is
    elif hold_large is not None:
        config = config.merged([cq.model_copy(update={"hold_for_large_gangs": hold_large})
                                for cq in config.cluster_queues.values()])

    def progress(done: int, total: int, now: float) -> None:
        if done % 10_000 == 0:
            console.print(f"  {policy}: {done:,} / {total:,} jobs arrived, day {now / 86400:.1f}, "
                          f"{time.perf_counter() - began:.0f} s")

    if profile:
        profiler = cProfile.Profile()
        result = profiler.runcall(simulate, config, nodes, trace, policy, tick=tick,
                                  progress=progress, estimate_every=estimate_every,
                                  checkpoint_every=checkpoint_every,
                                  reserve_after=reserve_after)
        pstats.Stats(profiler, stream=sys.stderr).sort_stats("cumulative").print_stats(40)
        pstats.Stats(profiler, stream=sys.stderr).sort_stats("tottime").print_stats(25)
    else:
        result = simulate(config, nodes, trace, policy, tick=tick, progress=progress,
                          estimate_every=estimate_every, checkpoint_every=checkpoint_every,
                          reserve_after=reserve_after)
    console.print(f"  {policy}: done in {result.summary['wall_seconds']:.1f} s "
                  f"({result.summary['jobs_per_wall_second']:,.0f} jobs/s)")
    return result


def run(args: argparse.Namespace) -> list[SimResult]:
    console = output()
    trace = read_trace(args.trace)
    if args.limit:
        trace = trace[:args.limit]
    nominal = quotas(trace, args.gpus)
    if args.write_config:
        write_config(args.write_config, nominal, args.gpus)
        console.print(f"wrote {args.write_config}/queues.yaml and nodes.yaml")
        return []
    config = build_config(nominal)
    nodes = racked_nodes(args.gpus // GPUS_PER_NODE, GPUS_PER_NODE, RACK_SIZE)
    console.print(f"replaying {len(trace):,} jobs on {args.gpus} GPUs, policies "
                  f"{', '.join(args.policy)}, scheduling period {args.tick:g} s, "
                  f"scheduler core {machine()['scheduler_core']} ...")
    jobs = [(config, nodes, trace, policy, args.tick, args.profile, args.estimates,
             args.checkpoint_every, args.reserve_after, args.hold_large)
            for policy in args.policy]
    if args.recovery_only:
        jobs = []
    if args.workers > 1 and len(jobs) > 1:
        # One process per policy: the runs share nothing, and each reports its own wall time.
        with ProcessPoolExecutor(min(args.workers, len(jobs))) as pool:
            runs = list(pool.map(replay, *zip(*jobs, strict=True)))
    else:
        runs = [replay(*job) for job in jobs]
    if runs:
        console.print(summary_table(runs, f"Philly trace, {len(trace):,} jobs, {args.gpus} "
                                          f"GPUs ({args.gpus // GPUS_PER_NODE} nodes x "
                                          f"{GPUS_PER_NODE})"))
        console.print(gang_table(runs))
        console.print(teams_table(runs))
        for r in runs:
            scored = r.summary.get("estimates")
            if isinstance(scored, dict) and scored["scored_jobs"]:
                console.print(
                    f"estimated starts ({r.policy}): {scored['scored_jobs']:,} jobs that waited "
                    f"over 10 min, estimated at submit: {scored['within_25_percent']:.0%} "
                    f"within 25 %, {scored['within_factor_2']:.0%} within a factor of 2 "
                    f"({scored['unknown']:,} unknown, {scored['guesses']:,} guesses)")
    recovery_rows = replay_recovery(args, config, nodes, trace, runs) if args.recovery else []
    payload = {
        "benchmark": "philly",
        "command": "python -m benchmarks.philly " + " ".join(args.argv),
        "trace": str(args.trace),
        "jobs": len(trace),
        "tick_seconds": args.tick,
        "checkpoint_every_s": args.checkpoint_every,
        "reserve_after_s": args.reserve_after,
        "hold_for_large_gangs": None if args.hold_large is None else args.hold_large.to_dict(),
        "cluster": {"gpus": args.gpus, "nodes": args.gpus // GPUS_PER_NODE,
                    "gpus_per_node": GPUS_PER_NODE, "rack_size": RACK_SIZE},
        "nominal_gpus": nominal,
        "figures": {r.policy: figures(r) for r in runs},
        "runs": [r.to_dict() for r in runs],
    }
    if recovery_rows:
        payload["recovery"] = {
            "min_runtime_s": recovery.MIN_RUNTIME,
            "checkpoint_every_s": recovery.CHECKPOINT_EVERY,
            "failures_per_node_day": recovery.FAILURES_PER_NODE_DAY,
            "repair_s": recovery.REPAIR_SECONDS, "seed": recovery.SEED,
            "rows": recovery_rows, "node_failures": recovery.failure_cost(recovery_rows),
        }
    path = write_json("philly", payload, args.json)
    console.print(f"wrote {path}")
    if args.plots and runs:
        from phalanx.sim.plots import write_plots

        for p in write_plots(runs, args.plots):
            console.print(f"wrote {p}")
    return runs


def replay_recovery(args: argparse.Namespace, config: QueueConfig, nodes: list[Node],
                    trace: list[TraceJob], runs: list[SimResult]) -> list[dict[str, Any]]:
    """The recovery variants (``philly_recovery``), with the phalanx run as the first."""
    console = output()
    from_zero = [r for r in runs if r.policy == "phalanx"]  # the first variant's run
    done = {recovery.VARIANTS[0].name: from_zero[0]} if from_zero else {}
    todo = [v for v in recovery.VARIANTS if v.name not in done]
    console.print(f"recovery: replaying {len(todo)} variant(s) of the phalanx policy ...")
    jobs = [(config, nodes, trace, v, args.tick) for v in todo]
    if args.workers > 1 and len(jobs) > 1:
        with ProcessPoolExecutor(min(args.workers, len(jobs))) as pool:
            results = list(pool.map(recovery.replay, *zip(*jobs, strict=True)))
    else:
        results = [recovery.replay(*job) for job in jobs]
    done.update(results)
    rows = [recovery.figures(v.name, done[v.name]) for v in recovery.VARIANTS]
    console.print(recovery.table(rows))
    cost = recovery.failure_cost(rows)
    console.print(f"node failures at {recovery.FAILURES_PER_NODE_DAY:.0%} per node per day "
                  f"({cost['node_failures']:,} failures, {recovery.REPAIR_SECONDS / 3600:g} h "
                  f"repairs): {cost['gpu_hours_lost_added']:+,.0f} GPU-h lost, mean queueing "
                  f"delay {cost['queueing_delay_mean_added_s'] / 3600:+.2f} h "
                  f"({cost['queueing_delay_mean_change']:+.1%})")
    return rows


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--trace", type=Path, default=TRACE)
    parser.add_argument("--gpus", type=int, default=GPUS, help="cluster size in GPUs")
    parser.add_argument("--tick", type=float, default=TICK,
                        help=f"scheduling period in simulated seconds (default {TICK:g}; "
                             "0: a cycle at every event)")
    parser.add_argument("--limit", type=int, default=0, help="replay only the first N jobs")
    parser.add_argument("--policy", action="append", choices=POLICIES,
                        help="policies to compare (default: fifo and phalanx)")
    parser.add_argument("--json", type=Path, default=None,
                        help="output JSON (default: benchmarks/results/philly.json)")
    parser.add_argument("--plots", type=Path, default=RESULTS / "philly",
                        help="directory for the PNG plots (default: benchmarks/results/philly)")
    parser.add_argument("--workers", type=int, default=1,
                        help="run the policies in this many processes at once")
    parser.add_argument("--profile", action="store_true", help="print a cProfile of each run")
    parser.add_argument("--estimates", type=int, default=0, metavar="N",
                        help="estimate the start of every Nth arriving job with the control "
                             "plane's forecast and score it against its actual start (0: off)")
    parser.add_argument("--checkpoint-every", type=float, default=None, metavar="SECONDS",
                        help="every job checkpoints this often; a preempted run keeps its "
                             "last save (default: none, restarts from zero)")
    parser.add_argument("--reserve-after", type=float, default=None, metavar="SECONDS",
                        help="the phalanx policy's ClusterQueues get this reserveAfter: a head "
                             "that waited this long gets a reservation, later jobs backfill "
                             "(default: none)")
    parser.add_argument("--hold-large", type=hold_large, default=None, metavar="GPUS:AFTER",
                        help="the phalanx policy's ClusterQueues get holdForLargeGangs "
                             "{minGPUs: GPUS, after: AFTER}, e.g. 9:6h: a head of 9+ GPUs that "
                             "has waited 6 h admits nothing past it (default: none)")
    parser.add_argument("--no-recovery", dest="recovery", action="store_false",
                        help="skip the recovery variants (minRuntime, checkpoints, failures)")
    parser.add_argument("--recovery-only", action="store_true",
                        help="run only the recovery variants")
    parser.add_argument("--write-config", type=Path, default=None,
                        help="write queues.yaml and nodes.yaml for `phalanx sim` and stop")
    args = parser.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)
    if not args.policy:
        args.policy = list(POLICIES)
    if args.gpus < GPUS_PER_NODE or args.gpus % GPUS_PER_NODE:
        parser.error(f"--gpus must be a positive multiple of {GPUS_PER_NODE}")
    return args


def hold_large(text: str) -> HoldForLargeGangs:
    """``--hold-large GPUS:AFTER`` as the ClusterQueue setting."""
    gpus, sep, after = text.partition(":")
    try:
        if not sep or not gpus.strip().isdigit():
            raise SpecError(f"{text!r} is not GPUS:AFTER", field="--hold-large",
                            fix="write e.g. 9:6h")
        return HoldForLargeGangs(min_gpus=int(gpus),
                                 after=parse_duration(after, field="--hold-large"))
    except (SpecError, ValueError) as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def main(argv: list[str] | None = None) -> None:
    run(parse_args(argv))


if __name__ == "__main__":
    main()
