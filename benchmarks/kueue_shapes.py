"""Kueue's scheduler scalability shapes, replayed in real time through a live control plane.

Builds the objects of Kueue's ``test/performance/scheduler/configs/<shape>/generator.yaml``
(cohorts of ClusterQueues with 20 CPU of nominal quota each, borrowing limit 100,
``reclaimWithinCohort: Any``, ``withinClusterQueue: LowerPriority``; small, medium
and large workloads of 1, 5 and 20 CPU), starts ``phalanx up --compute simulated``
in a fresh state directory (SQLite, or PostgreSQL with ``--db``), applies the
queues over HTTP and creates the jobs over HTTP on Kueue's per-queue schedule
(job k of a set is due (k+1) x its interval after the start). Each job's one pod
runs ``runtimeMs`` on the simulated plane and succeeds. Kueue's harness has no
nodes, only quota; so by default the simulated plane offers the whole nominal
capacity as one node and placement never refuses what quota admits.
``--node-cpu`` splits it into smaller nodes: then gangs meet fragmentation (a
20-CPU job needs 20 free CPU on one node, and the jobs whose preemption would
free them may sit on other nodes), which Kueue's figures do not include.

Measured as Kueue's recorder does: wall time (first creation due to last job
finished), usage per ClusterQueue class (admitted CPU x time over nominal quota x
monitored time) and mean time to admission per workload class (creation to the
last admission, from the jobs' server-side timestamps).

    python -m benchmarks.kueue_shapes --shape baseline
    python -m benchmarks.kueue_shapes --shape large-scale --db postgresql://USER@HOST/DB
    python -m benchmarks.kueue_shapes --shape baseline --per-job   # no batching
"""

from __future__ import annotations

import argparse
import queue
import sys
import tempfile
import time
import uuid
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make `benchmarks` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rich.console import Console
from rich.table import Table

from benchmarks.harness import RESULTS, ServerProcess, machine, percentile, write_json
from phalanx.sdk import Client
from phalanx.spec.status import JobRecord

console = Console(stderr=True)
CLASS_LABEL = "benchmark.phalanx.io/class"
FLAVOR = "default"
NODE_CPU_MIN = 20  # the largest workload's request: one node must hold a large job


@dataclass(frozen=True, slots=True)
class WorkloadSet:
    name: str  # workload class
    count: int  # per ClusterQueue
    interval_ms: int
    runtime_ms: int
    priority: int
    cpu: int


@dataclass(frozen=True, slots=True)
class Shape:
    name: str
    cohorts: int
    queues_per_cohort: int
    nominal_cpu: int
    borrowing_limit_cpu: int
    sets: tuple[WorkloadSet, ...]
    # Kueue's published means (envtest + minimalkueue) and this project's goals.
    kueue: dict[str, Any]
    goals: dict[str, Any]

    @property
    def queues(self) -> int:
        return self.cohorts * self.queues_per_cohort

    @property
    def jobs(self) -> int:
        return self.queues * sum(s.count for s in self.sets)


SHAPES = {
    "baseline": Shape(
        "baseline", cohorts=5, queues_per_cohort=6, nominal_cpu=20, borrowing_limit_cpu=100,
        sets=(
            WorkloadSet("small", 350, 100, 200, 50, 1),
            WorkloadSet("medium", 100, 500, 500, 100, 5),
            WorkloadSet("large", 50, 1200, 1000, 200, 20),
        ),
        kueue={"wall_s": 351.0, "usage": 0.559,
               "admission_s": {"small": 215.0, "medium": 77.0, "large": 16.5}},
        goals={"wall_s": 90.0, "usage": 0.80, "admission_fraction_of_kueue": 0.25},
    ),
    "large-scale": Shape(
        "large-scale", cohorts=10, queues_per_cohort=100, nominal_cpu=20,
        borrowing_limit_cpu=100,
        sets=(
            WorkloadSet("small", 35, 60, 150, 50, 1),
            WorkloadSet("medium", 11, 300, 350, 100, 5),
            WorkloadSet("large", 4, 700, 700, 200, 20),
        ),
        kueue={"wall_s": 1179.0, "usage": 0.386, "admission_s": {}},
        goals={"wall_s": 240.0},
    ),
}


