"""The dashboard over real HTTP (no browser) against ``phalanx up`` on the simulated plane:
who may see and do what, bad input answered with the field and the fix, pages of jobs,
resubmits and what-if bounds."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any
from xml.etree import ElementTree

import httpx
import pytest

from tests.sdk.live_server import LiveServer

pytestmark = pytest.mark.slow

NODES = """\
nodes:
  - name: sim-a
    allocatable: {cpu: 8, memory: 24684084Ki, nvidia.com/gpu: 4}  # as /proc/meminfo says
"""
QUEUES = [
    {"kind": "ResourceFlavor", "name": "default"},
    *({"kind": "ClusterQueue", "name": f"cq-{t}", "resourceGroups": [{
        "coveredResources": ["cpu"], "flavors": [{"name": "default", "resources": [
            {"name": "cpu", "nominalQuota": 4}]}]}]} for t in ("a", "b")),
    {"kind": "LocalQueue", "name": "team-a", "clusterQueue": "cq-a"},
    {"kind": "LocalQueue", "name": "team-b", "clusterQueue": "cq-b"},
]


def job(name: str, queue: str = "team-a", **env: str) -> dict[str, Any]:
    return {"name": name, "queue": queue, "labels": {"team": queue},
            "podSets": [{"resources": {"cpu": "100m"}, "env": env}]}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with LiveServer.simulated(tmp_path_factory.mktemp("phalanx-ui-http"), NODES) as live:
        with live.client() as api:
            assert api.post("/v1/config/apply", json={"documents": QUEUES}).status_code == 200
        yield live


@pytest.fixture(scope="module")
def api(server: LiveServer) -> Iterator[httpx.Client]:
    with server.client() as client:
        yield client


@pytest.fixture()
def ui(server: LiveServer) -> Iterator[httpx.Client]:
    """A signed-in admin's browser, as far as HTTP goes."""
    with httpx.Client(base_url=server.url, timeout=30) as client:
        assert client.post("/ui/login", data={"key": server.token}).status_code == 303
        yield client


def csrf(ui: httpx.Client) -> str:
    match = re.search(r'name="csrf" value="([^"]+)"', ui.get("/ui/").text)
    assert match is not None
    return match.group(1)


def test_nothing_without_a_session(server: LiveServer) -> None:
    with httpx.Client(base_url=server.url, timeout=30) as anonymous:
        page = anonymous.get("/ui/jobs?queue=team-a")
        assert page.status_code == 303
        assert page.headers["location"] == "/ui/login?next=%2Fui%2Fjobs%3Fqueue%3Dteam-a"
        assert anonymous.get("/ui/live/jobs").status_code == 401
        assert anonymous.post("/ui/jobs/x/cancel", data={"csrf": "x"}).status_code == 401
        assert anonymous.get("/ui/jobs/x/log.txt").status_code == 303
        assert anonymous.get("/ui/static/htmx.min.js").status_code == 200  # assets are public


def test_sign_in_goes_back_only_to_the_dashboard(server: LiveServer) -> None:
    with httpx.Client(base_url=server.url, timeout=30) as client:
        for target, landing in [("/ui/nodes", "/ui/nodes"), ("https://evil.example/ui", "/ui/"),
                                ("//evil.example/ui", "/ui/"), ("/v1/jobs", "/ui/")]:
            answer = client.post("/ui/login", data={"key": server.token, "next": target})
            assert answer.headers["location"] == landing, target


def test_posts_from_another_site_are_refused(server: LiveServer, ui: httpx.Client) -> None:
    cross = {"Sec-Fetch-Site": "cross-site"}
    with httpx.Client(base_url=server.url, timeout=30) as client:
        login = client.post("/ui/login", data={"key": server.token}, headers=cross)
        assert login.status_code == 403 and "phalanx_session" not in login.headers.get(
            "set-cookie", "")
    token = csrf(ui)
    assert ui.post("/ui/nodes/sim-a:cordon", data={"csrf": token},
                   headers=cross).status_code == 403
    assert ui.post("/ui/nodes/sim-a:uncordon", data={"csrf": token},
                   headers={"Sec-Fetch-Site": "same-origin"}).status_code == 303


def test_pages_carry_security_headers(ui: httpx.Client) -> None:
    page = ui.get("/ui/")
    assert page.status_code == 200
    assert "script-src 'self'" in page.headers["content-security-policy"]
    assert "frame-ancestors 'none'" in page.headers["content-security-policy"]
    assert page.headers["x-content-type-options"] == "nosniff"
    assert "<script>" not in page.text  # no inline script: the policy would refuse it


