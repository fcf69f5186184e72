"""`phalanx jobs` pages, `cancel` by selector, `delete`, several jobs per file and `down`
saying what keeps running: the CLI against a real control plane over real HTTP."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner, Result

from phalanx import Client
from phalanx.cli.main import app
from phalanx.spec.status import JobStatus
from phalanx.store import Store
from tests.sdk.live_server import LiveServer

pytestmark = pytest.mark.slow
runner = CliRunner()

NODES = """\
nodes:
  - name: sim-a
    allocatable: {cpu: 8, memory: 32Gi}
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with LiveServer.simulated(tmp_path_factory.mktemp("phalanx-cli-lists"), NODES) as live:
        yield live


def cli(server: LiveServer, *args: str) -> Result:
    env = {"PHALANX_HOME": str(server.home), "PHALANX_URL": None, "PHALANX_TOKEN": None,
           "COLUMNS": "200"}
    return runner.invoke(app, list(args), env=env)


def held_queue(server: LiveServer, tmp_path: Path) -> str:
    q = f"q{uuid.uuid4().hex[:6]}"
    path = tmp_path / f"{q}.yaml"
    path.write_text(yaml.safe_dump_all([
        {"kind": "ClusterQueue", "name": q, "stopPolicy": "Hold",
         "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
             {"name": "default", "resources": [{"name": "cpu", "nominalQuota": "1"}]}]}]},
        {"kind": "LocalQueue", "name": q, "clusterQueue": q},
    ]))
    assert cli(server, "apply", "-f", str(path)).exit_code == 0
    return q


def jobs_file(tmp_path: Path, names: list[str], queue: str,
              labels: dict[str, str] | None = None) -> Path:
    path = tmp_path / f"jobs-{uuid.uuid4().hex[:6]}.yaml"
    path.write_text(yaml.safe_dump_all([
        {"name": name, "queue": queue, "labels": labels or {},
         "podSets": [{"name": "w", "resources": {"cpu": "100m"}, "command": ["x"]}]}
        for name in names
    ]))
    return path


def test_several_jobs_in_one_file_are_submitted_together(
    server: LiveServer, tmp_path: Path
) -> None:
    q = held_queue(server, tmp_path)
    names = [f"{q}-{i}" for i in range(3)]
    result = cli(server, "submit", "-f", str(jobs_file(tmp_path, names, q)))
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == names


def test_a_bad_document_among_several_sends_nothing(server: LiveServer, tmp_path: Path) -> None:
    q = held_queue(server, tmp_path)
    path = jobs_file(tmp_path, [f"{q}-ok", f"{q}-bad"], q)
    docs = list(yaml.safe_load_all(path.read_text()))
    docs[1]["podSets"][0]["replicas"] = 0
    path.write_text(yaml.safe_dump_all(docs))
    result = cli(server, "submit", "-f", str(path))
    assert result.exit_code == 2
    assert "[1].podSets[0].replicas" in result.stderr
    with Client(server.url, server.token) as client:
        assert client.list(queue=q) == []


def test_jobs_shows_a_page_newest_first_and_counts_the_rest(
    server: LiveServer, tmp_path: Path
) -> None:
    q = held_queue(server, tmp_path)
    names = [f"{q}-{i:02d}" for i in range(12)]
    assert cli(server, "submit", "-f", str(jobs_file(tmp_path, names, q))).exit_code == 0

    result = cli(server, "jobs", "--queue", q, "--limit", "5")
    assert result.exit_code == 0, result.output
    rows = [line.split()[0] for line in result.stdout.splitlines()[1:]
            if line.startswith(q)]
    assert rows == names[::-1][:5]
    assert "and 7 more" in result.output and "--all" in result.output

    every = cli(server, "jobs", "--queue", q, "--all", "--json")
    assert [r["name"] for r in yaml.safe_load(every.stdout)] == names[::-1]


