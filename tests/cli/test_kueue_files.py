"""Kueue's own configuration files through `phalanx apply -f`, on a real control plane."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from phalanx import Client
from phalanx.cli.main import app
from tests.sdk.live_server import LiveServer

pytestmark = pytest.mark.slow
EXAMPLES = Path(__file__).parents[2] / "examples" / "kueue"
NODES = """\
nodes:
  - name: od-1
    labels: {instance-type: on-demand}
    allocatable: {cpu: 8, memory: 32Gi}
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with LiveServer.simulated(tmp_path_factory.mktemp("kueue-files"), NODES) as live:
        yield live


def cli(server: LiveServer, *args: str) -> Result:
    env = {"PHALANX_HOME": str(server.home), "PHALANX_URL": None, "PHALANX_TOKEN": None,
           "COLUMNS": "200"}
    return CliRunner().invoke(app, list(args), env=env)


def test_the_kueue_example_applies_and_phalanx_queues_shows_it(server: LiveServer) -> None:
    flavors = cli(server, "apply", "-f", str(EXAMPLES / "flavors.yaml"))
    queues = cli(server, "apply", "-f", str(EXAMPLES / "queues.yaml"))
    shown = cli(server, "queues")

    assert flavors.exit_code == 0, flavors.output
    assert "resourceflavor/spot created" in flavors.stdout
    assert queues.exit_code == 0, queues.output
    assert "clusterqueue/team-b created" in queues.stdout
    assert "priorityclass/production created" in queues.stdout
    assert shown.exit_code == 0, shown.output
    for name in ("team-a", "team-b", "research", "on-demand", "spot"):
        assert name in shown.stdout


def test_a_refused_kueue_field_names_its_path_and_changes_nothing(
        server: LiveServer, tmp_path: Path) -> None:
    path = tmp_path / "checks.yaml"
    path.write_text("""\
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: extra}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: gated}
spec:
  admissionScope: {admissionMode: UsageBasedAdmissionFairSharing}
""")
    before = cli(server, "config").stdout

    refused = cli(server, "apply", "-f", str(path))

    assert refused.exit_code == 2
    assert f"{path}[1] (ClusterQueue gated).spec.admissionScope" in refused.output
    assert "by priority, then submission time" in refused.output
    assert cli(server, "config").stdout == before


def test_the_sdk_applies_kueue_objects_and_warns_of_what_it_keeps_nowhere(
        server: LiveServer) -> None:
    flavor = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
              "metadata": {"name": "racked"},
              "spec": {"nodeLabels": {"instance-type": "on-demand"}, "topologyName": "racks"}}

    with Client(server.url, server.token) as client, pytest.warns(
            UserWarning, match="topologyName racks is not kept"):
        applied = client.apply([flavor])

    assert [(a.kind, a.name, a.action) for a in applied] == [
        ("ResourceFlavor", "racked", "created")]
