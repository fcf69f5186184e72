"""The Philly benchmark at small scale: quotas, config files, JSON and plots."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from benchmarks import philly

from phalanx.sim import TraceJob

REPO = Path(__file__).resolve().parents[2]


def job(team: str, gpus: int, duration: float) -> TraceJob:
    return TraceJob(f"{team}-{gpus}-{duration:g}", 0.0, duration, gpus, team)


def test_quotas_follow_gpu_time_with_a_floor_of_the_largest_job() -> None:
    """GPU-time a 300, b 100 (largest job 8), c 600 on 16 GPUs: b's proportional 1.6 is below
    its 8-GPU job, so b keeps 8 and a and c share the other 8 as 300:600 = 2.67:5.33; the one
    GPU left after rounding down goes to a, the furthest below its exact share."""
    trace = [job("a", 1, 300), job("b", 8, 12.5), job("c", 1, 400), job("c", 1, 200)]
    assert philly.quotas(trace, 16) == {"a": 3, "b": 8, "c": 5}
    assert sum(philly.quotas(trace, 40).values()) == 40
    with pytest.raises(SystemExit, match="largest job"):
        philly.quotas(trace, 9)


def philly_csv(path: Path, jobs: int, seed: int = 7) -> Path:
    """A trace in Philly's format: five virtual clusters over one day, 1 to 8 GPUs a job."""
    rng = random.Random(seed)
    start = datetime(2017, 10, 9)
    lines = ["timestamp,duration,num_gpus,gpu_time,cluster"]
    for _ in range(jobs):
        at = start + timedelta(seconds=rng.randrange(86_400))
        duration, gpus = float(rng.randrange(60, 7_200)), rng.choice((1, 1, 2, 4, 8))
        lines.append(f"{at:%Y-%m-%d %H:%M:%S},{duration},{gpus},{duration * gpus},"
                     f"vc{rng.randrange(5)}")
    path.write_text("\n".join(lines) + "\n")
    return path


def test_small_replay_writes_json_and_plots(tmp_path: Path) -> None:
    out = tmp_path / "philly.json"
    plots = tmp_path / "plots"
    trace = philly_csv(tmp_path / "philly.csv", 400)
    runs = philly.run(philly.parse_args(["--trace", str(trace), "--gpus", "128",
                                         "--json", str(out), "--plots", str(plots)]))
    assert [r.policy for r in runs] == ["fifo", "phalanx"]
    data = json.loads(out.read_text())
    assert data["jobs"] == 400
    assert data["cluster"] == {"gpus": 128, "nodes": 16, "gpus_per_node": 8, "rack_size": 16}
    assert sum(data["nominal_gpus"].values()) == 128
    assert {"cpus", "python"} <= set(data["machine"])
    fifo, phalanx = (r["summary"] for r in data["runs"])
    for s in (fifo, phalanx):
        assert s["completed"] + s["rejected"] + s["unfinished"] == 400
        assert s["completed"] == 400
        assert 0 < s["gpu_utilisation"] <= 1
    assert fifo["preemptions"] == 0
    assert data["figures"]["fifo"]["jobs_per_wall_second"] > 0
    assert sorted(p.name for p in plots.iterdir()) == ["queue_length.png", "team_share.png",
                                                      "utilisation.png"]
    recovery = data["recovery"]
    rows = {r["variant"]: r for r in recovery["rows"]}
    assert list(rows) == [v.name for v in philly.recovery.VARIANTS]
    # The first variant is the phalanx run itself; checkpoints can only keep work.
    assert rows["from zero"]["gpu_hours_lost"] == pytest.approx(phalanx["wasted_gpu_hours"])
    assert rows["ckpt 30m"]["gpu_hours_lost"] <= rows["from zero"]["gpu_hours_lost"]
    failed = rows["ckpt 30m + minRuntime + failures"]
    assert recovery["failures_per_node_day"] == 0.01 and rows["from zero"]["node_failures"] == 0
    assert recovery["node_failures"]["node_failures"] == failed["node_failures"]
    lost = recovery["node_failures"]["gpu_hours_lost_added"]
    assert lost == pytest.approx(failed["gpu_hours_lost"]
                                 - rows["ckpt 30m + minRuntime"]["gpu_hours_lost"])


def test_hold_large_sets_the_phalanx_queues_setting_and_refuses_bad_values(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "philly.json"
    trace = philly_csv(tmp_path / "philly.csv", 200)
    philly.run(philly.parse_args(["--trace", str(trace), "--gpus", "128", "--policy",
                                  "phalanx", "--no-recovery", "--hold-large", "9:6h",
                                  "--json", str(out), "--plots", str(tmp_path / "plots")]))
    assert json.loads(out.read_text())["hold_for_large_gangs"] == {"minGPUs": 9, "after": "6h"}
    for bad in ("9", "0:6h", "9:soon", "x:6h"):
        with pytest.raises(SystemExit):
            philly.parse_args(["--hold-large", bad])
        assert "--hold-large" in capsys.readouterr().err


def test_write_config_feeds_phalanx_sim(tmp_path: Path) -> None:
    """The queues and nodes the benchmark uses, written out, replay a trace through the
    CLI (one in Philly's format made here: the test needs no copy of the trace)."""
    trace = philly_csv(tmp_path / "trace.csv", 300)
    philly.run(philly.parse_args(["--write-config", str(tmp_path), "--trace", str(trace)]))
    nodes = (tmp_path / "nodes.yaml").read_text()
    assert f"count: {philly.GPUS // 8}" in nodes and "rackSize: 16" in nodes
    out = tmp_path / "cli.json"
    done = subprocess.run(
        [sys.executable, "-m", "phalanx.cli.main", "sim", "--trace", str(trace),
         "--queues", str(tmp_path / "queues.yaml"), "--nodes", str(tmp_path / "nodes.yaml"),
         "--policy", "phalanx", "--json", str(out)],
        capture_output=True, text=True, timeout=120, cwd=REPO)
    assert done.returncode == 0, done.stderr
    summary = json.loads(out.read_text())["runs"][0]["summary"]
    assert (summary["jobs"], summary["completed"], summary["gpus"]) == (300, 300, philly.GPUS)


def test_tables_are_printed_whole_into_a_pipe(tmp_path: Path) -> None:
    """Redirected, the output is not cut to a terminal's 80 columns: every column of the
    recovery table is there, and no cell is ellipsized."""
    trace = philly_csv(tmp_path / "philly.csv", 200)
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.philly", "--trace", str(trace), "--gpus", "128",
         "--policy", "phalanx", "--json", str(tmp_path / "out.json"),
         "--plots", str(tmp_path / "plots")],
        capture_output=True, text=True, timeout=300, cwd=REPO,
        env=env)
    assert done.returncode == 0, done.stderr
    assert "…" not in done.stdout, done.stdout
    (header,) = [line for line in done.stdout.splitlines()
                 if "variant" in line and "GPU-h lost" in line]
    assert "delay vs from zero" in header and header.rstrip().endswith("utilisation ┃"), header
    assert max(len(line) for line in done.stdout.splitlines()) > 80
    (row,) = [line for line in done.stdout.splitlines() if "ckpt 30m + minRuntime + fail" in line]
    assert row.rstrip().endswith("% │"), row  # the utilisation cell, whole
