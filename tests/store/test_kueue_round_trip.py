"""A team leaves as easily as it came: `phalanx export --as kueue`, then `phalanx apply` of
that output, changes nothing in the store, on SQLite and on PostgreSQL."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner, Result

from phalanx.cli.main import app
from phalanx.spec import QueueConfig
from phalanx.store import Store
from tests.sdk.live_server import LiveServer

pytestmark = pytest.mark.slow
EXAMPLES = Path(__file__).parents[2] / "examples" / "kueue"
NODES = """\
nodes:
  - name: od-1
    labels: {instance-type: on-demand}
    allocatable: {cpu: 8, memory: 32Gi}
  - name: spot-1
    labels: {instance-type: spot}
    taints: [{key: spot, value: "true", effect: NoSchedule}]
    allocatable: {cpu: 8, memory: 32Gi}
"""
# Phalanx's own additions, in its short form in the same kind of file: they travel as
# phalanx.dev/ annotations, and ProvisioningPolicy (no Kueue counterpart) as it is.
ADDITIONS = """\
kind: ClusterQueue
name: team-c
maxPendingJobs: 50
minRuntime: 10m
avoidDegradedNodes: true
resourceGroups:
- coveredResources: [cpu, memory]
  flavors:
  - name: on-demand
    resources: [{name: cpu, nominalQuota: 2}, {name: memory, nominalQuota: 8Gi}]
---
kind: PriorityClass
name: protected
value: 500
minRuntime: 1h
---
kind: ProvisioningPolicy
name: default
maxPools: 3
"""


@pytest.fixture
def server(db_url: str, tmp_path: Path) -> Iterator[LiveServer]:
    with LiveServer.simulated(tmp_path, NODES, "--db", db_url) as live:
        yield live


def cli(server: LiveServer, *args: str) -> Result:
    env = {"PHALANX_HOME": str(server.home), "PHALANX_URL": None, "PHALANX_TOKEN": None,
           "COLUMNS": "200"}
    result = CliRunner().invoke(app, list(args), env=env)
    assert result.exit_code == 0, result.output
    return result


def stored(db_url: str) -> QueueConfig:
    with Store(db_url) as store:
        config = store.load_config()
    assert config is not None
    return config


@pytest.mark.parametrize("version", ["v1beta1", "v1beta2"])
def test_export_as_kueue_then_apply_changes_nothing(
        server: LiveServer, db_url: str, tmp_path: Path, version: str) -> None:
    additions = tmp_path / "additions.yaml"
    additions.write_text(ADDITIONS)
    for path in (EXAMPLES / "flavors.yaml", EXAMPLES / "queues.yaml", additions):
        cli(server, "apply", "-f", str(path))
    before = stored(db_url)

    exported = cli(server, "export", "--as", "kueue", "--api-version", version).stdout
    path = tmp_path / "exported.yaml"
    path.write_text(exported)
    report = json.loads(cli(server, "apply", "-f", str(path), "--json").stdout)

    assert stored(db_url) == before
    assert {entry["action"] for entry in report} == {"unchanged"}
    assert len(report) == len(before.objects())
    kinds = {doc["kind"] for doc in yaml.safe_load_all(exported)}
    assert {"ClusterQueue", "Cohort", "LocalQueue", "ResourceFlavor",
            "WorkloadPriorityClass", "ProvisioningPolicy"} == kinds


def test_get_as_kueue_writes_one_object_that_applies_unchanged(
        server: LiveServer, db_url: str, tmp_path: Path) -> None:
    for path in (EXAMPLES / "flavors.yaml", EXAMPLES / "queues.yaml"):
        cli(server, "apply", "-f", str(path))

    written = cli(server, "get", "cq", "team-a", "-o", "yaml", "--as", "kueue").stdout
    path = tmp_path / "team-a.yaml"
    path.write_text(written)
    report = json.loads(cli(server, "apply", "-f", str(path), "--json").stdout)

    doc = yaml.safe_load(written)
    assert doc["apiVersion"] == "kueue.x-k8s.io/v1beta1"
    assert doc["spec"]["cohort"] == "research"
    assert report == [{"kind": "ClusterQueue", "name": "team-a", "action": "unchanged"}]
