"""cordon, uncordon, drain and node: the CLI, over real HTTP, to a control plane on the
simulated compute plane (in a subprocess)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from phalanx.sdk.client import Client
from tests.sdk.live_server import LiveServer

NODES = """\
nodes:
  - name: sim-a
    allocatable: {cpu: 8, memory: 32Gi}
  - name: sim-b
    allocatable: {cpu: 8, memory: 32Gi}
"""


@pytest.fixture
def server(tmp_path: Path) -> Iterator[LiveServer]:
    with LiveServer.simulated(tmp_path, NODES) as live:
        yield live


def cli(server: LiveServer, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "phalanx.cli", *args], env=server.env,
                          capture_output=True, text=True, timeout=60)


def job(name: str, cpu: str = "6") -> dict[str, Any]:
    return {"name": name, "restart": {"backoff": "30s"},
            "podSets": [{"name": "worker", "resources": {"cpu": cpu}, "command": ["train"]}]}


def until(condition: Any, timeout: float = 20.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError("timed out")


def test_cordon_keeps_new_pods_off_and_uncordon_lets_them_in(server: LiveServer) -> None:
    with Client(server.url, server.token) as client:
        assert cli(server, "cordon", "sim-a").returncode == 0
        assert cli(server, "cordon", "sim-b").returncode == 0
        assert {n.name: n.unschedulable for n in client.nodes()} == {"sim-a": True,
                                                                     "sim-b": True}
        client.submit(job("waits"))
        time.sleep(0.5)
        assert client.get("waits").status.value == "Queued"
        done = cli(server, "uncordon", "sim-b")
        assert done.returncode == 0 and "node sim-b uncordoned" in done.stderr
        running = until(lambda: (j := client.get("waits")).status.value == "Running" and j)
        assert running.admission is not None
        assert running.admission.pod_sets[0].nodes == ["sim-b"]
        listed = cli(server, "nodes")
        assert "cordoned" in listed.stdout.split("sim-a")[1].splitlines()[0]


def test_drain_requeues_the_gang_onto_another_node(server: LiveServer) -> None:
    with Client(server.url, server.token) as client:
        client.submit(job("ddp"))
        first = until(lambda: (j := client.get("ddp")).status.value == "Running" and j)
        node = first.admission.pod_sets[0].nodes[0]
        other = "sim-b" if node == "sim-a" else "sim-a"
        done = cli(server, "drain", node, "--grace", "1s")
        assert done.returncode == 0, done.stderr
        assert done.stdout.splitlines() == ["ddp"]
        # Requeued at once (no 30s backoff: the node failed, not the job), onto the other node.
        again = until(lambda: (j := client.get("ddp")).attempt == 2
                      and j.status.value == "Running" and j)
        assert again.admission.pod_sets[0].nodes == [other]
        assert (again.system_restarts, again.user_restarts) == (1, 0)
        drained = next(e for e in again.events if e.reason == "Drained")
        assert drained.message == f"node {node} is being drained"
        assert {n.name: n.unschedulable for n in client.nodes()}[node] is True


def test_node_shows_its_checks_and_unknown_nodes_are_refused(server: LiveServer) -> None:
    shown = cli(server, "node", "sim-a", "--json")
    assert shown.returncode == 0, shown.stderr
    node = json.loads(shown.stdout)
    assert node["name"] == "sim-a" and node["health"] == "healthy" and node["checks"] == []
    assert "No health checks reported" in cli(server, "node", "sim-a").stdout
    for verb in ("node", "cordon", "uncordon", "drain"):
        missing = cli(server, verb, "nope")
        assert missing.returncode == 2, (verb, missing.stderr)
        assert "no node 'nope'" in missing.stderr