def test_a_bad_filter_names_the_field_and_the_fix(ui: httpx.Client) -> None:
    page = ui.get("/ui/jobs", params={"status": "Sleeping"})
    assert page.status_code == 400
    assert "&#39;Sleeping&#39; is not a job status" in page.text and "(status)" in page.text
    assert "Queued" in page.text  # the fix lists the statuses
    assert ui.get("/ui/jobs", params={"limit": "0"}).status_code == 400


def test_pages_of_jobs_filter_and_follow_on(ui: httpx.Client, api: httpx.Client) -> None:
    for i in range(7):
        assert api.post("/v1/jobs", json=job(f"page-{i}", "team-b")).status_code == 201
    first = ui.get("/ui/jobs", params={"queue": "team-b", "limit": "3"}).text
    assert re.findall(r'<tr id="job-([^"]+)"', first) == ["page-6", "page-5", "page-4"]
    after = re.search(r'href="/ui/jobs\?([^"]+)" rel="next"', first)
    assert after is not None
    second = ui.get("/ui/jobs?" + after.group(1).replace("&amp;", "&")).text
    assert re.findall(r'<tr id="job-([^"]+)"', second) == ["page-3", "page-2", "page-1"]
    by_team = ui.get("/ui/jobs", params={"team": "team-b", "kind": "generic"}).text
    assert set(re.findall(r'<tr id="job-([^"]+)"', by_team)) >= {f"page-{i}" for i in range(7)}
    assert "page-" not in ui.get("/ui/jobs", params={"kind": "mpi"}).text


def test_the_live_stream_sends_the_page_fragment(ui: httpx.Client, api: httpx.Client) -> None:
    assert api.post("/v1/jobs", json=job("streamed")).status_code == 201
    with ui.stream("GET", "/ui/live/jobs", params={"queue": "team-a"}) as stream:
        assert stream.headers["content-type"].startswith("text/event-stream")
        lines = []
        for line in stream.iter_lines():
            lines.append(line)
            if line == "" and any(x.startswith("event: jobs") for x in lines):
                break
    assert any('id="job-streamed"' in x for x in lines)


def test_secrets_are_redacted_on_the_job_page(ui: httpx.Client, api: httpx.Client) -> None:
    assert api.post("/v1/jobs", json=job("secretive", HF_TOKEN="hf_s3cr3t")).status_code == 201
    page = ui.get("/ui/jobs/secretive").text
    assert "HF_TOKEN: &lt;redacted&gt;" in page
    assert "hf_s3cr3t" not in page


def test_quantities_read_as_people_write_them(ui: httpx.Client, api: httpx.Client) -> None:
    memory_queue = {"kind": "ClusterQueue", "name": "cq-memory", "resourceGroups": [{
        "coveredResources": ["cpu", "memory"], "flavors": [{"name": "default", "resources": [
            {"name": "cpu", "nominalQuota": "2500m"},
            {"name": "memory", "nominalQuota": "4294967296"}]}]}]}
    local_queue = {"kind": "LocalQueue", "name": "team-memory", "clusterQueue": "cq-memory"}
    assert api.post("/v1/config/apply",
                    json={"documents": [memory_queue, local_queue]}).status_code == 200
    queues = ui.get("/ui/queues").text
    assert "<td>4Gi</td>" in queues and "<td>2500m</td>" in queues
    assert "4294967296" not in queues
    nodes = ui.get("/ui/nodes").text
    assert "<td>23.5Gi</td>" in nodes and "<td>4</td>" in nodes  # memory; GPUs counted
    assert "24684084" not in nodes and "25276502016" not in nodes
    spec = job("sized", "team-memory")
    spec["podSets"][0]["resources"] = {"cpu": "500m", "memory": "256Mi"}
    assert api.post("/v1/jobs", json=spec).status_code == 201
    page = ui.get("/ui/jobs/sized").text
    assert "cpu=500m memory=256Mi" in page and "268435456000" not in page


