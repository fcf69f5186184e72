"""``phalanx sim`` end to end: a real subprocess reads the files, prints the report and
writes JSON and PNG plots; bad input exits 2 naming the field and the fix."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from phalanx.cli.main import app

PNG = b"\x89PNG\r\n\x1a\n"


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "phalanx.cli.main", "sim", *args],
        capture_output=True, text=True, timeout=120, env={**os.environ, "COLUMNS": "200"},
    )


def test_sim_writes_report_json_and_plots(files: dict[str, Path], tmp_path: Path) -> None:
    out_json = tmp_path / "out" / "result.json"
    plots = tmp_path / "plots"
    done = run_cli("--trace", str(files["trace"]), "--queues", str(files["queues"]),
                   "--nodes", str(files["nodes"]), "--policy", "fifo", "--policy", "phalanx",
                   "--json", str(out_json), "--plots", str(plots))
    assert done.returncode == 0, done.stderr
    # The report (stdout) carries the four-job StrictFIFO outcome worked out in test_engine.
    assert "GPU utilisation" in done.stdout
    assert f"{100 * 2040 / (16 * 190):.1f} %" in done.stdout
    assert "team-a" in done.stdout
    assert "Queueing delay by gang size" in done.stdout
    assert "replaying 4 jobs on 2 nodes, policy fifo" in done.stderr
    assert "replaying 4 jobs on 2 nodes, policy phalanx" in done.stderr

    data = json.loads(out_json.read_text())
    assert [r["policy"] for r in data["runs"]] == ["fifo", "phalanx"]
    assert data["inputs"]["trace"] == str(files["trace"])
    # phalanx (BestEffortFIFO) lets j3 and j4 past j2: 150 s instead of 190 (test_engine).
    assert data["runs"][1]["summary"]["makespan"] == 150
    s = data["runs"][0]["summary"]
    assert (s["jobs"], s["completed"], s["makespan"]) == (4, 4, 190)
    assert s["gpu_utilisation"] == pytest.approx(2040 / 3040)
    assert s["queueing_delay"]["mean"] == pytest.approx(85)
    assert data["runs"][0]["teams"][0]["cluster_queue"] == "team-a"
    # The trace's gangs: j3 of 4 GPUs, j1 and j4 of 8, j2 of 16 (FIFO: j2 waits 90 s).
    gangs = s["gang_sizes"]
    assert [gangs[c]["jobs"] for c in ("1", "2-7", "8", "9-31", "32+")] == [0, 1, 2, 1, 0]
    assert gangs["9-31"]["max"] == 90
    assert s["preemptions_per_job"]["max"] == 0  # FIFO preempts nothing
    assert s["estimates"] is None  # off unless asked for
    series = data["runs"][0]["series"]
    assert len(series["t"]) == len(series["busy"]) == len(series["pending"]) > 0
    # The binned series keeps the busy GPU-seconds: mean busy x slice width sums to 2040.
    width = 190 / len(series["t"])
    assert sum(series["busy"]) * width == pytest.approx(2040, rel=1e-3)

    written = sorted(p.name for p in plots.iterdir())
    assert written == ["queue_length.png", "team_share.png", "utilisation.png"]
    for name in written:
        assert (plots / name).read_bytes()[:8] == PNG
        assert (plots / name).stat().st_size > 5000


def test_sim_with_failures_and_limit(files: dict[str, Path], tmp_path: Path) -> None:
    schedule = tmp_path / "failures.yaml"
    schedule.write_text("- {at: 5, node: gpu-0, downFor: 1000}\n")
    out_json = tmp_path / "r.json"
    result = CliRunner().invoke(app, [
        "sim", "--trace", str(files["trace"]), "--queues", str(files["queues"]),
        "--nodes", str(files["nodes"]), "--failure-schedule", str(schedule), "--limit", "2",
        "--restart", "resume", "--json", str(out_json)])
    assert result.exit_code == 0, result.output
    s = json.loads(out_json.read_text())["runs"][0]["summary"]
    # j1 (8 GPUs) is evicted at 5 and restarts on gpu-1 at once with 95 s left; j2 needs
    # 16 GPUs, so it waits until gpu-0 is back at 1005 and j1 is done.
    assert (s["jobs"], s["node_failures"], s["evictions"]) == (2, 1, 1)
    assert s["makespan"] == 1005 + 50


@pytest.mark.parametrize(("args", "expected"), [
    (["--policy", "lifo"], ["--policy: unknown policy 'lifo'", "fix: use one of"]),
    (["--failure-rate", "-1"], ["failures.ratePerDay", "negative"]),
])
def test_sim_bad_options(files: dict[str, Path], args: list[str], expected: list[str]) -> None:
    result = CliRunner().invoke(app, [
        "sim", "--trace", str(files["trace"]), "--queues", str(files["queues"]),
        "--nodes", str(files["nodes"]), *args], env={"COLUMNS": "200"})
    assert result.exit_code == 2, result.output
    for words in expected:
        assert words in result.stderr


def test_sim_bad_trace_row(files: dict[str, Path]) -> None:
    files["trace"].write_text("submit,duration,gpus,team\n0,100,8,team-a\n10,-1,8,team-a\n")
    done = run_cli("--trace", str(files["trace"]), "--queues", str(files["queues"]),
                   "--nodes", str(files["nodes"]))
    assert done.returncode == 2
    assert f"{files['trace']} row 3, column duration" in done.stderr
    assert "fix:" in done.stderr
    assert done.stdout == ""


def test_sim_bad_failure_schedule(files: dict[str, Path], tmp_path: Path) -> None:
    schedule = tmp_path / "f.yaml"
    for text, words in [("{at: 5}", "is not a list"), ("- {node: gpu-0}", "[0].at: is required"),
                        ("- {at: 5, node: gpu-9}", "failures.schedule[0].node")]:
        schedule.write_text(text)
        result = CliRunner().invoke(app, [
            "sim", "--trace", str(files["trace"]), "--queues", str(files["queues"]),
            "--nodes", str(files["nodes"]), "--failure-schedule", str(schedule)],
            env={"COLUMNS": "200"})
        assert result.exit_code == 2, (text, result.output)
        assert words in result.stderr, (text, result.stderr)


def test_sim_estimates_scores_each_jobs_estimate_at_submit(files: dict[str, Path],
                                                          tmp_path: Path) -> None:
    out_json = tmp_path / "r.json"
    result = CliRunner().invoke(app, [
        "sim", "--trace", str(files["trace"]), "--queues", str(files["queues"]),
        "--nodes", str(files["nodes"]), "--policy", "fifo", "--estimates",
        "--json", str(out_json)])
    assert result.exit_code == 0, result.output
    data = json.loads(out_json.read_text())
    assert data["inputs"]["estimateEvery"] == 1
    scored = data["runs"][0]["summary"]["estimates"]
    assert scored["estimated_jobs"] == 4  # every job, at its submit
    assert scored["sampled_every"] == 1
