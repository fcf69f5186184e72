"""What a simulation measures, and the result it hands back.

The simulator records a step function (busy GPUs, GPU capacity, pending and
running jobs, each constant between two event times) and one outcome per job.
Everything else is derived here:

* GPU utilisation: busy GPU-seconds / capacity GPU-seconds over [0, makespan].
* Utilisation while jobs wait: the same ratio over the instants when at least
  one job was pending (idle GPUs then are the scheduler's doing, not a lack of
  work, unless the waiting jobs do not fit).
* Goodput: GPU-seconds of work kept by the jobs that completed (their last run
  plus what their earlier runs saved at checkpoints) / capacity GPU-seconds (work
  a preemption or node failure threw away counts as busy but not as goodput, and
  so does the work of a job that never completed).
* Queueing delay: first admission - submission; JCT: completion - submission.
* Per gang size (1, 2-7, 8, 9-31, 32+ GPUs): jobs, mean, p99 and max queueing delay, so
  a policy's gain on small jobs cannot hide what big gangs pay; and preemptions per job
  (mean, p99, max: a job stopped again and again thrashes even when the total is low).
* Per ClusterQueue (team): GPU-seconds used, its share of all used GPU-seconds
  and of capacity, against its entitlement (nominal GPU quota / all nominal
  GPU quota) and its demand (GPU-seconds submitted / all submitted).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(slots=True)
class JobOutcome:
    name: str
    team: str  # LocalQueue
    cluster_queue: str
    gpus: int
    submit: float
    duration: float
    first_admit: float | None = None
    finish: float | None = None
    preemptions: int = 0
    evictions: int = 0  # by node failures
    system_restarts: int = 0  # charged to the restart budget (node failures)
    failed: str = ""  # why it ended without finishing (restart budget spent, maxRuntime)
    rejected: str = ""  # why the scheduler would never admit it (never submitted)

    @property
    def delay(self) -> float | None:
        return None if self.first_admit is None else self.first_admit - self.submit

    @property
    def jct(self) -> float | None:
        return None if self.finish is None else self.finish - self.submit


@dataclass(slots=True)
class Series:
    """The step function: value i holds from ``t[i]`` until ``t[i + 1]``."""

    t: list[float] = field(default_factory=list)
    busy: list[int] = field(default_factory=list)  # GPUs held by running jobs
    capacity: list[int] = field(default_factory=list)  # GPUs on nodes that are up
    pending: list[int] = field(default_factory=list)
    running: list[int] = field(default_factory=list)

    def record(self, t: float, busy: int, capacity: int, pending: int, running: int) -> None:
        if self.t and self.t[-1] == t:  # several cycles at one instant: keep the last state
            self.busy[-1], self.capacity[-1] = busy, capacity
            self.pending[-1], self.running[-1] = pending, running
            return
        self.t.append(t)
        self.busy.append(busy)
        self.capacity.append(capacity)
        self.pending.append(pending)
        self.running.append(running)

    def integrals(self, end: float) -> dict[str, float]:
        """Time integrals over [t[0], end] of busy and capacity, overall and while waiting."""
        busy = cap = wait_busy = wait_cap = wait_time = 0.0
        t = self.t
        n = len(t)
        for i in range(n):
            stop = t[i + 1] if i + 1 < n else end
            dt = min(stop, end) - t[i]
            if dt <= 0:
                continue
            b, c = self.busy[i] * dt, self.capacity[i] * dt
            busy += b
            cap += c
            if self.pending[i]:
                wait_busy += b
                wait_cap += c
                wait_time += dt
        return {"busy": busy, "capacity": cap, "wait_busy": wait_busy, "wait_capacity": wait_cap,
                "wait_time": wait_time}

    def binned(self, end: float, bins: int) -> dict[str, list[float]]:
        """Time-weighted means over ``bins`` equal slices of [0, end], for plots and JSON."""
        if end <= 0 or not self.t:
            return {"t": [], "busy": [], "capacity": [], "pending": [], "running": []}
        width = end / bins
        sums = {k: [0.0] * bins for k in ("busy", "capacity", "pending", "running")}
        columns = {k: getattr(self, k) for k in sums}
        t = self.t
        n = len(t)
        for i in range(n):
            start, stop = t[i], min(t[i + 1] if i + 1 < n else end, end)
            b = min(int(start / width), bins - 1)
            # Walk the bins by index: an edge recomputed from ``start`` can round back onto
            # the bin just left, which would drop the rest of the step.
            while start < stop:
                edge = stop if b >= bins - 1 else min(stop, (b + 1) * width)
                dt = edge - start
                if dt > 0:
                    for k, col in columns.items():
                        sums[k][b] += col[i] * dt
                    start = edge
                b += 1
        out: dict[str, list[float]] = {"t": [round((b + 0.5) * width, 3) for b in range(bins)]}
        for k, values in sums.items():
            out[k] = [round(v / width, 4) for v in values]
        return out


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (``q`` in 0..100) of a sorted, non-empty list."""
    rank = max(0, min(len(values) - 1, math.ceil(q / 100 * len(values)) - 1))
    return values[rank]


