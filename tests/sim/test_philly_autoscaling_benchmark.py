"""The fixed-vs-autoscaled Philly benchmark on a small synthetic trace in Philly's format."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from benchmarks import philly_autoscaling as bench

from tests.sim.test_philly_benchmark import philly_csv


def test_fixed_against_autoscaled_writes_table_json_and_plots(tmp_path: Path) -> None:
    out = tmp_path / "autoscaling.json"
    plots = tmp_path / "plots"
    trace = philly_csv(tmp_path / "philly.csv", 300)
    runs = bench.run(bench.parse_args([
        "--trace", str(trace), "--from-day", "0", "--days", "0", "--gpus", "64",
        "--json", str(out), "--plots", str(plots)]))
    assert [r.policy for r in runs] == [v.name for v in bench.VARIANTS]
    data = json.loads(out.read_text())
    assert data["jobs"] == 300 and data["peak_gpus"] == 64
    assert {"cpus", "python"} <= set(data["machine"])
    figures = data["figures"]
    fixed = figures["fixed"]
    makespan = data["runs"][0]["summary"]["makespan"]
    # The fixed cluster pays for its 8 nodes over the whole replay.
    assert fixed["node_hours"] == pytest.approx(8 * makespan / 3600)
    assert fixed["pools_created"] == 0 and fixed["peak_nodes"] == 8
    for name in ("pools", "pools + idleTTL"):
        assert figures[name]["completed"] == 300
        assert 0 < figures[name]["peak_nodes"] <= 8  # maxNodes: the same peak
    assert figures["pools"]["pools_created"] == 300  # one per gang, none reused
    reuse = figures["pools + idleTTL"]
    assert reuse["pools_reused"] > 0
    assert reuse["pools_created"] + reuse["pools_reused"] == 300
    assert 0 < figures["1-GPU pools"]["peak_nodes"] <= 64
    # Spend is node-hours at one price per GPU-hour, whatever the node size.
    for f in figures.values():
        assert f["spend"] == pytest.approx(f["gpu_hours_paid"] * bench.PRICE_PER_GPU_HOUR)
    # Pools boot for 5 minutes before their first job: nobody waits less on average.
    assert figures["pools"]["queueing_delay_mean_s"] >= 300
    assert sorted(p.name for p in plots.iterdir()) == [
        "capacity.png", "queue_length.png", "team_share.png", "utilisation.png"]


def test_window_counts_time_from_its_start(tmp_path: Path) -> None:
    trace = bench.read_trace(philly_csv(tmp_path / "philly.csv", 50))
    part = bench.window(trace, 0.25, 0.5)
    assert part and all(0 <= j.submit < 0.5 * bench.DAY for j in part)
    assert len(part) < len(trace)
