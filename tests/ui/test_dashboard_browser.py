"""The dashboard in a real headless Chromium against a real control plane (``phalanx up``
in a subprocess, the local compute plane running real processes).

One server and one browser for the module (CI has two cores): sign in, watch a job go
from pending to running to succeeded without reloading, follow its log, cancel a job
with the page's CSRF token (and see a forged request refused), see a queue's usage bar
change and why a job is pending, preview a viewer of one team who sees another team's
job as occupancy only, and the nodes page's health. Screenshots go to
``.test-results/dashboard`` (``$PHALANX_TEST_RESULTS``); one is checked for content.
No page may log a console error.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.sdk.live_server import LiveServer
from tests.ui.browser import RESULTS, chromium, console_errors, need_chromium

pytestmark = pytest.mark.slow

WAIT = 60.0
SHOTS = RESULTS / "dashboard"
QUEUES = [
    {"kind": "ResourceFlavor", "name": "default"},
    *({"kind": "ClusterQueue", "name": f"cq-{t}", "cohort": "lab",
       "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
           {"name": "default", "resources": [{"name": "cpu", "nominalQuota": "500m",
                                              "borrowingLimit": "0"}]}]}]}
      for t in ("a", "b")),
    {"kind": "LocalQueue", "name": "team-a", "clusterQueue": "cq-a"},
    {"kind": "LocalQueue", "name": "team-b", "clusterQueue": "cq-b"},
]


def python_job(name: str, queue: str, script: str, cpu: str = "100m") -> dict[str, Any]:
    return {"name": name, "queue": queue, "labels": {"team": queue},
            "podSets": [{"name": "w", "resources": {"cpu": cpu},
                         "command": [sys.executable, "-u", "-c", script]}]}


def counting(lines: int, pause: float, wait_first: float = 0.0) -> str:
    return (f"import time\ntime.sleep({wait_first})\n"
            f"for i in range({lines}):\n    print(f'line {{i}} of the count', flush=True)\n"
            f"    time.sleep({pause})\n")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    need_chromium()
    with LiveServer(tmp_path_factory.mktemp("phalanx-ui"),
                    ["--run-as-user", str(os.geteuid())]) as live:
        with live.client() as api:
            assert api.post("/v1/config/apply", json={"documents": QUEUES}).status_code == 200
        yield live


@pytest.fixture(scope="module")
def api(server: LiveServer) -> Iterator[httpx.Client]:
    with server.client() as client:
        yield client


@pytest.fixture(scope="module")
def browser(server: LiveServer) -> Iterator[Any]:
    SHOTS.mkdir(parents=True, exist_ok=True)
    with chromium() as driver:
        yield driver


def wait_for(driver: Any, condition: Any, timeout: float = WAIT) -> Any:
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, timeout, poll_frequency=0.2).until(condition)


def click(driver: Any, by: str, selector: str) -> None:
    """Click the element once it is there. Live fragments replace elements (a job's page
    is re-sent when its status or age changes), so an element found can be gone by the
    click: find it again and retry until the click lands."""
    from selenium.common.exceptions import StaleElementReferenceException

    def clicked(d: Any) -> bool:
        found = d.find_elements(by, selector)
        if not found:
            return False
        try:
            found[0].click()
        except StaleElementReferenceException:
            return False
        return True

    wait_for(driver, clicked)


def text_of(driver: Any, css: str) -> str:
    """The element's text, read in one script call: live fragments replace elements, so
    an element found first and read later may be gone by then."""
    text = driver.execute_script(
        "const e = document.querySelector(arguments[0]); return e ? e.innerText : '';", css)
    return str(text).strip()


def mark_page(driver: Any) -> None:
    """Mark the loaded document; ``same_page`` is then true until the page reloads."""
    driver.execute_script("window.__phalanxMark = 1;")


def same_page(driver: Any) -> bool:
    return bool(driver.execute_script("return window.__phalanxMark === 1;"))


def no_console_errors(driver: Any, page: str) -> None:
    errors = console_errors(driver)
    assert not errors, f"{page} logged console errors: {errors}"


def sign_in(driver: Any, server: LiveServer, key: str) -> None:
    from selenium.webdriver.common.by import By

    driver.get(server.url + "/ui/login")
    wait_for(driver, lambda d: d.find_elements(By.ID, "key"))
    driver.find_element(By.ID, "key").send_keys(key)
    driver.find_element(By.ID, "sign-in").click()


def session_cookie(driver: Any) -> dict[str, str]:
    return {c["name"]: c["value"] for c in driver.get_cookies()}


def test_signs_in_with_the_api_key_only(browser: Any, server: LiveServer) -> None:
    from selenium.webdriver.common.by import By

    browser.get(server.url + "/ui/jobs")  # not signed in: sent to the sign-in form
    wait_for(browser, lambda d: "/ui/login?next=" in d.current_url)
    sign_in(browser, server, "not-the-key")
    wait_for(browser, lambda d: d.find_elements(By.ID, "login-error"))
    assert "not valid" in text_of(browser, "#login-error")
    console_errors(browser)  # the refused sign-in answers 401, which the console notes

    sign_in(browser, server, server.token)
    wait_for(browser, lambda d: d.find_elements(By.ID, "count-running"))
    assert text_of(browser, "#role") == "admin"
    cookie = next(c for c in browser.get_cookies() if c["name"] == "phalanx_session")
    assert cookie["httpOnly"] is True
    assert cookie["sameSite"] == "Strict"
    assert browser.execute_script("return document.cookie;") == ""  # no script reads it
    browser.save_screenshot(str(SHOTS / "overview.png"))
    no_console_errors(browser, "overview")


def test_a_job_goes_from_pending_to_running_to_succeeded_without_reloading(
        browser: Any, server: LiveServer, api: httpx.Client) -> None:
    browser.get(server.url + "/ui/jobs")
    wait_for(browser, lambda d: text_of(d, "table.jobs"))
    mark_page(browser)
    # It waits behind a job that holds team-a's whole quota, then runs, then succeeds.
    blocker = python_job("blocker", "team-a", "import time; time.sleep(6)", cpu="500m")
    assert api.post("/v1/jobs", json=blocker).status_code == 201
    job = python_job("watched", "team-a", counting(3, 0.5, wait_first=3), cpu="500m")
    assert api.post("/v1/jobs", json=job).status_code == 201

    seen: list[str] = []

    def status_is(wanted: str) -> Any:
        def check(driver: Any) -> bool:
            status = text_of(driver, "#job-watched .status")
            if status and (not seen or seen[-1] != status):
                seen.append(status)
            return status == wanted
        return check

    wait_for(browser, status_is("Queued"))
    assert "needs 500m cpu" in text_of(browser, "#job-watched .reason")  # with the numbers
    wait_for(browser, status_is("Running"))
    wait_for(browser, status_is("Succeeded"))
    assert same_page(browser), "the page reloaded"
    assert seen.index("Queued") < seen.index("Running") < seen.index("Succeeded")
    browser.save_screenshot(str(SHOTS / "jobs.png"))
    no_console_errors(browser, "jobs")


def test_why_a_job_is_pending_and_a_queue_usage_bar_changing(
        browser: Any, server: LiveServer, api: httpx.Client) -> None:
    from selenium.webdriver.common.by import By

    browser.get(server.url + "/ui/queues")
    used = "#cq-cq-b tr[data-resource='default/cpu'] .used-value"
    wait_for(browser, lambda d: text_of(d, used))
    assert text_of(browser, used) == "0"
    mark_page(browser)
    holder = python_job("holder-b", "team-b", "import time; time.sleep(600)", cpu="400m")
    assert api.post("/v1/jobs", json=holder).status_code == 201
    wait_for(browser, lambda d: text_of(d, used) == "400m")
    bar = browser.find_element(By.CSS_SELECTOR, "#cq-cq-b .bar .used")
    assert bar.size["width"] > 0
    assert same_page(browser)
    browser.save_screenshot(str(SHOTS / "queues.png"))
    no_console_errors(browser, "queues")

    waiting = python_job("waiting-b", "team-b", "print('never')", cpu="400m")
    assert api.post("/v1/jobs", json=waiting).status_code == 201
    browser.get(server.url + "/ui/jobs/waiting-b")
    wait_for(browser, lambda d: any(ch.isdigit() for ch in text_of(d, "#why-pending")))
    why = text_of(browser, "#why-pending")
    assert "needs 400m cpu" in why and "free" in why, why  # asked for, and what is free
    no_console_errors(browser, "job detail (pending)")


def test_a_job_log_follows_can_be_searched_and_downloaded(
        browser: Any, server: LiveServer, api: httpx.Client) -> None:
    from selenium.webdriver.common.by import By

    job = python_job("talker", "team-a", counting(12, 0.5))
    assert api.post("/v1/jobs", json=job).status_code == 201
    browser.get(server.url + "/ui/jobs/talker")
    wait_for(browser, lambda d: "line 0 of the count" in text_of(d, "#log-lines"))
    early = text_of(browser, "#log-lines").count("of the count")
    wait_for(browser, lambda d: "line 11 of the count" in text_of(d, "#log-lines"))
    assert early < 12, "the first lines were shown before the last were written"
    wait_for(browser, lambda d: "ended" in text_of(d, "#log-state"))
    assert text_of(browser, "#log-lines").count("of the count") == 12  # each line once

    browser.find_element(By.ID, "log-search").send_keys("line 7")
    shown = [e.text for e in browser.find_elements(By.CSS_SELECTOR, "#log-lines div")
             if e.is_displayed()]
    assert shown == ["line 7 of the count"]

    href = browser.find_element(By.ID, "log-download").get_attribute("href")
    download = httpx.get(href, cookies=session_cookie(browser), timeout=30)
    assert download.status_code == 200
    assert "attachment" in download.headers["content-disposition"]
    assert download.text.count("of the count") == 12
    browser.save_screenshot(str(SHOTS / "job-log.png"))
    no_console_errors(browser, "job detail (log)")


def test_cancel_needs_the_csrf_token(browser: Any, server: LiveServer,
                                     api: httpx.Client) -> None:
    from selenium.webdriver.common.by import By

    job = python_job("to-cancel", "team-a", "import time; time.sleep(600)")
    assert api.post("/v1/jobs", json=job).status_code == 201
    # A forged request: the session's cookie (a cross-site page could make the browser
    # send it) but not the page's token.
    forged = httpx.post(server.url + "/ui/jobs/to-cancel/cancel", data={"back": "/ui/jobs"},
                        cookies=session_cookie(browser), timeout=30)
    assert forged.status_code == 403
    assert "CSRF" in forged.text
    assert api.get("/v1/jobs/to-cancel").json()["cancelRequested"] is False

    browser.get(server.url + "/ui/jobs/to-cancel")
    click(browser, By.ID, "cancel")
    wait_for(browser, lambda d: text_of(d, "#job-status") == "Cancelled")
    assert api.get("/v1/jobs/to-cancel").json()["status"] == "Cancelled"
    no_console_errors(browser, "jobs (after cancel)")


def test_a_viewer_of_one_team_sees_another_team_job_as_occupancy_only(
        browser: Any, server: LiveServer, api: httpx.Client) -> None:
    from selenium.webdriver.common.by import By

    browser.get(server.url + "/ui/jobs?queue=team-b")
    wait_for(browser, lambda d: d.find_elements(By.ID, "job-holder-b"))
    browser.find_element(By.CSS_SELECTOR, ".view-as summary").click()
    browser.find_element(By.CSS_SELECTOR, ".view-as select[name=role]").send_keys("viewer")
    browser.find_element(By.CSS_SELECTOR, ".view-as input[name=queues]").send_keys("team-a")
    browser.find_element(By.CSS_SELECTOR, ".view-as button").click()
    wait_for(browser, lambda d: text_of(d, "#role") == "viewer")
    table = text_of(browser, "table.jobs")
    assert "holder-b" not in table  # team-b's job: its queue and size, not its name
    assert "hidden-" in table
    assert not browser.find_elements(By.CSS_SELECTOR, "table.jobs button.danger")

    browser.get(server.url + "/ui/jobs/holder-b")
    wait_for(browser, lambda d: text_of(d, "#error"))
    assert "holder-b" in text_of(browser, "#error")  # the name it asked for, nothing more
    console_errors(browser)  # the refusal answers 404, which the console notes
    token = browser.execute_script(
        "return document.querySelector('input[name=csrf]').value;")
    refused = httpx.post(server.url + "/ui/jobs/holder-b/cancel", data={"csrf": token},
                         cookies=session_cookie(browser), timeout=30)
    assert refused.status_code in (403, 404)
    assert api.get("/v1/jobs/holder-b").json()["status"] == "Running"

    sign_in(browser, server, server.token)  # back to the admin
    wait_for(browser, lambda d: text_of(d, "#role") == "admin")


def test_nodes_show_health_and_admins_cordon(browser: Any, server: LiveServer,
                                             api: httpx.Client) -> None:
    from selenium.webdriver.common.by import By

    node = api.get("/v1/nodes").json()["items"][0]["name"]
    browser.get(server.url + "/ui/nodes")
    wait_for(browser, lambda d: d.find_elements(By.CSS_SELECTOR, f"#node-{node} .badge"))
    assert text_of(browser, f"#node-{node} .badge") == "healthy"
    click(browser, By.CSS_SELECTOR, f"#node-{node} form button")
    wait_for(browser, lambda d: d.find_elements(By.CSS_SELECTOR, f"#node-{node} .cordoned"))
    wait_for(browser, lambda _: api.get(f"/v1/nodes/{node}").json()["unschedulable"])
    click(browser, By.CSS_SELECTOR, f"#node-{node} form button")
    wait_for(browser, lambda d: not d.find_elements(By.CSS_SELECTOR, f"#node-{node} .cordoned"))
    browser.save_screenshot(str(SHOTS / "nodes.png"))
    no_console_errors(browser, "nodes")


def test_one_plane_shows_no_plane_column_and_no_clusters_panel(
        browser: Any, server: LiveServer, api: httpx.Client) -> None:
    from selenium.webdriver.common.by import By

    job = python_job("one-plane", "team-a", "import time; time.sleep(600)")
    assert api.post("/v1/jobs", json=job).status_code == 201
    wait_for(browser, lambda _: api.get("/v1/jobs/one-plane").json()["status"] == "Running")
    assert api.get("/v1/jobs/one-plane").json()["plane"] == "local"  # placed, on the one plane
    browser.get(server.url + "/ui/jobs")
    wait_for(browser, lambda d: text_of(d, "#job-one-plane .status") == "Running")
    headers = browser.execute_script(
        "return Array.from(document.querySelectorAll('table.jobs thead th'))"
        ".map(h => h.innerText.trim());")
    assert headers[:5] == ["Name", "Queue", "Team", "Status", "User"]
    assert not browser.find_elements(By.CSS_SELECTOR, "table.jobs .plane")
    for page in ("/ui/", "/ui/nodes"):
        browser.get(server.url + page)
        wait_for(browser, lambda d: d.find_elements(By.ID, "clusters"))
        assert text_of(browser, "#clusters") == "", page
        assert not browser.find_elements(By.CSS_SELECTOR, "#clusters table"), page
    # One plane: the nodes as a plain list, under no cluster heading.
    assert browser.find_elements(By.CSS_SELECTOR, "#nodes > article.node")
    assert not browser.find_elements(By.CSS_SELECTOR, ".plane-nodes")
    browser.get(server.url + "/ui/jobs/one-plane")
    wait_for(browser, lambda d: text_of(d, "#job-status") == "Running")
    assert text_of(browser, "#job-plane") == "local"  # as `phalanx describe` says it
    assert api.post("/v1/jobs/one-plane/cancel").status_code == 200
    no_console_errors(browser, "one plane")


def test_whatif_replays_the_bundled_sample(browser: Any, server: LiveServer) -> None:
    from selenium.webdriver.common.by import By

    browser.get(server.url + "/ui/whatif")
    limit = browser.find_element(By.NAME, "limit")
    limit.clear()
    limit.send_keys("300")
    click(browser, By.ID, "replay")
    wait_for(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#report .gpu-utilisation"),
             timeout=180)
    assert text_of(browser, "#report .gpu-utilisation").endswith("%")
    assert browser.find_elements(By.CSS_SELECTOR, "#report svg.chart polyline")
    no_console_errors(browser, "what-if")


def test_a_screenshot_shows_the_queue_bars() -> None:
    """The queues screenshot (taken above) shows the usage bar's colour, not a blank page."""
    from matplotlib.image import imread

    shot = SHOTS / "queues.png"
    if not shot.exists():
        pytest.skip("the queues test did not run")
    pixels = imread(shot)[:, :, :3]
    used_blue = (pixels[:, :, 0] < 0.15) & (abs(pixels[:, :, 1] - 0x65 / 255) < 0.05) \
        & (abs(pixels[:, :, 2] - 0xC0 / 255) < 0.05)
    assert used_blue.sum() > 20, "no usage bar in the screenshot"
    assert len({tuple(p) for p in pixels[::16, ::16].reshape(-1, 3).tolist()}) > 10
    assert time.time() - shot.stat().st_mtime < 3600