def stats(values: list[float]) -> dict[str, float]:
    if not values:
        return {"mean": 0.0, "p50": 0.0, "p95": 0.0, "p99": 0.0, "max": 0.0}
    ordered = sorted(values)
    return {
        "mean": sum(ordered) / len(ordered),
        "p50": percentile(ordered, 50),
        "p95": percentile(ordered, 95),
        "p99": percentile(ordered, 99),
        "max": ordered[-1],
    }


# Gang-size classes (GPUs of a job, inclusive bounds) and their labels.
GANG_CLASSES: tuple[tuple[str, int, float], ...] = (
    ("1", 1, 1), ("2-7", 2, 7), ("8", 8, 8), ("9-31", 9, 31), ("32+", 32, math.inf),
)


def gang_class(gpus: int) -> str:
    """The label of the gang-size class of a job of ``gpus`` GPUs (0 counts as 1)."""
    for label, low, high in GANG_CLASSES:
        if low <= max(gpus, 1) <= high:
            return label
    raise AssertionError(gpus)  # the classes cover every count


def by_gang_size(outcomes: list[JobOutcome]) -> dict[str, dict[str, float]]:
    """Per gang-size class: jobs admitted, and the mean, p99 and max of their delays."""
    delays: dict[str, list[float]] = {label: [] for label, _, _ in GANG_CLASSES}
    for o in outcomes:
        if (d := o.delay) is not None:
            delays[gang_class(o.gpus)].append(d)
    out = {}
    for label, values in delays.items():
        figures = stats(values)
        out[label] = {"jobs": float(len(values)), "mean": figures["mean"],
                      "p99": figures["p99"], "max": figures["max"]}
    return out


def preemptions_per_job(outcomes: list[JobOutcome]) -> dict[str, float]:
    """Preemptions per submitted job: mean, p99 and max, and how many jobs had any."""
    counts = [float(o.preemptions) for o in outcomes if not o.rejected]
    figures = stats(counts)
    return {"mean": figures["mean"], "p99": figures["p99"], "max": figures["max"],
            "jobs_preempted": float(sum(1 for c in counts if c))}


@dataclass(slots=True)
class TeamShare:
    cluster_queue: str
    jobs: int
    nominal_gpus: float
    entitlement: float  # nominal / all nominal
    demand: float  # GPU-seconds submitted / all submitted
    gpu_hours: float  # used, wasted work included
    share: float  # of all used GPU-seconds
    share_of_capacity: float
    mean_delay: float
    p99_delay: float
    preemptions: int


@dataclass(slots=True)
class SimResult:
    policy: str
    summary: dict[str, Any]
    teams: list[TeamShare]
    series: Series
    jobs: list[JobOutcome]

    def to_dict(self, bins: int = 1000, with_jobs: bool = False) -> dict[str, Any]:
        end = float(self.summary["makespan"])
        data: dict[str, Any] = {
            "policy": self.policy,
            "summary": self.summary,
            "teams": [asdict(t) for t in self.teams],
            "series": self.series.binned(end, bins),
        }
        if with_jobs:
            data["jobs"] = [asdict(j) for j in self.jobs]
        return data

    def fingerprint(self) -> tuple[object, ...]:
        """Everything a run decided, for comparing two runs exactly (wall time left out)."""
        jobs = tuple((j.name, j.first_admit, j.finish, j.preemptions, j.evictions, j.rejected)
                     for j in self.jobs)
        s = self.series
        return (jobs, tuple(s.t), tuple(s.busy), tuple(s.capacity), tuple(s.pending))