def test_resubmit_takes_the_next_free_name(ui: httpx.Client, api: httpx.Client) -> None:
    spec = job("again")
    spec["podSets"][0]["env"] = {"PHALANX_SIM_DURATION": "0.1s"}
    assert api.post("/v1/jobs", json=spec).status_code == 201
    api.post("/v1/jobs/again/cancel")
    token = csrf(ui)
    assert ui.post("/ui/jobs/again/resubmit", data={}).status_code == 403
    first = ui.post("/ui/jobs/again/resubmit", data={"csrf": token})
    assert first.headers["location"] == "/ui/jobs/again-2"
    second = ui.post("/ui/jobs/again/resubmit", data={"csrf": token})
    assert second.headers["location"] == "/ui/jobs/again-3"
    assert api.get("/v1/jobs/again-3").json()["spec"]["queue"] == "team-a"


def test_previewed_roles_are_held_to_what_they_may_do(ui: httpx.Client,
                                                      api: httpx.Client) -> None:
    for name, queue in (("mine-a", "team-a"), ("theirs-b", "team-b")):
        assert api.post("/v1/jobs", json=job(name, queue)).status_code == 201
    token = csrf(ui)
    assert ui.post("/ui/view-as", data={"csrf": token, "role": "member",
                                        "queues": "team-a"}).status_code == 303
    token = csrf(ui)
    assert ui.post("/ui/nodes/sim-a:cordon", data={"csrf": token}).status_code == 403
    assert ui.post("/ui/jobs/theirs-b/cancel", data={"csrf": token}).status_code == 404
    assert ui.get("/ui/jobs/theirs-b").status_code == 404
    assert ui.get("/ui/jobs/theirs-b/log.txt").status_code == 404
    listing = ui.get("/ui/jobs").text
    assert "theirs-b" not in listing and "hidden-" in listing
    assert ui.post("/ui/jobs/mine-a/cancel", data={"csrf": token}).status_code == 303
    assert api.get("/v1/jobs/theirs-b").json()["cancelRequested"] is False
    assert ui.post("/ui/view-as", data={"csrf": token, "role": "admin"}).status_code == 403


def test_whatif_bounds_and_errors(ui: httpx.Client) -> None:
    token = csrf(ui)
    sample_form = ui.get("/ui/whatif").text
    queues = re.search(r'name="queues" rows="10">([^<]*)<', sample_form)
    nodes = re.search(r'name="nodes" rows="6">([^<]*)<', sample_form)
    assert queues is not None and nodes is not None
    base = {"csrf": token, "queues": queues.group(1).replace("&#39;", "'"),
            "nodes": nodes.group(1), "policy-config": "on"}
    no_file = {"trace": ("", b"", "text/csv")}
    too_many = ui.post("/ui/whatif", data={**base, "limit": "1000000"}, files=no_file)
    assert too_many.status_code == 400 and "(limit)" in too_many.text
    broken = ui.post("/ui/whatif", data={**base, "limit": "10", "queues": "kind: [unclosed"},
                     files=no_file)
    assert broken.status_code == 400 and "YAML" in broken.text
    trace = b"submit,duration,gpus,team\n0,3600,8,6214e9\n60,600,1,6214e9\n"
    custom = ui.post("/ui/whatif", data={**base, "limit": "10"},
                     files={"trace": ("mine.csv", trace, "text/csv")})
    assert custom.status_code == 200, custom.text[-2000:]
    assert "<dd>2 (2 completed, 0 rejected)</dd>" in custom.text
    no_csrf = ui.post("/ui/whatif", data={**base, "csrf": ""}, files=no_file)
    assert no_csrf.status_code == 403


