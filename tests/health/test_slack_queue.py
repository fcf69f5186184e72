"""A slack queue on a control plane (simulated compute plane, real HTTP): cordoning a node
shrinks its quota, preempts the lowest-priority job over it, shows in `phalanx queues`,
and uncordoning grows the quota back."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from phalanx.sdk.client import Client
from tests.sdk.live_server import LiveServer

NODES = """\
nodes:
  - name: sim-a
    allocatable: {cpu: 4, memory: 32Gi}
  - name: sim-b
    allocatable: {cpu: 4, memory: 32Gi}
"""

QUEUES = """\
kind: ClusterQueue
name: slack
capacityFollowsHealth: true
resourceGroups:
- coveredResources: [cpu]
  flavors:
  - name: default
    resources: [{name: cpu, nominalQuota: "8"}]
---
kind: LocalQueue
name: slack
clusterQueue: slack
"""


@pytest.fixture
def server(tmp_path: Path) -> Iterator[LiveServer]:
    with LiveServer.simulated(tmp_path, NODES) as live:
        yield live


def until(condition: Any, timeout: float = 20.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := condition():
            return value
        time.sleep(0.05)
    raise AssertionError("timed out")


def _nominal(client: Client) -> tuple[int, int]:
    [cq] = [q for q in client.queues().cluster_queues if q.name == "slack"]
    return cq.usage[0].nominal, cq.usage[0].withheld


def test_cordon_shrinks_a_slack_queue_and_uncordon_grows_it_back(server: LiveServer) -> None:
    with Client(server.url, server.token) as client:
        client.apply(list(yaml.safe_load_all(QUEUES)))
        for name, priority in (("low", "low"), ("high", "high")):
            client.submit({"name": name, "queue": "slack", "priority": priority,
                           "podSets": [{"resources": {"cpu": "4"}, "command": ["train"]}]})
        until(lambda: all(client.get(n).status.value == "Running" for n in ("low", "high")))
        assert _nominal(client) == (8000, 0)
        cordon = subprocess.run([sys.executable, "-m", "phalanx.cli", "cordon", "sim-a"],
                                env=server.env, capture_output=True, text=True, timeout=60)
        assert cordon.returncode == 0, cordon.stderr
        until(lambda: _nominal(client) == (4000, 4000))
        low = until(lambda: (j := client.get("low")).preemptions == 1 and j)
        assert "lost quota with its nodes" in low.message or any(
            "lost quota with its nodes" in e.message for e in low.events)
        assert client.get("high").status.value == "Running"
        shown = subprocess.run([sys.executable, "-m", "phalanx.cli", "queues"],
                               env=server.env, capture_output=True, text=True, timeout=60)
        assert "WITHHELD" in shown.stdout and "4" in shown.stdout.split("slack")[1]
        assert client.get("low").status.value == "Queued"
        subprocess.run([sys.executable, "-m", "phalanx.cli", "uncordon", "sim-a"],
                       env=server.env, check=True, capture_output=True, timeout=60)
        until(lambda: _nominal(client) == (8000, 0))
        until(lambda: client.get("low").status.value == "Running")
