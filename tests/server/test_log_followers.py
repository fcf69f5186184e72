"""Following and reading logs over real HTTP: followers hold no server thread, are bounded
per job and per client, end when their client goes or their job ends; big logs stream from
disk; ``tail`` and ``since`` pick the lines.

Clients connect from several loopback addresses (127.0.0.2, 127.0.0.3, ...), which the
server counts as different clients, so the per-client bound does not hide the rest.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest

from phalanx.spec.api import ErrorResponse
from tests.sdk.live_server import LiveServer
from tests.server.conftest import NODES

pytestmark = pytest.mark.slow

# Defaults of the server, which these tests rely on.
PER_JOB, PER_CLIENT = 32, 16
# How long the 200 followers and the submits keep going (a benchmark runs it longer).
LOAD_SECONDS = float(os.environ.get("PHALANX_TEST_FOLLOWERS_SECONDS", "20"))
PROBE_TIMEOUT = 10.0


def forever(name: str, **pod_set: Any) -> dict[str, Any]:
    """A simulated job whose pod runs until it is cancelled."""
    return {"name": name, "podSets": [{"name": "w", "resources": {"cpu": "10m"}, **pod_set}]}


def short(name: str) -> dict[str, Any]:
    return {"name": name, "podSets": [{"name": "w", "resources": {"cpu": "10m"},
                                       "env": {"PHALANX_SIM_DURATION": "50ms"}}]}



def submit(api: httpx.Client, body: dict[str, Any]) -> None:
    response = api.post("/v1/jobs", json=body)
    assert response.status_code == 201, response.text


def wait_status(api: httpx.Client, name: str, *statuses: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if api.get(f"/v1/jobs/{name}").json()["status"] in statuses:
            return
        time.sleep(0.05)
    raise AssertionError(f"{name} never became {statuses}")


def loopback(i: int) -> str:
    """The i-th client address (127.0.0.2 upwards)."""
    return f"127.0.0.{2 + i}"


def async_client(server: LiveServer, address: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        base_url=server.url, headers={"Authorization": f"Bearer {server.token}"},
        transport=httpx.AsyncHTTPTransport(local_address=address),
        timeout=httpx.Timeout(PROBE_TIMEOUT, read=None),
    )


class Followers:
    """Open followed log streams, each from a chosen client address, held until closed."""

    def __init__(self, server: LiveServer) -> None:
        self.server = server
        self.clients: dict[str, httpx.AsyncClient] = {}
        self.responses: list[httpx.Response] = []

    def client(self, address: str) -> httpx.AsyncClient:
        if address not in self.clients:
            self.clients[address] = async_client(self.server, address)
        return self.clients[address]

    async def open(self, job: str, address: str) -> httpx.Response:
        request = self.client(address).build_request(
            "GET", f"/v1/jobs/{job}/logs", params={"follow": "true"})
        response = await self.client(address).send(request, stream=True)
        if response.status_code == 200:
            self.responses.append(response)
        else:
            await response.aread()
            await response.aclose()
        return response

    async def close(self) -> None:
        for response in self.responses:
            await response.aclose()
        self.responses.clear()
        for client in self.clients.values():
            await client.aclose()
        self.clients.clear()


async def probe(client: httpx.AsyncClient) -> int:
    response = await client.get("/healthz", timeout=PROBE_TIMEOUT)
    return response.status_code


def assert_too_many(response: httpx.Response, field: str) -> None:
    assert response.status_code == 429, f"answered {response.status_code}, not 429"
    body = ErrorResponse.model_validate(response.json()).error
    assert body.type == "TooManyRequests"
    assert body.field == field
    assert body.fix


# --------------------------------------------------------------------------- threads
def test_sixty_followers_of_a_waiting_job_leave_the_api_answering(
    sim_server: LiveServer, api: httpx.Client
) -> None:
    submit(api, forever("hog", resources={"cpu": "10m", "nvidia.com/gpu": 4}))
    waiting = ["waits-0", "waits-1"]
    for name in waiting:
        submit(api, forever(name, resources={"cpu": "10m", "nvidia.com/gpu": 4}))
    wait_status(api, "hog", "Running")
    assert {api.get(f"/v1/jobs/{n}").json()["status"] for n in waiting} == {"Queued"}

    async def scenario() -> tuple[list[int], int, int]:
        followers = Followers(sim_server)
        try:
            # 60 followers (more than the server has threads), 30 of each job, 15 from each
            # of 4 clients: within both bounds.
            opening = [asyncio.create_task(followers.open(waiting[i % 2], loopback(i % 4)))
                       for i in range(60)]
            await asyncio.sleep(1.0)  # let them all reach the server
            async with async_client(sim_server, "127.0.0.1") as other:
                health = await probe(other)
                listed = (await other.get("/v1/jobs", timeout=PROBE_TIMEOUT)).status_code
            statuses = [r.status_code for r in await asyncio.wait_for(
                asyncio.gather(*opening), PROBE_TIMEOUT)]
            return statuses, health, listed
        finally:
            for task in asyncio.all_tasks() - {asyncio.current_task()}:
                task.cancel()
            await followers.close()

    try:
        statuses, health, listed = asyncio.run(scenario())
    finally:
        for name in ["hog", *waiting]:
            api.post(f"/v1/jobs/{name}/cancel")
    assert health == 200 and listed == 200
    assert statuses == [200] * 60


# --------------------------------------------------------------------------- bounds
def test_followers_beyond_the_bounds_are_refused_and_closing_frees_them(
    sim_server: LiveServer, api: httpx.Client
) -> None:
    submit(api, forever("watched"))
    submit(api, forever("other"))
    wait_status(api, "watched", "Running")

    async def scenario() -> None:
        followers = Followers(sim_server)
        try:
            # One client: PER_CLIENT followers across two jobs, then one more is refused.
            first = loopback(10)
            for i in range(PER_CLIENT):
                job = "watched" if i < PER_CLIENT // 2 else "other"
                assert (await followers.open(job, first)).status_code == 200
            assert_too_many(await followers.open("other", first), "follow")
            # Other clients fill the job's bound; one more follower of it is refused.
            i = 0
            while len([r for r in followers.responses if "watched" in str(r.url)]) < PER_JOB:
                address = loopback(11 + i // PER_CLIENT)
                assert (await followers.open("watched", address)).status_code == 200
                i += 1
            assert_too_many(await followers.open("watched", loopback(20)), "follow")
            # A plain read is never bounded.
            plain = await followers.client(loopback(20)).get("/v1/jobs/watched/logs")
            assert plain.status_code == 200
            # Clients that go away free their places: the server notices while the job is
            # silent, so a full set of new followers is admitted again.
            await followers.close()
            deadline = time.monotonic() + 30
            admitted = 0
            while admitted < PER_JOB and time.monotonic() < deadline:
                response = await followers.open("watched", loopback(21 + admitted // PER_CLIENT))
                if response.status_code == 200:
                    admitted += 1
                else:
                    assert_too_many(response, "follow")
                    await asyncio.sleep(0.2)
            assert admitted == PER_JOB
            # A followed stream ends when its job does.
            stream = followers.responses[0]
            api.post("/v1/jobs/watched/cancel")
            text = await asyncio.wait_for(stream.aread(), 30)
            assert b"terminated after" in text
        finally:
            await followers.close()

    try:
        asyncio.run(scenario())
    finally:
        api.post("/v1/jobs/watched/cancel")
        api.post("/v1/jobs/other/cancel")


def test_followers_from_many_addresses_are_bounded_in_all(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each loopback address is a client of its own: the server-wide bound still holds."""
    monkeypatch.setenv("PHALANX_LOG_FOLLOWERS", "3")
    with LiveServer.simulated(tmp_path, NODES) as server, server.client() as client:
        submit(client, forever("watched"))
        wait_status(client, "watched", "Running")

        async def scenario() -> httpx.Response:
            followers = Followers(server)
            try:
                for i in range(3):
                    assert (await followers.open("watched", loopback(30 + i))).status_code == 200
                return await followers.open("watched", loopback(40))
            finally:
                await followers.close()

        refused = asyncio.run(scenario())
        client.post("/v1/jobs/watched/cancel")
    assert_too_many(refused, "follow")
    assert "PHALANX_LOG_FOLLOWERS" in refused.json()["error"]["fix"]


