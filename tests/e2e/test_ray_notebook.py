"""A Ray cluster's day in a notebook, on the local plane with real Ray: ``up(wait=True)``,
the clusters widget's dashboard / down / up buttons, and ``down()`` returning only once the
cluster is gone. The widget is driven through its model (no browser)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import pytest
from rich.console import Console

from phalanx import Client
from phalanx.ray import Cluster, ClusterConfiguration, ClusterStatus, list_clusters
from tests.e2e.conftest import ControlPlane, running

pytest.importorskip("ray")
pytest.importorskip("ipywidgets")

from phalanx.widgets import ClustersView

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]
READY_SECONDS = 240
NAME = "nbcluster"


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Client]:
    with running(ControlPlane(tmp_path_factory.mktemp("raynb") / "home", grace=15)) as cp, \
            Client(home=cp.home) as c:
        yield c


def until(check: Callable[[], bool], refresh: Callable[[], None], seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        refresh()
        if check():
            return
        time.sleep(0.5)
    raise AssertionError("the widget never showed it")


def test_a_cluster_through_its_widget_and_down_that_waits(client: Client) -> None:
    cluster = Cluster(ClusterConfiguration(
        name=NAME, num_workers=0, head_cpu="250m", head_memory="1Gi",
        # A machine busy with other work may take Ray's node more than its default minute
        # to register.
        envs={"RAY_raylet_start_wait_time_s": "300"}), client)
    assert "(not up)" in cluster._repr_html_()  # its configuration until it is up
    cluster.up(wait=True, timeout=READY_SECONDS)
    assert cluster.status() == (ClusterStatus.READY, True)
    assert "ready" in cluster._repr_html_() and "memory 1Gi" in list_clusters(
        client=client)._repr_html_()

    view = ClustersView(client, start=False)
    try:
        view.refresh()
        row = view.rows[NAME]
        assert row.cells["status"].value == "ready"
        assert (row.up.disabled, row.down.disabled, row.dashboard.disabled) == (
            True, False, False)
        row.dashboard.click()
        assert cluster.dashboard_uri() in view.link.value and view.error.value == ""

        row.down.click()  # returns at once; the cluster goes down behind it
        until(lambda: row.cells["status"].value == "down", view.refresh)
        assert (row.up.disabled, row.down.disabled) == (False, True)

        row.up.click()  # the taken-down cluster is submitted again
        until(lambda: row.cells["status"].value in ("queued", "starting", "ready"),
              view.refresh)
    finally:
        view.close()
    cluster.wait_ready(timeout=READY_SECONDS)

    gone = cluster.down()  # waits until it is gone
    assert gone.status.value == "Cancelled"
    assert cluster.status() == (ClusterStatus.DOWN, False)
    assert all(p.phase != "Running" for p in client.get(NAME).pods)


def test_a_cluster_list_is_a_rich_table(client: Client) -> None:
    console = Console(record=True, width=200, file=open("/dev/null", "w"))  # noqa: SIM115
    console.print(list_clusters(all=True, client=client))
    text = console.export_text()
    assert "Ray clusters" in text and NAME in text and "down" in text