def test_whatif_compares_the_policies_side_by_side_on_titled_labelled_charts(
        ui: httpx.Client) -> None:
    """Each chart has a title, both axes named with their units and one line per policy
    (with a legend); the policies' figures stand in columns of one grid, not one under
    another."""
    token = csrf(ui)
    form = ui.get("/ui/whatif").text
    queues = re.search(r'name="queues" rows="10">([^<]*)<', form)
    nodes = re.search(r'name="nodes" rows="6">([^<]*)<', form)
    assert queues is not None and nodes is not None
    trace = b"submit,duration,gpus,team\n0,3600,8,6214e9\n60,600,1,6214e9\n120,900,2,6214e9\n"
    page = ui.post("/ui/whatif", data={
        "csrf": token, "queues": queues.group(1).replace("&#39;", "'"),
        "nodes": nodes.group(1), "limit": "10", "policy-phalanx": "on", "policy-fifo": "on"},
        files={"trace": ("mine.csv", trace, "text/csv")})
    assert page.status_code == 200, page.text[-2000:]
    svgs = [ElementTree.fromstring(m) for m in re.findall(r"<svg .*?</svg>", page.text, re.S)]
    assert len(svgs) == 2
    ns = ""  # inline SVG in HTML: no namespace
    titles, y_axes = [], []
    for svg in svgs:
        def texts(css: str, svg: ElementTree.Element = svg) -> list[str]:
            return [t.text or "" for t in svg.iter(f"{ns}text") if t.get("class") == css]
        (title,) = texts("chart-title")
        (y_axis,) = texts("y-axis")
        (x_axis,) = texts("x-axis")
        titles.append(title)
        y_axes.append(y_axis)
        assert x_axis == "simulated time since the first job (h)"
        lines = [p.get("data-series") for p in svg.iter(f"{ns}polyline")]
        assert lines == ["phalanx", "fifo"], lines
        colours = {p.get("style") for p in svg.iter(f"{ns}polyline")}
        assert len(colours) == 2  # told apart
        legend = [t.text for g in svg.iter(f"{ns}g") if g.get("class") == "legend-entry"
                  for t in g.iter(f"{ns}text")]
        assert legend == ["phalanx", "fifo"]
    assert titles == ["GPU utilisation by policy", "Jobs pending by policy"]
    assert y_axes == ["GPUs busy (%)", "jobs pending (jobs)"]
    grid = re.search(r'<div class="policies" style="display:grid;'
                     r'grid-template-columns:repeat\((\d+),', page.text)
    assert grid is not None and grid.group(1) == "2"
    columns = page.text[grid.start():]
    assert [m for m in re.findall(r"<h3>Policy (\w+)</h3>", columns)] == ["phalanx", "fifo"]
    assert columns.count("<dd>3 (3 completed, 0 rejected)</dd>") == 2


def test_phalanx_ui_names_the_dashboard_and_the_key(server: LiveServer) -> None:
    shown = subprocess.run([sys.executable, "-m", "phalanx.cli.main", "ui", "--no-open"],
                           env=server.env, capture_output=True, text=True, timeout=60)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.strip() == server.url + "/ui/"
    assert str(server.home / "token") in shown.stderr
    assert server.token not in shown.stdout + shown.stderr


def test_restarts_show_their_causes(ui: httpx.Client, api: httpx.Client) -> None:
    spec = job("flaky", PHALANX_SIM_DURATION="0.1s", PHALANX_SIM_EXIT_CODE="3")
    spec["restart"] = {"maxRestarts": 1, "backoff": "0s"}
    assert api.post("/v1/jobs", json=spec).status_code == 201
    deadline = time.monotonic() + 30
    while api.get("/v1/jobs/flaky").json()["status"] != "Failed":
        assert time.monotonic() < deadline, "the job did not fail twice"
        time.sleep(0.2)
    page = ui.get("/ui/jobs/flaky").text
    causes = page.split('id="restart-causes"')[1].split("</ol>")[0]
    assert "Requeued" in causes and "exit" in causes.lower()
    assert "1 after errors" in page


def test_a_members_own_key_opens_their_view_until_it_is_revoked(
    server: LiveServer, api: httpx.Client,
) -> None:
    from phalanx.sdk import Client

    with Client(server.url, server.token) as admin:
        admin.put_team("ui-team-a", ["team-a"])
        admin.put_user("uma", "member", ["ui-team-a"])
        created = admin.create_key("uma", description="dashboard")
        for name, queue in (("uma-sees", "team-a"), ("uma-hidden", "team-b")):
            assert api.post("/v1/jobs", json=job(name, queue)).status_code == 201
        with httpx.Client(base_url=server.url, timeout=30) as browser:
            assert browser.post("/ui/login", data={"key": "phx_wrong"}).status_code == 401
            assert browser.post("/ui/login", data={"key": created.key}).status_code == 303
            listing = browser.get("/ui/jobs").text
            assert "uma-sees" in listing
            assert "uma-hidden" not in listing and "hidden-" in listing
            assert browser.get("/ui/jobs/uma-hidden").status_code == 404
            token = csrf(browser)
            assert browser.post("/ui/nodes/sim-a:cordon", data={"csrf": token}).status_code == 403
            admin.revoke_key(created.id)
            after = browser.get("/ui/jobs", follow_redirects=False)
            assert after.status_code == 303 and "/ui/login" in after.headers["location"]
