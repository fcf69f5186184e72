"""Scheduler core benchmark: cycle time and admissions at 100k pending jobs.

Drives only the public ``phalanx.scheduler.Scheduler`` facade, the way the
control plane does: submit every job, run cycles, and between cycles play the
cluster (some admitted jobs finish, preempted victims come back to the queue,
a node is cordoned and another returns). Halfway through, a wave of
high-priority jobs arrives so preemption has work to do.

A second section times ``NodePool.place`` directly on the same node layout.

    python -m benchmarks.scheduler_core            # full scale (about a minute or more)
    python -m benchmarks.scheduler_core --quick    # smoke run
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from benchmarks.harness import machine
from phalanx.scheduler import Scheduler
from phalanx.scheduler.placement import NodePool, Placement, PodGroup
from phalanx.spec import (
    GPU,
    ClusterQueue,
    Cohort,
    JobSpec,
    LocalQueue,
    Node,
    QueueConfig,
    ResourceFlavor,
    TopologyConstraint,
)
from phalanx.spec.planes import PLANE_LABEL

FLAVOR = "h100"
RACK_SIZE = 16  # nodes per rack
BLOCK_SIZE = 8  # racks per block
GPUS_PER_NODE = 8
CPU_PER_GPU = 8
OVERSUBSCRIPTION = 1.25  # sum of nominal quotas over cluster capacity
GANG_SIZES = (1, 2, 4, 8, 16, 32, 64)
GANG_WEIGHTS = (40, 20, 14, 11, 8, 5, 2)  # skewed toward small jobs
DEFAULT_JSON = Path(__file__).parent / "results" / "scheduler_core.json"


@dataclass(frozen=True)
class Scale:
    jobs: int
    queues: int
    cohorts: int
    nodes: int
    cycles: int
    seed: int
    planes: int = 1  # compute planes the nodes are dealt over, block by block


# ---------------------------------------------------------------------------- generators
def build_nodes(count: int, planes: int = 1) -> list[Node]:
    """``count`` 8-GPU nodes, 16 to a rack and 8 racks to a block; with ``planes`` > 1,
    whole blocks dealt round-robin over that many compute planes."""
    def plane(i: int) -> dict[str, str]:
        if planes < 2:
            return {}
        return {PLANE_LABEL: f"cluster-{i // (RACK_SIZE * BLOCK_SIZE) % planes}"}
    return [
        Node(
            name=f"node-{i:05d}",
            labels={
                "pool": FLAVOR,
                "rack": f"rack-{i // RACK_SIZE:04d}",
                "block": f"block-{i // (RACK_SIZE * BLOCK_SIZE):03d}",
                **plane(i),
            },
            allocatable={"cpu": GPUS_PER_NODE * CPU_PER_GPU, GPU: GPUS_PER_NODE,
                         "memory": "2Ti", "pods": 110},
        )
        for i in range(count)
    ]


def queue_gpus(scale: Scale) -> int:
    """Nominal GPUs of one ClusterQueue: together they oversubscribe the cluster."""
    return max(8, round(scale.nodes * GPUS_PER_NODE * OVERSUBSCRIPTION / scale.queues))


def build_config(scale: Scale) -> QueueConfig:
    """One flavor; queues spread round-robin over cohorts; every third queue preempts."""
    gpus = queue_gpus(scale)
    cohorts = {f"cohort-{c:03d}": Cohort(name=f"cohort-{c:03d}") for c in range(scale.cohorts)}
    cluster_queues: dict[str, ClusterQueue] = {}
    local_queues: dict[str, LocalQueue] = {}
    for q in range(scale.queues):
        name = f"cq-{q:04d}"
        preempts = q % 3 == 0
        cluster_queues[name] = ClusterQueue.model_validate({
            "name": name,
            "cohort": f"cohort-{q % scale.cohorts:03d}",
            "resourceGroups": [{
                "coveredResources": ["cpu", GPU],
                "flavors": [{"name": FLAVOR, "resources": [
                    {"name": "cpu", "nominalQuota": gpus * CPU_PER_GPU},
                    {"name": GPU, "nominalQuota": gpus},
                ]}],
            }],
            "preemption": {
                "withinClusterQueue": "LowerPriority" if preempts else "Never",
                "reclaimWithinCohort": "Any" if preempts else "Never",
            },
        })
        local_queues[f"lq-{q:04d}"] = LocalQueue(name=f"lq-{q:04d}", cluster_queue=name)
    config = QueueConfig(
        flavors={FLAVOR: ResourceFlavor(name=FLAVOR, node_labels={"pool": FLAVOR})},
        cohorts=cohorts,
        cluster_queues=cluster_queues,
        local_queues=local_queues,
    )
    config.check()
    return config


def build_jobs(scale: Scale, count: int, rng: random.Random, *, prefix: str = "job",
               priorities: Sequence[tuple[str, int]] = (("low", 3), ("default", 6), ("high", 1)),
               ) -> list[JobSpec]:
    """Gangs of 1 to 64 pods of 1 or 8 GPUs, none larger than its cohort's whole quota."""
    cohort_gpus = queue_gpus(scale) * max(1, scale.queues // scale.cohorts)
    names, weights = zip(*priorities, strict=True)
    jobs = []
    for i in range(count):
        pods = rng.choices(GANG_SIZES, GANG_WEIGHTS)[0]
        per_pod = 8 if rng.random() < 0.3 and pods * 8 <= cohort_gpus else 1
        pods = min(pods, cohort_gpus // per_pod, scale.nodes)
        topology = None
        draw = rng.random()
        if pods > 1 and pods * per_pod <= RACK_SIZE * GPUS_PER_NODE and draw < 0.2:
            topology = TopologyConstraint(required="rack")
        elif pods > 1 and draw < 0.3:
            topology = TopologyConstraint(preferred="block")
        jobs.append(JobSpec.model_validate({
            "name": f"{prefix}-{i:06d}",
            "queue": f"lq-{rng.randrange(scale.queues):04d}",
            "priority": rng.choices(names, weights)[0],
            "topology": topology,
            "podSets": [{
                "name": "worker",
                "replicas": pods,
                "resources": {GPU: per_pod, "cpu": per_pod * CPU_PER_GPU},
            }],
        }))
    return jobs


# ---------------------------------------------------------------------------- measuring
class Timer:
    """Mean wall time of many short calls, in microseconds."""

    def __init__(self) -> None:
        self.total = 0.0
        self.calls = 0

    def run(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        result = fn(*args, **kwargs)
        self.total += time.perf_counter() - start
        self.calls += 1
        return result

    @property
    def mean_us(self) -> float:
        return self.total / self.calls * 1e6 if self.calls else 0.0


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return 0.0
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def peak_rss_mb() -> float:
    # ru_maxrss is in KiB on Linux.
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


# ---------------------------------------------------------------------------- the core run
def run_core(scale: Scale, console: Console) -> dict[str, Any]:
    rng = random.Random(scale.seed)
    started = time.perf_counter()
    nodes = build_nodes(scale.nodes, scale.planes)
    config = build_config(scale)
    jobs = build_jobs(scale, scale.jobs, rng)
    wave = build_jobs(scale, max(1, scale.jobs // 50), rng, prefix="urgent",
                      priorities=(("high", 1),))
    generated = time.perf_counter() - started
    console.log(f"generated {len(jobs):,} jobs, {len(nodes):,} nodes in {generated:.1f}s")

    started = time.perf_counter()
    scheduler = Scheduler(config, nodes)
    built = time.perf_counter() - started

    submit, remove, requeue, node_update = Timer(), Timer(), Timer(), Timer()
    clock = 0.0
    for job in jobs:
        clock += 0.001
        submit.run(scheduler.submit, job, priority=config.priority_value(job.priority),
                   submitted_at=clock)
    console.log(f"submitted in {submit.total:.1f}s ({submit.mean_us:.0f} us each)")

    running: list[str] = []  # admitted jobs, in admission order
    cycle_times: list[float] = []
    cycle_cpu: list[float] = []  # this process's CPU time: steadier than wall time on a shared box
    admissions: list[int] = []
    preemptions: list[int] = []
    cordoned: str | None = None
    for c in range(scale.cycles):
        now = 1000.0 + c
        start, start_cpu = time.perf_counter(), time.process_time()
        result = scheduler.cycle()
        cycle_times.append(time.perf_counter() - start)
        cycle_cpu.append(time.process_time() - start_cpu)
        admissions.append(len(result.admissions))
        preemptions.append(len(result.preemptions))
        running.extend(a.job for a in result.admissions)
        console.log(f"cycle {c}: {cycle_times[-1] * 1000:.0f} ms "
                    f"({cycle_cpu[-1] * 1000:.0f} ms CPU), "
                    f"{len(result.admissions)} admitted, {len(result.preemptions)} preempted")
        # The victims' pods terminate: they go back to their queues.
        victims = {p.victim for p in result.preemptions}
        for name in sorted(victims):
            requeue.run(scheduler.requeue, name, submitted_at=now)
        if victims:
            running = [j for j in running if j not in victims]
        # Some running jobs finish, oldest first with some noise, so cycles keep doing work.
        finishing = set(rng.sample(running, min(len(running), max(1, len(running) // 20))))
        for name in sorted(finishing):
            remove.run(scheduler.remove, name)
        running = [j for j in running if j not in finishing]
        # A node goes out of service and the previous one comes back.
        if cordoned is not None:
            node_update.run(scheduler.upsert_node, nodes[int(cordoned)])
        index = rng.randrange(len(nodes))
        node_update.run(scheduler.upsert_node,
                        nodes[index].model_copy(update={"unschedulable": True}))
        cordoned = str(index)
        if c == scale.cycles // 2 - 1:
            for job in wave:
                clock += 0.001
                submit.run(scheduler.submit, job, priority=config.priority_value(job.priority),
                           submitted_at=now + clock)
            console.log(f"submitted a wave of {len(wave):,} high-priority jobs")

    steady = cycle_times[1:]
    busy = sum(cycle_times)
    return {
        "setup": {"generate_s": round(generated, 3), "build_scheduler_s": round(built, 3)},
        "events_us": {
            "submit": round(submit.mean_us, 1),
            "remove": round(remove.mean_us, 1),
            "requeue": round(requeue.mean_us, 1),
            "node_update": round(node_update.mean_us, 1),
        },
        "first_cycle": {"seconds": round(cycle_times[0], 4), "admissions": admissions[0],
                        "preemptions": preemptions[0]},
        "cycles": {
            "count": len(steady),
            "p50_s": round(percentile(steady, 50), 4),
            "p99_s": round(percentile(steady, 99), 4),
            "mean_s": round(statistics.fmean(steady), 4) if steady else 0.0,
            "max_s": round(max(steady), 4) if steady else 0.0,
            "cpu_p50_s": round(percentile(cycle_cpu[1:], 50), 4),
            "cpu_mean_s": round(statistics.fmean(cycle_cpu[1:]), 4) if steady else 0.0,
        },
        "admissions": sum(admissions),
        "preemptions": sum(preemptions),
        "admissions_per_s": round(sum(admissions) / busy, 1) if busy else 0.0,
        "running_at_end": len(running),
        "per_cycle": [{"seconds": round(t, 4), "cpu_seconds": round(cpu, 4), "admissions": a,
                       "preemptions": p}
                      for t, cpu, a, p in zip(cycle_times, cycle_cpu, admissions, preemptions,
                                              strict=True)],
    }


# ---------------------------------------------------------------------------- placement alone
MICRO_SHAPES: list[tuple[str, int, int, TopologyConstraint | None]] = [
    ("1 pod x 1 GPU", 1, 1, None),
    ("8 pods x 1 GPU", 8, 1, None),
    ("4 pods x 8 GPU", 4, 8, None),
    ("64 pods x 8 GPU", 64, 8, None),
    ("16 pods x 8 GPU, rack required", 16, 8, TopologyConstraint(required="rack")),
    ("4 pods x 8 GPU, rack required", 4, 8, TopologyConstraint(required="rack")),
    ("32 pods x 8 GPU, block preferred", 32, 8, TopologyConstraint(preferred="block")),
    ("200 pods x 8 GPU, rack required (fails)", 200, 8, TopologyConstraint(required="rack")),
]


def group(pods: int, per_pod: int) -> PodGroup:
    return PodGroup("worker", pods, pods,
                    ((GPU, per_pod * 1000), ("cpu", per_pod * CPU_PER_GPU * 1000)),
                    (("pool", FLAVOR),))


def run_placement(scale: Scale, console: Console, fill: float = 0.7) -> dict[str, Any]:
    """Time place() on a cluster filled to ``fill`` of its GPUs by random gangs."""
    rng = random.Random(scale.seed)
    nodes = build_nodes(scale.nodes, scale.planes)
    started = time.perf_counter()
    pool = NodePool(nodes)
    built = time.perf_counter() - started
    target = fill * scale.nodes * GPUS_PER_NODE
    held = 0
    reserve, release = Timer(), Timer()
    jobs = 0
    while held < target:
        pods = rng.choices(GANG_SIZES, GANG_WEIGHTS)[0]
        per_pod = rng.choice((1, 8))
        groups = [group(pods, per_pod)]
        result = pool.place(groups)
        if not isinstance(result, Placement):
            break
        reserve.run(pool.reserve, f"fill-{jobs}", groups, result)
        held += pods * per_pod
        jobs += 1
    # Some gangs finish, leaving holes as a busy cluster has.
    for name in sorted({f"fill-{rng.randrange(jobs)}" for _ in range(min(200, jobs))}):
        release.run(pool.release, name)
    calls: dict[str, float] = {}
    repeat = 200 if scale.nodes >= 1000 else 50
    for label, pods, per_pod, topology in MICRO_SHAPES:
        groups = [group(min(pods, scale.nodes), per_pod)]
        timer = Timer()
        for _ in range(repeat):
            timer.run(pool.place, groups, topology)
        calls[label] = round(timer.mean_us, 1)
    freed = pool.reserved(f"fill-{jobs - 1}")
    freed_call = Timer()
    for _ in range(repeat):
        freed_call.run(pool.place, [group(4, 8)], None, freed=freed)
    calls["4 pods x 8 GPU with freed capacity"] = round(freed_call.mean_us, 1)
    console.log(f"placement: {jobs:,} gangs reserved, {len(pool.usage()):,} nodes in use")
    return {
        "nodes": scale.nodes,
        "fill": fill,
        "build_pool_s": round(built, 4),
        "reserve_us": round(reserve.mean_us, 1),
        "release_us": round(release.mean_us, 1),
        "place_us": calls,
    }


# ---------------------------------------------------------------------------- report
def parse_args(argv: Sequence[str] | None) -> tuple[Scale, argparse.Namespace]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--jobs", type=int, default=100_000, help="pending jobs to submit")
    parser.add_argument("--queues", type=int, default=1_000, help="ClusterQueues")
    parser.add_argument("--cohorts", type=int, default=100, help="cohorts")
    parser.add_argument("--nodes", type=int, default=5_000, help="8-GPU nodes")
    parser.add_argument("--cycles", type=int, default=30, help="scheduling cycles to run")
    parser.add_argument("--seed", type=int, default=1, help="random seed")
    parser.add_argument("--planes", type=int, default=1,
                        help="compute planes the nodes are dealt over (whole blocks each)")
    parser.add_argument("--json", type=Path, default=DEFAULT_JSON, help="where to write results")
    parser.add_argument("--quick", action="store_true",
                        help="small scale smoke run (2,000 jobs, 20 queues, 64 nodes, 6 cycles)")
    parser.add_argument("--placement-only", action="store_true",
                        help="only the NodePool micro benchmark")
    args = parser.parse_args(argv)
    if args.quick:
        scale = Scale(jobs=2_000, queues=20, cohorts=4, nodes=64, cycles=6, seed=args.seed,
                      planes=args.planes)
    else:
        scale = Scale(args.jobs, args.queues, args.cohorts, args.nodes, args.cycles, args.seed,
                      args.planes)
    for name in ("jobs", "queues", "cohorts", "nodes", "cycles", "planes"):
        if getattr(scale, name) < 1:
            parser.error(f"--{name} must be at least 1")
    if scale.cohorts > scale.queues:
        parser.error("--cohorts must not exceed --queues (every cohort needs a queue)")
    return scale, args


def render(results: dict[str, Any], console: Console) -> None:
    table = Table(title="Phalanx scheduler core", show_lines=False)
    table.add_column("measure")
    table.add_column("value", justify="right")
    p = results["params"]
    planes = p.get("planes", 1)
    table.add_row("scale", f"{p['jobs']:,} jobs, {p['queues']:,} queues, {p['cohorts']:,} "
                  f"cohorts, {p['nodes']:,} nodes x {GPUS_PER_NODE} GPU"
                  + (f" in {planes} compute planes" if planes > 1 else ""))
    core = results.get("core")
    if core:
        first, cycles = core["first_cycle"], core["cycles"]
        table.add_row("first cycle", f"{first['seconds'] * 1000:,.0f} ms, "
                      f"{first['admissions']:,} admitted")
        table.add_row(f"cycle p50 / p99 (next {cycles['count']})",
                      f"{cycles['p50_s'] * 1000:,.0f} / {cycles['p99_s'] * 1000:,.0f} ms")
        if "cpu_p50_s" in cycles:
            table.add_row("cycle CPU time p50 / mean",
                          f"{cycles['cpu_p50_s'] * 1000:,.0f} / "
                          f"{cycles['cpu_mean_s'] * 1000:,.0f} ms")
        table.add_row("admissions / preemptions",
                      f"{core['admissions']:,} / {core['preemptions']:,}")
        table.add_row("admissions per second of cycle time", f"{core['admissions_per_s']:,.0f}")
        for event, us in core["events_us"].items():
            table.add_row(f"event: {event}", f"{us:,.1f} us")
    micro = results["placement"]
    table.add_row("NodePool build / reserve / release",
                  f"{micro['build_pool_s'] * 1000:,.0f} ms / {micro['reserve_us']:,.0f} us / "
                  f"{micro['release_us']:,.0f} us")
    for label, us in micro["place_us"].items():
        table.add_row(f"place(): {label}", f"{us:,.0f} us")
    table.add_row("peak memory (max RSS)", f"{results['peak_rss_mb']:,.0f} MB")
    m = results["machine"]
    table.add_row("machine", f"{m['cpu_model']}, {m['cpus']} cores, Python {m['python']}")
    table.add_row("scheduler core", m["scheduler_core"])
    console.print(table)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    scale, args = parse_args(argv)
    console = Console(stderr=True)
    results: dict[str, Any] = {
        "benchmark": "scheduler_core",
        "command": "python -m benchmarks.scheduler_core " + " ".join(
            sys.argv[1:] if argv is None else argv),
        "machine": machine(),
        "params": {"jobs": scale.jobs, "queues": scale.queues, "cohorts": scale.cohorts,
                   "nodes": scale.nodes, "gpus_per_node": GPUS_PER_NODE,
                   "cycles": scale.cycles, "seed": scale.seed, "planes": scale.planes,
                   "queue_nominal_gpus": queue_gpus(scale)},
    }
    results["placement"] = run_placement(scale, console)
    if not args.placement_only:
        results["core"] = run_core(scale, console)
    results["peak_rss_mb"] = round(peak_rss_mb(), 1)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(results, indent=2) + "\n")
    render(results, console)
    console.log(f"wrote {args.json}")
    return results


if __name__ == "__main__":
    main()
