"""The dashboard shows the compute planes (clusters) of a control plane with two of them, in a
real headless Chromium: a Plane column in the jobs table, the job's plane on its page, and
the Clusters panel of the overview and nodes pages; a partition makes one plane's worker
silent and the pages say what it holds and that its job keeps its quota until it is lost.

Two simulated planes behind real ``phalanx worker`` processes over real HTTP
(``tests/planes/harness.py``); the single-plane dashboard, with neither column nor panel, is
``test_dashboard_browser.py``'s.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import suppress
from typing import Any

import pytest

from tests.planes.harness import Federation, Gate, sim_job, two_simulated_planes, wait_until
from tests.ui.browser import RESULTS, chromium, need_chromium
from tests.ui.test_dashboard_browser import (
    mark_page,
    no_console_errors,
    same_page,
    sign_in,
    text_of,
    wait_for,
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

SHOTS = RESULTS / "dashboard"


class Two:
    def __init__(self, federation: Federation, gate: Gate) -> None:
        self.fed = federation
        self.gate = gate


@pytest.fixture(scope="module")
def two(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Two]:
    need_chromium()
    root = tmp_path_factory.mktemp("ui-planes")
    with two_simulated_planes(root) as (federation, gate):
        federation.submit(sim_job("placed", 2))
        federation.submit(sim_job("waits", 2))  # over the quota with "placed": nowhere
        federation.wait_status("placed", "Running")
        yield Two(federation, gate)


@pytest.fixture(scope="module")
def browser(two: Two) -> Iterator[Any]:
    SHOTS.mkdir(parents=True, exist_ok=True)
    with chromium() as driver:
        sign_in(driver, two.fed.server, two.fed.server.token)
        wait_for(driver, lambda d: text_of(d, "#role") == "admin")
        yield driver


def cells(driver: Any, css: str) -> dict[str, str]:
    """Each cell of the row ``css`` by its class, read in one script call."""
    found = driver.execute_script(
        "const row = document.querySelector(arguments[0]); if (!row) return {};"
        "const out = {}; for (const c of row.cells) out[c.className] = c.innerText.trim();"
        "return out;", css)
    return {str(k): str(v) for k, v in dict(found).items()}


def headers(driver: Any) -> list[str]:
    return [str(h) for h in driver.execute_script(
        "return Array.from(document.querySelectorAll('table.jobs thead th'))"
        ".map(h => h.innerText.trim());")]


def test_the_jobs_table_has_a_plane_column(browser: Any, two: Two) -> None:
    browser.get(two.fed.server.url + "/ui/jobs")
    wait_for(browser, lambda d: text_of(d, "#job-placed .status") == "Running")
    assert headers(browser)[:5] == ["Name", "Queue", "Team", "Status", "Plane"]
    assert text_of(browser, "#job-placed .plane") == "gcp-a"
    assert text_of(browser, "#job-waits .plane") == "-"  # placed nowhere
    # The columns after it still sort by their own values: User, not Plane.
    user = browser.execute_script(
        "return document.querySelector('table.jobs thead th:nth-child(6) button')"
        ".dataset.sort;")
    assert user == "5"
    browser.save_screenshot(str(SHOTS / "jobs-planes.png"))
    no_console_errors(browser, "jobs (two planes)")


def test_the_clusters_panel_lists_each_plane(browser: Any, two: Two) -> None:
    from selenium.common.exceptions import TimeoutException

    connected = {"name": "gcp-a", "state": "connected", "nodes": "4", "jobs": "1",
                 "cpu": "16/32", "holds": "-"}

    def shown(driver: Any, url: str) -> dict[str, str]:
        driver.get(url)
        wait_for(driver, lambda d: text_of(d, "#clusters-h") == "Clusters")
        return cells(driver, "#plane-gcp-a")

    for page in ("/ui/", "/ui/nodes"):
        url = two.fed.server.url + page
        # Read again while the row differs: on a loaded machine the plane's heartbeat can
        # come a second late, and the panel then rightly says "silent 1s" for a moment.
        with suppress(TimeoutException):  # the assertion below shows what the row said
            wait_for(browser, lambda d, url=url: shown(d, url) == connected)
        gcp = cells(browser, "#plane-gcp-a")
        assert gcp == connected, page
        onprem = cells(browser, "#plane-onprem")
        assert onprem["state"] == "connected, cordoned"
        assert (onprem["nodes"], onprem["jobs"], onprem["cpu"]) == ("4", "0", "0/32")
        no_console_errors(browser, page)


def test_the_nodes_page_groups_nodes_under_their_cluster(browser: Any, two: Two) -> None:
    browser.get(two.fed.server.url + "/ui/nodes")
    wait_for(browser, lambda d: text_of(d, "#nodes-of-gcp-a-h"))
    grouped = browser.execute_script(
        "const out = {}; for (const s of document.querySelectorAll('section.plane-nodes'))"
        "  out[s.id] = Array.from(s.querySelectorAll('article.node h3'))"
        "    .map(h => h.firstChild.textContent.trim());"
        "return out;")
    assert sorted(grouped) == ["nodes-of-gcp-a", "nodes-of-onprem"]
    assert all(len(names) == 4 for names in grouped.values()), grouped
    assert all(name.startswith("gcp-a.") for name in grouped["nodes-of-gcp-a"]), grouped
    assert all(name.startswith("onprem.") for name in grouped["nodes-of-onprem"]), grouped
    assert text_of(browser, "#nodes-of-onprem-h") == "Cluster onprem 4 nodes"
    browser.save_screenshot(str(SHOTS / "nodes-by-cluster.png"))
    no_console_errors(browser, "nodes (two planes)")


def test_a_job_page_names_its_plane(browser: Any, two: Two) -> None:
    browser.get(two.fed.server.url + "/ui/jobs/placed")
    wait_for(browser, lambda d: text_of(d, "#job-status") == "Running")
    assert text_of(browser, "#job-plane") == "gcp-a"
    browser.get(two.fed.server.url + "/ui/jobs/waits")
    wait_for(browser, lambda d: text_of(d, "#job-status") == "Queued")
    assert not browser.find_elements("css selector", "#job-plane")  # placed nowhere
    no_console_errors(browser, "job detail (two planes)")


def test_a_silent_plane_says_what_it_holds_and_that_its_job_keeps_its_quota(
        browser: Any, two: Two) -> None:
    fed = two.fed
    browser.get(fed.server.url + "/ui/")
    wait_for(browser, lambda d: cells(d, "#plane-gcp-a").get("state") == "connected")
    mark_page(browser)
    two.gate.cut()
    try:
        wait_until(lambda: fed.plane("gcp-a")["phase"] == "silent", what="gcp-a to go silent")
        # The open overview follows without a reload.
        wait_for(browser, lambda d: cells(d, "#plane-gcp-a").get("state", "")
                 .startswith("silent"))
        assert same_page(browser), "the page reloaded"
        holds = cells(browser, "#plane-gcp-a")["holds"]
        assert holds.startswith("1 job keeping their quota (cpu=16 pods=2) for "), holds
        assert holds.endswith("until the plane is lost after 1m of silence"), holds
        assert cells(browser, "#plane-onprem")["holds"] == "-"
        browser.save_screenshot(str(SHOTS / "clusters-silent.png"))

        browser.get(fed.server.url + "/ui/jobs/placed")
        wait_for(browser, lambda d: text_of(d, "#job-plane").startswith(
            "gcp-a (worker silent for "))
        line = text_of(browser, "#job-plane")
        assert "the job keeps its quota until 1m of silence" in line, line
        assert "warn" in str(browser.execute_script(
            "return document.getElementById('job-plane').className;"))
        assert text_of(browser, "#job-status") == "Running"
        browser.save_screenshot(str(SHOTS / "job-silent-plane.png"))
        no_console_errors(browser, "silent plane")
    finally:
        two.gate.heal()
    wait_until(lambda: fed.plane("gcp-a")["phase"] == "connected", what="gcp-a to come back")
    wait_for(browser, lambda d: text_of(d, "#job-plane") == "gcp-a")
