"""Recovery on the Philly trace: GPU-hours lost to restarts and preemptions, and what
minRuntime, checkpoints and node failures do to them.

Every variant replays the whole trace under the ``phalanx`` policy (the same queues,
cluster and scheduling period as ``benchmarks.philly``):

* ``from zero``: preempted and evicted jobs restart from zero (the default before
  checkpoints; the ``phalanx`` run of the main table);
* ``minRuntime``: every ClusterQueue protects jobs younger than ``MIN_RUNTIME`` from
  reclaim and fair-sharing preemption;
* ``ckpt 30m``: jobs save every 30 minutes of a run and a stopped run keeps its last
  save; preemption takes the equal candidate that loses least;
* ``ckpt 30m + minRuntime``: both (the recommended setting);
* ``... + failures``: the recommended setting with node failures at 1 % per node per
  day (seeded), each node down ``REPAIR_SECONDS``, against the same without failures.

``python -m benchmarks.philly`` runs them after the policy comparison (``--no-recovery``
skips them); ``--recovery-only`` runs only these.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rich.table import Table

from phalanx.sim import FailureModel, SimResult, TraceJob, simulate
from phalanx.spec import Node, QueueConfig

MIN_RUNTIME = 1800.0  # protected until its first checkpoint (CHECKPOINT_EVERY)
CHECKPOINT_EVERY = 1800.0
FAILURES_PER_NODE_DAY = 0.01
REPAIR_SECONDS = 4 * 3600.0
SEED = 0


@dataclass(frozen=True, slots=True)
class Variant:
    name: str
    checkpoint_every: float | None = None
    min_runtime: float | None = None
    failures: bool = False


VARIANTS = (
    Variant("from zero"),
    Variant("minRuntime", min_runtime=MIN_RUNTIME),
    Variant("ckpt 30m", checkpoint_every=CHECKPOINT_EVERY),
    Variant("ckpt 30m + minRuntime", CHECKPOINT_EVERY, MIN_RUNTIME),
    Variant("ckpt 30m + minRuntime + failures", CHECKPOINT_EVERY, MIN_RUNTIME, True),
)


def replay(config: QueueConfig, nodes: list[Node], trace: list[TraceJob], variant: Variant,
           tick: float) -> tuple[str, SimResult]:
    failures = FailureModel(rate_per_day=FAILURES_PER_NODE_DAY, repair_seconds=REPAIR_SECONDS,
                            seed=SEED) if variant.failures else None
    result = simulate(config, nodes, trace, "phalanx", tick=tick, failures=failures,
                      checkpoint_every=variant.checkpoint_every,
                      min_runtime=variant.min_runtime)
    return variant.name, result


def figures(name: str, result: SimResult) -> dict[str, Any]:
    s = result.summary
    jobs = max(1, int(s["jobs"]))
    return {
        "variant": name,
        "gpu_hours_lost": s["wasted_gpu_hours"],
        "gpu_hours_lost_to_preemption": s["lost_to_preemption_gpu_hours"],
        "gpu_hours_lost_to_failures": s["lost_to_failures_gpu_hours"],
        "gpu_hours_lost_per_job": float(s["wasted_gpu_hours"]) / jobs,
        "preemptions": s["preemptions"],
        "evictions": s["evictions"],
        "node_failures": s["node_failures"],
        "queueing_delay_mean_s": s["queueing_delay"]["mean"],
        "gpu_utilisation": s["gpu_utilisation"],
        "wall_seconds": s["wall_seconds"],
    }


def failure_cost(rows: Sequence[dict[str, Any]]) -> dict[str, float]:
    """What node failures add to the recommended setting: work lost and mean delay."""
    by_name = {r["variant"]: r for r in rows}
    without, with_ = by_name[VARIANTS[3].name], by_name[VARIANTS[4].name]
    return {
        "gpu_hours_lost_added": with_["gpu_hours_lost"] - without["gpu_hours_lost"],
        "gpu_hours_lost_to_failures": with_["gpu_hours_lost_to_failures"],
        "queueing_delay_mean_added_s": (with_["queueing_delay_mean_s"]
                                        - without["queueing_delay_mean_s"]),
        "queueing_delay_mean_change": (with_["queueing_delay_mean_s"]
                                       / without["queueing_delay_mean_s"] - 1),
        "node_failures": with_["node_failures"],
    }


def table(rows: Sequence[dict[str, Any]]) -> Table:
    """Each variant against the first (restart from zero); failures against the same
    setting without them."""
    out = Table(title="Philly: work lost to preemption and node failures (phalanx policy)",
                title_justify="left")
    for column in ("variant", "GPU-h lost", "per job", "lost vs from zero", "preemptions",
                   "node failures", "mean queueing delay", "delay vs from zero",
                   "utilisation"):
        out.add_column(column, justify="left" if column == "variant" else "right")
    base = rows[0]
    for row in rows:
        lost = row["gpu_hours_lost"]
        cut = base["gpu_hours_lost"] / lost if lost else float("inf")
        delay = row["queueing_delay_mean_s"] / base["queueing_delay_mean_s"] - 1
        out.add_row(row["variant"], f"{lost:,.0f}", f"{row['gpu_hours_lost_per_job']:.3f}",
                    f"{cut:.1f}x less" if row is not base else "-",
                    f"{row['preemptions']:,}", f"{row['node_failures']:,}",
                    f"{row['queueing_delay_mean_s'] / 3600:.2f} h",
                    f"{delay:+.1%}" if row is not base else "-",
                    f"{row['gpu_utilisation']:.1%}")
    return out