# --------------------------------------------------------------------------- load
def test_two_hundred_followers_and_submits_leave_healthz_answering(
    sim_server: LiveServer, api: httpx.Client
) -> None:
    """200 followers (10 jobs, 20 clients) and a stream of submits, for LOAD_SECONDS."""
    jobs = [f"load-{i}" for i in range(10)]
    for name in jobs:
        submit(api, forever(name))

    async def scenario() -> tuple[list[int], int, int]:
        followers = Followers(sim_server)
        stop = asyncio.Event()
        submitted = 0

        async def submitter() -> None:
            nonlocal submitted
            async with async_client(sim_server, "127.0.0.1") as client:
                while not stop.is_set():
                    response = await client.post("/v1/jobs", json=short(f"load-s-{submitted}"))
                    assert response.status_code == 201, response.text
                    submitted += 1
                    await asyncio.sleep(0.05)

        try:
            opened = await asyncio.gather(*(
                followers.open(jobs[i % 10], loopback(i // 10)) for i in range(200)))
            statuses = [r.status_code for r in opened]
            feeder = asyncio.create_task(submitter())
            probes: list[int] = []
            async with async_client(sim_server, "127.0.0.1") as prober:
                deadline = time.monotonic() + LOAD_SECONDS
                while time.monotonic() < deadline:
                    probes.append(await probe(prober))
                    await asyncio.sleep(0.1)
            stop.set()
            await feeder
            return statuses, len([p for p in probes if p == 200]), len(probes)
        finally:
            await followers.close()

    try:
        statuses, healthy, probes = asyncio.run(scenario())
    finally:
        for name in jobs:
            api.post(f"/v1/jobs/{name}/cancel")
    assert statuses == [200] * 200
    assert probes >= 10 and healthy == probes


# --------------------------------------------------------------------------- big logs
def _rss_peak_reset(pid: int) -> bool:
    """Reset the process's peak resident size (Linux), so VmHWM measures from now on."""
    try:
        Path(f"/proc/{pid}/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def _rss_peak(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_large_log_is_streamed_without_holding_it_in_memory(
    sim_server: LiveServer, api: httpx.Client
) -> None:
    submit(api, short("big"))
    wait_status(api, "big", "Succeeded")
    log = sim_server.home / "logs" / "big" / "big-w-0.log"
    line = b"%08d " + b"x" * 70 + b"\n"  # 80 bytes
    block = b"".join(line % i for i in range(8192))
    with open(log, "wb") as out:
        for _ in range(80):  # 80 x 640 KiB = 50 MiB
            out.write(block)
    size = log.stat().st_size
    pid = json.loads((sim_server.home / "server.json").read_text())["pid"]
    server = psutil.Process(pid)
    if not _rss_peak_reset(pid):
        pytest.skip("cannot reset the peak resident size here")
    before = server.memory_info().rss

    received = 0
    lines = 0
    with api.stream("GET", "/v1/jobs/big/logs") as response:
        assert response.status_code == 200
        for chunk in response.iter_bytes():
            received += len(chunk)
            lines += chunk.count(b"\n")
    growth = _rss_peak(pid) - before
    print(f"peak resident growth {growth / 2**20:.1f} MiB for a {size / 2**20:.0f} MiB log")
    assert received == size and lines == size // 80
    assert growth < 0.2 * size, f"resident size grew by {growth / size:.0%} of the log"


# --------------------------------------------------------------------------- tail, since
def test_tail_gives_the_last_lines_of_each_pod(sim_server: LiveServer, api: httpx.Client) -> None:
    submit(api, {**short("tails"), "podSets": [{**short("tails")["podSets"][0], "replicas": 2}]})
    wait_status(api, "tails", "Succeeded")
    for rank in range(2):
        path = sim_server.home / "logs" / "tails" / f"tails-w-{rank}.log"
        # Long enough that the last lines are found by reading backwards, not from the start.
        path.write_bytes(b"".join(b"pod %d line %d\n" % (rank, i) for i in range(100_000)))
    one = api.get("/v1/jobs/tails/logs", params={"pod": "1", "tail": "3"})
    assert one.status_code == 200
    assert one.text.splitlines() == [f"pod 1 line {i}" for i in (99_997, 99_998, 99_999)]
    both = api.get("/v1/jobs/tails/logs", params={"tail": "2"}).text.splitlines()
    assert both == ["[tails-w-0] pod 0 line 99998", "[tails-w-0] pod 0 line 99999",
                    "[tails-w-1] pod 1 line 99998", "[tails-w-1] pod 1 line 99999"]
    assert api.get("/v1/jobs/tails/logs", params={"tail": "0"}).text == ""
    bad = api.get("/v1/jobs/tails/logs", params={"tail": "-1"})
    assert bad.status_code == 400
    assert ErrorResponse.model_validate(bad.json()).error.field == "tail"


def test_since_leaves_out_lines_written_before(sim_server: LiveServer, api: httpx.Client) -> None:
    submit(api, forever("sinced"))
    wait_status(api, "sinced", "Running")
    time.sleep(3.0)  # the "started" line is now 3 s old
    api.post("/v1/jobs/sinced/cancel")
    wait_status(api, "sinced", "Cancelled", "Failed")
    everything = api.get("/v1/jobs/sinced/logs", params={"since": "1h"}).text
    assert "started on node" in everything and "terminated after" in everything
    recent = api.get("/v1/jobs/sinced/logs", params={"since": "1s"}).text
    assert "terminated after" in recent and "started on node" not in recent
    stamp = datetime.fromtimestamp(time.time() - 1.0, tz=UTC).isoformat()
    assert api.get("/v1/jobs/sinced/logs", params={"since": stamp}).text == recent
    bad = api.get("/v1/jobs/sinced/logs", params={"since": "yesterday"})
    assert bad.status_code == 400
    body = ErrorResponse.model_validate(bad.json()).error
    assert body.field == "since" and body.fix and "10m" in body.fix


def test_reading_while_the_log_grows_never_tears_a_line(
    sim_server: LiveServer, api: httpx.Client
) -> None:
    submit(api, short("growing"))
    wait_status(api, "growing", "Succeeded")
    path = sim_server.home / "logs" / "growing" / "growing-w-0.log"
    path.write_bytes(b"")
    done = threading.Event()

    def writer() -> None:
        with open(path, "ab", buffering=0) as out:
            i = 0
            while not done.is_set():
                out.write(b"line %d " % i)  # each line in two writes
                out.write(b"end\n")
                i += 1

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        time.sleep(0.3)
        text = api.get("/v1/jobs/growing/logs").text
    finally:
        done.set()
        thread.join()
    lines = text.splitlines()
    assert lines and all(line.endswith(" end") for line in lines[:-1])
