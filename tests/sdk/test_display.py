"""Jobs, job lists and builders draw themselves: HTML tables in a notebook (every
user-written cell escaped), rich tables in a terminal, quantities as people write them."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from rich.console import Console

import phalanx
from phalanx import Client
from phalanx.display import Listing, Table
from tests.sdk.live_server import LiveServer, live_server

__all__ = ["live_server"]

SCRIPT = "<script>alert(1)</script>"


def rich_text(renderable: object) -> str:
    console = Console(record=True, width=200, file=open("/dev/null", "w"))  # noqa: SIM115
    console.print(renderable)
    return console.export_text()


@pytest.fixture(scope="module")
def client(live_server: LiveServer) -> Iterator[Client]:
    with Client(live_server.url, live_server.token) as c:
        yield c


def job(name: str) -> phalanx.Job:
    return phalanx.Job(name).pod_set("worker", replicas=2, command=["echo", SCRIPT],
                                     resources={"cpu": "500m", "memory": "1536Mi"})


def test_a_record_is_an_html_table_with_user_text_escaped(client: Client) -> None:
    record = client.submit(job("shown"))
    page = record._repr_html_()
    assert page.startswith('<table class="phalanx"') and "job shown" in page
    assert SCRIPT not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "worker x2: cpu 500m, memory 1.5Gi" in page  # as people write them
    detail = client.get("shown")
    assert "status" in detail._repr_html_() and detail.status.value in detail._repr_html_()


def test_a_record_is_a_rich_table_in_a_terminal(client: Client) -> None:
    text = rich_text(client.get("shown"))
    assert "job shown" in text and "worker x2: cpu 500m, memory 1.5Gi" in text
    assert f"echo {SCRIPT}" in text  # shown as written: no markup read from it


def test_a_job_list_is_a_table_of_rows(client: Client) -> None:
    client.submit(job("listed"))
    jobs = client.list()
    assert isinstance(jobs, list) and isinstance(jobs, Listing)
    assert [r.name for r in jobs][:2] == ["listed", "shown"]
    page = jobs._repr_html_()
    assert page.count("<tr>") == len(jobs) + 1  # the header and one row a job
    assert "cpu 1, memory 3Gi" in page  # the job's total: two pods of 500m and 1.5Gi
    assert "listed" in rich_text(jobs)
    assert "no jobs" in client.list(queue="nothing-here")._repr_html_()


def test_a_builder_shows_the_job_it_would_submit_or_what_is_wrong() -> None:
    page = job("draft")._repr_html_()
    assert "job draft (not submitted)" in page and "&lt;script&gt;" in page
    broken = phalanx.Job("broken")
    assert "not valid yet" in broken._repr_html_() and "podSets" in broken._repr_html_()
    assert "not valid yet" in rich_text(broken)


def test_a_table_escapes_its_title_and_columns() -> None:
    table = Table("<b>", ["<i>"], [["&"]])
    page = table._repr_html_()
    assert "<b>&lt;b&gt;</b>" in page and "&lt;i&gt;" in page and "&amp;" in page
    assert "[bold]" in rich_text(Table("t", ["c"], [["[bold]x[/bold]"]]))


def test_the_queues_usage_is_a_table(client: Client) -> None:
    overview = client.queues()
    page = overview._repr_html_()
    assert "cluster queues" in page and "<td" in page
    row = next(r for r in overview._repr_html_().split("<tr>") if ">default<" in r)
    assert ">cpu<" in row or ">memory<" in row
    assert "default" in rich_text(overview)
