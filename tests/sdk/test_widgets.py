"""The notebook widgets, driven through their models against a real control plane: the
buttons call the API, a refresh updates the rows, closing stops the refreshing thread."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import pytest

import phalanx
from phalanx import Client
from tests.sdk.live_server import LiveServer, live_server

pytest.importorskip("ipywidgets")

from phalanx.widgets import JobsView, LogTail, view_jobs

__all__ = ["live_server"]


@pytest.fixture(scope="module")
def client(live_server: LiveServer) -> Iterator[Client]:
    with Client(live_server.url, live_server.token) as c:
        yield c


def until(check: Callable[[], bool], seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, "never happened"
        time.sleep(0.2)


def sleeper(name: str, **resources: str) -> phalanx.Job:
    return phalanx.Job(name).pod_set(
        "worker", command=["sh", "-c", f"echo hello from {name}; sleep 120"],
        resources=resources or {"cpu": "100m"})


def test_the_cancel_button_cancels_the_job(client: Client) -> None:
    client.submit(sleeper("to-cancel"))
    until(lambda: client.get("to-cancel").status.value == "Running")
    view = JobsView(client, start=False)
    view.refresh()
    row = view.rows["to-cancel"]
    assert row.cells["name"].value == "to-cancel" and not row.cancel.disabled
    assert view.table.children[0] is row.widget  # newest first
    row.cancel.click()
    cancelled = client.get("to-cancel")
    assert cancelled.cancel_requested or cancelled.status.value == "Cancelled"
    until(lambda: client.get("to-cancel").status.value == "Cancelled")
    view.refresh()
    assert row.cells["status"].value == "Cancelled" and row.cancel.disabled


def test_a_refresh_adds_and_updates_rows_and_says_why_pending(client: Client) -> None:
    view = JobsView(client, start=False)
    view.refresh()
    assert "fresh" not in view.rows
    client.submit(sleeper("fresh"))
    view.refresh()
    assert view.table.children[0] is view.rows["fresh"].widget
    until(lambda: client.get("fresh").status.value == "Running")
    view.refresh()
    assert view.rows["fresh"].cells["status"].value == "Running"
    # The whole quota while "fresh" holds some of it: it waits, and the row says why.
    client.submit(sleeper("whole", cpu="2"))
    until(lambda: "cpu" in (client.get("whole").pending_message or ""))
    view.refresh()
    whole = view.rows["whole"].cells
    assert whole["status"].value == "Queued" and "cpu" in whole["why"].value
    assert whole["resources"].value == "cpu 2"
    client.cancel("whole")
    client.cancel("fresh")


def test_queued_jobs_show_their_place_and_estimated_start(client: Client) -> None:
    """Behind a run of the whole quota with a maxRuntime, two queued jobs with one each:
    the forecast puts them first and second, one and two runs from now."""
    client.submit(sleeper("holder", cpu="2").max_runtime("10m"))
    until(lambda: client.get("holder").status.value == "Running")
    client.submit(sleeper("first", cpu="2").max_runtime("10m"))
    client.submit(sleeper("second", cpu="2").max_runtime("10m"))
    until(lambda: client.get("second").estimate is not None
          and client.get("first").estimate is not None)
    view = JobsView(client, start=False)
    try:
        view.refresh()
        first, second = view.rows["first"].cells, view.rows["second"].cells
        cluster_queue = client.get("first").cluster_queue
        assert (first["position"].value, second["position"].value) == ("#1", "#2")
        assert first["position"].tooltip == f"#1 in {cluster_queue}"  # in full on hover
        assert second["position"].tooltip == f"#2 in {cluster_queue}"
        assert (first["starts"].value, second["starts"].value) == ("~10m", "~20m")
        running = view.rows["holder"].cells
        assert (running["position"].value, running["starts"].value) == ("-", "-")
        assert running["position"].tooltip is None
    finally:
        view.close()
        for name in ("second", "first", "holder"):
            client.cancel(name)


def test_the_logs_button_tails_the_job_log(client: Client) -> None:
    client.submit(sleeper("talker"))
    until(lambda: client.get("talker").status.value == "Running")
    view = JobsView(client, start=False)
    view.refresh()
    view.rows["talker"].logs.click()
    assert isinstance(view.logs, LogTail) and view.logs.name == "talker"
    until(lambda: "hello from talker" in view.logs.text.value)  # type: ignore[union-attr]
    assert view.log_box.children == (view.logs.widget,)
    view.close()
    assert not view.logs.thread.is_alive()  # type: ignore[union-attr]
    client.cancel("talker")


def test_closing_stops_the_refresher(client: Client) -> None:
    view = view_jobs(client, interval=0.2)
    assert view.thread is not None and view.thread.is_alive()
    client.submit(sleeper("seen-live"))
    until(lambda: "seen-live" in view.rows)  # the thread refreshed it
    view.close()
    assert not view.thread.is_alive()
    client.cancel("seen-live")


def test_closing_the_widget_in_the_notebook_stops_it_too(client: Client) -> None:
    view = JobsView(client, interval=0.2)
    assert view.thread is not None and view.thread.is_alive()
    view.widget.close()  # what the notebook's close does: the comm goes
    view.thread.join(timeout=30)
    assert not view.thread.is_alive()


def test_an_unreachable_server_shows_in_the_view(client: Client) -> None:
    view = LogTail("no-such-job", client, start=False)
    view.refresh()
    assert "no-such-job" in view.error.value and view.text.value == ""