# --------------------------------------------------------------------------- objects
def cq_name(cohort: int, index: int) -> str:
    return f"c{cohort}-q{index}"


def queue_documents(shape: Shape) -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = [{"kind": "ResourceFlavor", "name": FLAVOR}]
    for c in range(shape.cohorts):
        docs.append({"kind": "Cohort", "name": f"cohort-{c}"})
        for q in range(shape.queues_per_cohort):
            name = cq_name(c, q)
            docs.append({
                "kind": "ClusterQueue", "name": name, "cohort": f"cohort-{c}",
                "preemption": {"withinClusterQueue": "LowerPriority",
                               "reclaimWithinCohort": "Any"},
                "resourceGroups": [{
                    "coveredResources": ["cpu"],
                    "flavors": [{"name": FLAVOR, "resources": [{
                        "name": "cpu", "nominalQuota": str(shape.nominal_cpu),
                        "borrowingLimit": str(shape.borrowing_limit_cpu),
                    }]}],
                }],
            })
            docs.append({"kind": "LocalQueue", "name": name, "clusterQueue": name})
    return docs


def nodes_yaml(shape: Shape, node_cpu: int) -> str:
    """Nodes holding exactly the sum of the nominal quotas (``node_cpu`` each, the last
    one taking the remainder)."""
    total = shape.queues * shape.nominal_cpu
    sizes = [node_cpu] * (total // node_cpu)
    if total % node_cpu:
        sizes.append(total % node_cpu)
    lines = ["nodes:"]
    for i, cpu in enumerate(sizes):
        # As many pods as CPUs: no job of the shapes asks for less than one CPU, so pods
        # never limit (a node that declares none takes 110).
        lines.append(f"  - {{name: sim-{i}, allocatable: {{cpu: {cpu}, memory: 1Ti, "
                     f"pods: {cpu}}}}}")
    return "\n".join(lines) + "\n"


@dataclass(slots=True)
class Planned:
    due: float  # seconds after the start
    name: str
    cls: str
    cq: str
    spec: dict[str, Any]
    sent: float | None = None  # epoch seconds the request carrying it was sent


def schedule(shape: Shape, run: str) -> list[Planned]:
    plan = []
    for c in range(shape.cohorts):
        for q in range(shape.queues_per_cohort):
            cq = cq_name(c, q)
            for ws in shape.sets:
                for k in range(ws.count):
                    name = f"{run}-{cq}-{ws.name}-{k}"
                    spec = {
                        "name": name, "queue": cq, "priority": ws.priority,
                        "labels": {CLASS_LABEL: ws.name},
                        "podSets": [{
                            "name": "main", "resources": {"cpu": str(ws.cpu)},
                            "env": {"PHALANX_SIM_DURATION": f"{ws.runtime_ms}ms"},
                        }],
                    }
                    plan.append(Planned((k + 1) * ws.interval_ms / 1000, name, ws.name, cq, spec))
    plan.sort(key=lambda p: (p.due, p.name))
    return plan


# --------------------------------------------------------------------------- creating
def create_batched(client: Client, plan: list[Planned], start: float, max_batch: int) -> int:
    """Post every job that is due in one request per client tick; the number of requests."""
    i, requests = 0, 0
    while i < len(plan):
        now = time.time() - start
        if plan[i].due > now:
            time.sleep(plan[i].due - now)
            continue
        j = i
        while j < len(plan) and plan[j].due <= now and j - i < max_batch:
            j += 1
        batch = plan[i:j]
        sent = time.time()
        client.submit_many([p.spec for p in batch])
        for p in batch:
            p.sent = sent
        requests += 1
        i = j
    return requests


def create_per_job(server: ServerProcess, plan: list[Planned], start: float,
                   clients: int) -> int:
    """One request per job, from ``clients`` threads fed in schedule order."""
    due: queue.Queue[Planned | None] = queue.Queue()

    def worker() -> None:
        with server.client() as client:
            while (p := due.get()) is not None:
                p.sent = time.time()
                client.submit(p.spec)

    with ThreadPoolExecutor(clients) as pool:
        futures = [pool.submit(worker) for _ in range(clients)]
        for p in plan:
            wait = p.due - (time.time() - start)
            if wait > 0:
                time.sleep(wait)
            due.put(p)
        for _ in futures:
            due.put(None)
        for future in futures:
            future.result()
    return len(plan)


def wait_finished(client: Client, before: dict[str, int], total: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    last = -1
    while True:
        counts = client.status().jobs
        done = sum(counts.get(s, 0) - before.get(s, 0)
                   for s in ("Succeeded", "Failed", "Cancelled"))
        if done >= total:
            return
        if done != last and (done * 10 // total) != (last * 10 // total):
            console.log(f"{done:,} of {total:,} jobs finished")
        last = done
        if time.monotonic() > deadline:
            raise TimeoutError(f"only {done:,} of {total:,} jobs finished in {timeout:.0f}s")
        time.sleep(0.5)


# --------------------------------------------------------------------------- measuring
@dataclass(slots=True)
class Measured:
    records: dict[str, JobRecord] = field(default_factory=dict)
    # Per job: (admitted_at, released_at) intervals during which it held quota.
    held: dict[str, list[tuple[float, float]]] = field(default_factory=dict)


def collect(client: Client, shape: Shape, plan: list[Planned]) -> Measured:
    wanted = {p.name for p in plan}
    out = Measured()
    for c in range(shape.cohorts):
        for q in range(shape.queues_per_cohort):
            for record in client.list(queue=cq_name(c, q)):
                if record.name in wanted:
                    out.records[record.name] = record
    for name, record in out.records.items():
        if record.preemptions == 0 and record.attempt == 1:
            assert record.admitted_at is not None and record.finished_at is not None
            out.held[name] = [(record.admitted_at, record.finished_at)]
            continue
        # Admitted more than once: its events say when each admission's quota came back.
        spans, began = [], None
        for event in client.events(name):
            if event.reason == "Admitted":
                began = event.time
            elif began is not None and event.reason in (
                "Requeued", "Succeeded", "Failed", "Cancelled"
            ):
                spans.append((began, event.time))
                began = None
        out.held[name] = spans
    return out


def summarise(shape: Shape, plan: list[Planned], start: float,
              measured: Measured) -> dict[str, Any]:
    records = measured.records
    missing = len(plan) - len(records)
    by_name = {p.name: p for p in plan}
    statuses: dict[str, int] = defaultdict(int)
    for r in records.values():
        statuses[r.status.value] += 1
    end = max(r.finished_at or start for r in records.values())
    wall = end - start
    nominal = shape.queues * shape.nominal_cpu
    cpu_of = {ws.name: ws.cpu for ws in shape.sets}
    used = sum(cpu_of[by_name[n].cls] * (b - a) for n, spans in measured.held.items()
               for a, b in spans)
    classes: dict[str, Any] = {}
    for ws in shape.sets:
        mine = [r for r in records.values() if by_name[r.name].cls == ws.name]
        admission = [r.admitted_at - r.submitted_at for r in mine if r.admitted_at is not None]
        finish = [r.finished_at - r.submitted_at for r in mine if r.finished_at is not None]
        lag = [r.submitted_at - (start + by_name[r.name].due) for r in mine]
        # The last attempt held its quota this long beyond its pods' run time: the control
        # loop's latency from admission to launch and from the pods' end to the release.
        overhead = [r.finished_at - r.admitted_at - ws.runtime_ms / 1000 for r in mine
                    if r.finished_at is not None and r.admitted_at is not None]
        classes[ws.name] = {
            "count": len(mine),
            "mean_time_to_admission_s": sum(admission) / len(admission),
            "p50_time_to_admission_s": percentile(admission, 50),
            "p90_time_to_admission_s": percentile(admission, 90),
            "max_time_to_admission_s": max(admission),
            "mean_time_to_finish_s": sum(finish) / len(finish),
            "evictions": sum(r.preemptions for r in mine),
            "mean_creation_lag_s": sum(lag) / len(lag),
            "max_creation_lag_s": max(lag),
            "mean_hold_overhead_s": sum(overhead) / len(overhead),
            "p90_hold_overhead_s": percentile(overhead, 90),
        }
    return {
        "wall_s": wall,
        "statuses": dict(statuses),
        "missing": missing,
        "usage": {"cq": used / (nominal * wall)},
        "cpu_seconds_admitted": used,
        "cpu_seconds_needed": shape.queues * sum(
            ws.count * ws.cpu * ws.runtime_ms / 1000 for ws in shape.sets),
        "workload_classes": classes,
    }


def verdicts(shape: Shape, summary: dict[str, Any]) -> dict[str, bool]:
    goals, out = shape.goals, {}
    out["wall"] = summary["wall_s"] < goals["wall_s"]
    if "usage" in goals:
        out["usage"] = summary["usage"]["cq"] > goals["usage"]
    fraction = goals.get("admission_fraction_of_kueue")
    if fraction:
        for cls, kueue_s in shape.kueue["admission_s"].items():
            mine = summary["workload_classes"][cls]["mean_time_to_admission_s"]
            out[f"admission_{cls}"] = mine < fraction * kueue_s
    return out


# --------------------------------------------------------------------------- output
def print_table(shape: Shape, summary: dict[str, Any], checks: dict[str, bool],
                store: str, creation: str) -> None:
    table = Table(title=f"Kueue scalability shape '{shape.name}': {shape.jobs:,} jobs, "
                        f"{shape.queues} ClusterQueues in {shape.cohorts} cohorts ({store})")
    for column in ("measure", "Phalanx", "Kueue (published)", "goal", ""):
        table.add_column(column, justify="right" if column != "measure" else "left")

    def mark(key: str) -> str:
        return "" if key not in checks else ("ok" if checks[key] else "MISSED")

    table.add_row("wall time", f"{summary['wall_s']:.1f} s", f"{shape.kueue['wall_s']:,.0f} s",
                  f"< {shape.goals['wall_s']:.0f} s", mark("wall"))
    goal_usage = shape.goals.get("usage")
    table.add_row("usage (class cq)", f"{summary['usage']['cq']:.1%}",
                  f"{shape.kueue['usage']:.1%}",
                  f"> {goal_usage:.0%}" if goal_usage else "", mark("usage"))
    fraction = shape.goals.get("admission_fraction_of_kueue")
    for ws in shape.sets:
        c = summary["workload_classes"][ws.name]
        kueue_s = shape.kueue["admission_s"].get(ws.name)
        table.add_row(
            f"mean time to admission, {ws.name}", f"{c['mean_time_to_admission_s']:.2f} s",
            f"{kueue_s:g} s" if kueue_s else "-",
            f"< {fraction * kueue_s:.2f} s" if kueue_s and fraction else "",
            mark(f"admission_{ws.name}"),
        )
    for ws in shape.sets:
        c = summary["workload_classes"][ws.name]
        table.add_row(f"  {ws.name}: p90 / max admission, evictions",
                      f"{c['p90_time_to_admission_s']:.2f} / {c['max_time_to_admission_s']:.2f} s"
                      f", {c['evictions']}", "", "", "")
    Console(width=120).print(table)
    Console(width=120).print(f"scheduler core: {machine()['scheduler_core']}")
    Console().print(f"creation: {creation}")
    lags = [c["max_creation_lag_s"] for c in summary["workload_classes"].values()]
    Console().print(f"creation lag behind Kueue's schedule: max {max(lags):.2f} s; "
                    f"jobs {summary['statuses']}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", choices=sorted(SHAPES), default="baseline")
    parser.add_argument("--db", default=None, help="PostgreSQL URL (default: SQLite)")
    parser.add_argument("--out", type=Path, default=None,
                        help="JSON file (default: benchmarks/results/kueue_shapes_<shape>.json)")
    parser.add_argument("--node-cpu", type=int, default=None,
                        help="CPU per simulated node (default: all nominal capacity in one node)")
    parser.add_argument("--per-job", action="store_true",
                        help="one request per job (from --clients threads) instead of batches")
    parser.add_argument("--clients", type=int, default=8, help="threads for --per-job")
    parser.add_argument("--max-batch", type=int, default=5000, help="jobs per request at most")
    parser.add_argument("--timeout", type=float, default=3600.0)
    args = parser.parse_args()
    shape = SHAPES[args.shape]
    node_cpu = args.node_cpu or shape.queues * shape.nominal_cpu
    if node_cpu < NODE_CPU_MIN:
        parser.error(f"--node-cpu must be at least {NODE_CPU_MIN} (a large job's request)")
    store = "postgresql" if args.db else "sqlite"
    run = "k" + uuid.uuid4().hex[:6]  # unique names: a reused PostgreSQL keeps earlier runs
    plan = schedule(shape, run)
    if args.per_job:
        creation = (f"one POST /v1/jobs per job, from {args.clients} client threads, each "
                    "sent when due")
    else:
        creation = ("batched per client tick: every job due when the client wakes is sent in "
                    f"one POST /v1/jobs:batch (at most {args.max_batch:,} a request)")

    with tempfile.TemporaryDirectory(prefix="phalanx-kueue-") as tmp:
        nodes = Path(tmp) / "nodes.yaml"
        nodes.write_text(nodes_yaml(shape, node_cpu))
        up = ["--compute", "simulated", "--nodes", str(nodes)]
        if args.db:
            up += ["--db", args.db]
        with ServerProcess(Path(tmp) / "home", *up) as server, \
                server.client(timeout=600) as client:
            client.apply(queue_documents(shape))
            before = client.status().jobs
            console.log(f"{store}: {shape.jobs:,} jobs into {shape.queues} ClusterQueues at "
                        f"{server.url}; {creation}")
            start = time.time()
            if args.per_job:
                requests = create_per_job(server, plan, start, args.clients)
            else:
                requests = create_batched(client, plan, start, args.max_batch)
            created = time.time() - start
            console.log(f"created {len(plan):,} jobs in {requests:,} requests in "
                        f"{created:.1f} s (schedule: {plan[-1].due:.1f} s)")
            wait_finished(client, before, len(plan), args.timeout)
            console.log("all jobs finished; collecting their records")
            measured = collect(client, shape, plan)
    summary = summarise(shape, plan, start, measured)
    checks = verdicts(shape, summary)
    print_table(shape, summary, checks, store, creation)
    payload = {
        "shape": shape.name, "store": store, "creation": creation, "requests": requests,
        "creation_seconds": created, "node_cpu": node_cpu,
        "shape_parameters": {
            "cohorts": shape.cohorts, "queues_per_cohort": shape.queues_per_cohort,
            "nominal_cpu": shape.nominal_cpu, "borrowing_limit_cpu": shape.borrowing_limit_cpu,
            "workload_sets": [vars_of(ws) for ws in shape.sets], "jobs": shape.jobs,
        },
        "phalanx": summary, "kueue_published": shape.kueue, "goals": shape.goals,
        "goals_met": checks,
    }
    out = args.out or RESULTS / f"kueue_shapes_{shape.name}.json"
    path = write_json(f"kueue_shapes_{shape.name}", payload, out)
    console.log(f"wrote {path}")


def vars_of(ws: WorkloadSet) -> dict[str, Any]:
    return {"class": ws.name, "count": ws.count, "creation_interval_ms": ws.interval_ms,
            "runtime_ms": ws.runtime_ms, "priority": ws.priority, "cpu": ws.cpu}


if __name__ == "__main__":
    main()