def test_jobs_filter_by_label_and_user(server: LiveServer, tmp_path: Path) -> None:
    q = held_queue(server, tmp_path)
    cli(server, "submit", "-f", str(jobs_file(tmp_path, [f"{q}-a"], q, {"team": "nlp"})))
    cli(server, "submit", "-f", str(jobs_file(tmp_path, [f"{q}-b"], q, {"team": "cv"})))
    result = cli(server, "jobs", "--queue", q, "--selector", "team=nlp", "--json")
    assert [r["name"] for r in yaml.safe_load(result.stdout)] == [f"{q}-a"]
    me = yaml.safe_load(cli(server, "jobs", "--queue", q, "--json").stdout)[0]["user"]
    assert me != "unknown"  # the CLI sends the OS user
    mine = cli(server, "jobs", "--queue", q, "--user", me, "--json")
    assert len(yaml.safe_load(mine.stdout)) == 2


def test_cancel_by_queue_and_selector(server: LiveServer, tmp_path: Path) -> None:
    q = held_queue(server, tmp_path)
    cli(server, "submit", "-f", str(jobs_file(tmp_path, [f"{q}-a", f"{q}-b"], q, {"run": "1"})))
    cli(server, "submit", "-f", str(jobs_file(tmp_path, [f"{q}-c"], q, {"run": "2"})))
    result = cli(server, "cancel", "--queue", q, "--selector", "run=1")
    assert result.exit_code == 0, result.output
    assert "2 job(s)" in result.output
    with Client(server.url, server.token) as client:
        statuses = {r.name: r.status for r in client.list(queue=q)}
    assert statuses == {f"{q}-a": JobStatus.CANCELLED, f"{q}-b": JobStatus.CANCELLED,
                        f"{q}-c": JobStatus.QUEUED}
    assert cli(server, "cancel", "--queue", q).exit_code == 0


def test_delete_config_by_name_and_file_and_finished_jobs(
    server: LiveServer, tmp_path: Path
) -> None:
    q = held_queue(server, tmp_path)
    cli(server, "submit", "-f", str(jobs_file(tmp_path, [f"{q}-a"], q)))

    refused = cli(server, "delete", "clusterqueue", q)
    assert refused.exit_code == 2  # nothing changed
    assert f"LocalQueue {q}" in refused.stderr
    live = cli(server, "delete", "job", f"{q}-a")
    assert live.exit_code == 2 and "cancel it first" in live.stderr

    cli(server, "cancel", f"{q}-a", "--wait")
    assert cli(server, "delete", "job", f"{q}-a").exit_code == 0
    assert cli(server, "delete", "localqueue", q).exit_code == 0
    assert cli(server, "delete", "clusterqueue", q).exit_code == 0

    q2 = held_queue(server, tmp_path)
    path = tmp_path / f"{q2}.yaml"
    result = cli(server, "delete", "-f", str(path))
    assert result.exit_code == 0, result.output
    assert f"clusterqueue/{q2} deleted" in result.stdout.lower()


def phalanx(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PHALANX_URL", "PHALANX_TOKEN")}
    env["PHALANX_HOME"] = str(home)
    return subprocess.run([sys.executable, "-m", "phalanx.cli.main", *args], env=env,
                          cwd=home, capture_output=True, text=True, timeout=120)


def sleeper(tmp_path: Path, name: str) -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump({
        "name": name, "podSets": [{"name": "w", "replicas": 2, "resources": {"cpu": "100m"},
                                   "command": [sys.executable, "-c",
                                               "import time; time.sleep(120)"]}]}))
    return path


def wait_running(home: Path, name: str) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        shown = phalanx(home, "describe", name, "--json")
        if '"Running"' in shown.stdout:
            return
        time.sleep(0.2)
    raise AssertionError(f"{name} never ran")


def test_down_says_which_jobs_keep_running(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    assert phalanx(home, "up", "-d", "--port", "0").returncode == 0
    try:
        assert phalanx(home, "submit", "-f", str(sleeper(tmp_path, "keeps"))).returncode == 0
        wait_running(home, "keeps")
        down = phalanx(home, "down")
        assert down.returncode == 0, down.stderr
        assert "keeps (2 pods)" in down.stderr
        assert "--stop-jobs" in down.stderr
        assert phalanx(home, "up", "-d", "--port", "0").returncode == 0
        wait_running(home, "keeps")  # adopted again

        stopped = phalanx(home, "down", "--stop-jobs")
        assert stopped.returncode == 0, stopped.stderr
        assert "keeps" in stopped.stderr
        with Store.for_home(home) as store:
            assert store.get_job("keeps").status is JobStatus.CANCELLED
    finally:
        phalanx(home, "down", "--timeout", "10")
