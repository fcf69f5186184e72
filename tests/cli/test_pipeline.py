"""examples/pipeline.yaml through ``phalanx submit -f``, on a real control plane
(``phalanx up``) running real processes, over real HTTP."""

from __future__ import annotations

import itertools
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from phalanx import Client, JobStatus
from tests.cli.test_end_to_end import cli, job_file
from tests.sdk.live_server import LiveServer, live_server

__all__ = ["live_server"]

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]


def pipeline(tmp_path: Path, suffix: str, **commands: list[str]) -> Path:
    """examples/pipeline.yaml with its jobs renamed ``<name>-<suffix>``, its files in
    ``tmp_path`` and its script named by absolute path; ``commands`` replace steps'."""
    docs: list[dict[str, Any]] = list(yaml.safe_load_all(
        (REPO / "examples" / "pipeline.yaml").read_text()))
    for doc in docs:
        step = doc["podSets"][0]
        step["command"] = commands.get(doc["name"].replace("-", "_")) or [
            sys.executable, str(REPO / "examples" / step["command"][1]), *step["command"][2:]]
        step["env"]["PIPELINE_DIR"] = str(tmp_path / "data")
        doc["name"] += f"-{suffix}"
        doc["dependsOn"] = [
            f"{d}-{suffix}" if isinstance(d, str) else {**d, "job": f"{d['job']}-{suffix}"}
            for d in doc.get("dependsOn", ())]
    path = tmp_path / "pipeline.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    return path


def test_pipeline_runs_its_steps_in_order(live_server: LiveServer, tmp_path: Path) -> None:
    result = cli(live_server, "submit", "-f", str(pipeline(tmp_path, "ok")), "--wait")
    assert result.exit_code == 0, result.output
    assert result.stdout.split() == ["prepare-data-ok", "train-ok", "evaluate-ok", "report-ok"]
    with Client(home=live_server.home) as client:
        jobs = [client.get(name) for name in result.stdout.split()]
        assert all(job.status is JobStatus.SUCCEEDED for job in jobs)
        for before, after in itertools.pairwise(jobs):
            # Each step was admitted after the one before had ended (this machine's clock).
            assert before.finished_at is not None and after.admitted_at is not None
            assert after.admitted_at >= before.finished_at, (before.name, after.name)
            assert "DependenciesMet" in [e.reason for e in client.get(after.name).events]
        assert "trained on 500 points: slope 3.0" in "".join(client.logs("train-ok"))
        assert "evaluated: mse 0.0" in "".join(client.logs("evaluate-ok"))
        assert "model.json" in "".join(client.logs("report-ok"))


def test_failed_step_fails_the_steps_that_need_it(
    live_server: LiveServer, tmp_path: Path,
) -> None:
    broken = pipeline(tmp_path, "bad", prepare_data=[sys.executable, "-c", "exit(4)"])
    result = cli(live_server, "submit", "-f", str(broken), "--wait")
    assert result.exit_code == 1, result.output
    with Client(home=live_server.home) as client:
        statuses = {name: client.get(name).status for name in result.stdout.split()}
        assert statuses == {
            "prepare-data-bad": JobStatus.FAILED, "train-bad": JobStatus.FAILED,
            "evaluate-bad": JobStatus.FAILED,
            "report-bad": JobStatus.SUCCEEDED,  # condition Finished: runs however it ended
        }
        train = client.get("train-bad")
        assert train.attempt == 0
        assert "job prepare-data-bad it depends on ended Failed" in train.message


def test_describe_says_what_a_job_waits_for_and_a_cycle_is_refused(
    live_server: LiveServer, tmp_path: Path,
) -> None:
    sleeper = job_file(tmp_path, "upstream", "import time; time.sleep(300)")
    assert cli(live_server, "submit", "-f", str(sleeper)).exit_code == 0
    waiting = tmp_path / "downstream.yaml"
    waiting.write_text(yaml.safe_dump({
        "name": "downstream", "dependsOn": ["upstream"],
        "podSets": [{"resources": {"cpu": "100m"}, "command": [sys.executable, "-c", "pass"]}],
    }))
    assert cli(live_server, "submit", "-f", str(waiting)).exit_code == 0
    shown = cli(live_server, "describe", "downstream")
    assert shown.exit_code == 0, shown.output
    assert "Waiting for  job upstream to succeed [WaitingForDependencies]" in shown.stdout
    assert "Depends on   upstream (Succeeded)" in shown.stdout
    cycle = tmp_path / "cycle.yaml"
    cycle.write_text(yaml.safe_dump_all([
        {"name": n, "dependsOn": [d], "podSets": [{"command": ["true"]}]}
        for n, d in (("one", "two"), ("two", "one"))]))
    refused = cli(live_server, "submit", "-f", str(cycle))
    assert refused.exit_code == 2
    assert "items[0].dependsOn[0]: dependencies form a cycle: one -> two -> one" in (
        refused.stderr)
    assert cli(live_server, "cancel", "upstream", "--wait").exit_code == 0
    with Client(home=live_server.home) as client:
        assert client.wait("downstream", timeout=30).status is JobStatus.FAILED
        assert "ended Cancelled" in client.get("downstream").message
