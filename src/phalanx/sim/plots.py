"""PNG plots of simulation results (matplotlib, the ``sim`` extra).

Three figures, each able to overlay several runs (one per policy):
queue length over time, GPU utilisation over time, and per-team share of the
GPUs used against entitlement. When a run bought node pools (autoscaling), a
fourth: GPUs paid for and GPUs busy over time.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from phalanx.errors import SpecError
from phalanx.sim.metrics import SimResult

DAY = 86400.0
BINS = 600


def _pyplot() -> Any:
    try:
        import matplotlib
    except ImportError:
        raise SpecError("plots need matplotlib", field="--plots",
                        fix="pip install 'phalanx[sim]' or leave out --plots") from None
    matplotlib.use("Agg")  # files only: never open a window
    import matplotlib.pyplot as plt

    return plt


def _time_axis(end: float) -> tuple[float, str]:
    return (DAY, "days") if end > 2 * DAY else (3600.0, "hours") if end > 7200 else (1.0, "s")


def write_plots(runs: Sequence[SimResult], directory: str | Path,
                prefix: str = "") -> list[Path]:
    """Write queue_length.png, utilisation.png and team_share.png (and capacity.png when a
    run autoscaled); return their paths."""
    if not runs:
        return []
    plt = _pyplot()
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    end = max(float(r.summary["makespan"]) for r in runs)
    scale, unit = _time_axis(end)
    series = [(r.policy, r.series.binned(end, BINS)) for r in runs]
    paths = []

    fig, ax = plt.subplots(figsize=(10, 4))
    for label, s in series:
        ax.plot([t / scale for t in s["t"]], s["pending"], label=label, linewidth=1)
    ax.set(xlabel=f"time ({unit})", ylabel="pending jobs (mean per slice)",
           title="Queue length over time")
    ax.legend()
    ax.grid(alpha=0.3)
    paths.append(_save(plt, fig, out / f"{prefix}queue_length.png"))

    fig, ax = plt.subplots(figsize=(10, 4))
    for label, s in series:
        util = [100 * b / c if c else 0.0 for b, c in zip(s["busy"], s["capacity"], strict=True)]
        ax.plot([t / scale for t in s["t"]], util, label=label, linewidth=1)
    ax.set(xlabel=f"time ({unit})", ylabel="GPU utilisation (%)", ylim=(0, 105),
           title="GPU utilisation over time")
    ax.legend()
    ax.grid(alpha=0.3)
    paths.append(_save(plt, fig, out / f"{prefix}utilisation.png"))

    if any(r.summary.get("autoscaling") for r in runs):
        fig, ax = plt.subplots(figsize=(10, 4))
        for label, s in series:
            times = [t / scale for t in s["t"]]
            line = ax.plot(times, s["capacity"], label=f"{label} paid", linewidth=1)[0]
            ax.plot(times, s["busy"], label=f"{label} busy", linewidth=1, linestyle="--",
                    color=line.get_color())
        ax.set(xlabel=f"time ({unit})", ylabel="GPUs (mean per slice)",
               title="GPUs paid for and busy over time")
        ax.legend()
        ax.grid(alpha=0.3)
        paths.append(_save(plt, fig, out / f"{prefix}capacity.png"))

    teams = [t.cluster_queue for t in runs[0].teams]
    fig, ax = plt.subplots(figsize=(max(8, len(teams) * 0.7), 4.5))
    width = 0.8 / (len(runs) + 1)
    xs = range(len(teams))
    ax.bar([x - 0.4 + width / 2 for x in xs], [100 * t.entitlement for t in runs[0].teams],
           width, label="entitlement (nominal quota)", color="lightgray", edgecolor="gray")
    for k, r in enumerate(runs, start=1):
        share = {t.cluster_queue: t.share for t in r.teams}
        ax.bar([x - 0.4 + width * (k + 0.5) for x in xs],
               [100 * share.get(name, 0.0) for name in teams], width, label=f"{r.policy} share")
    ax.set_xticks(list(xs), teams, rotation=45, ha="right")
    ax.set(ylabel="% of GPU-time used", title="Per-team share vs entitlement")
    ax.legend()
    ax.grid(axis="y", alpha=0.3)
    paths.append(_save(plt, fig, out / f"{prefix}team_share.png"))
    return paths


def _save(plt: Any, fig: Any, path: Path) -> Path:
    fig.tight_layout()
    # No timestamps in the file, so identical runs give identical PNGs.
    fig.savefig(path, dpi=110, metadata={"Software": None})
    plt.close(fig)
    return path
