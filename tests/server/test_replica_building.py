"""A replica that has just taken the lease holds requests while it builds its control
plane, and answers them once it leads, rather than refusing them (503) for the client to
send again after a pause."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from phalanx.server.replicas import Elector, ReplicaApp
from phalanx.store import Store
from phalanx.store.leases import Fence

BUILD_SECONDS = 1.0


def _leader_app() -> Starlette:
    async def submit(request: Request) -> JSONResponse:
        return JSONResponse({"stored": (await request.json())["name"]}, status_code=201)
    return Starlette(routes=[Route("/v1/jobs", submit, methods=["POST"])])


@pytest.mark.anyio
async def test_a_request_to_a_replica_building_its_control_plane_waits_for_it(
        tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 'state.db'}")
    led = threading.Event()
    front: ReplicaApp | None = None

    def lead(fence: Fence) -> None:  # as server/main.py: build (slowly), then lead
        time.sleep(BUILD_SECONDS)
        assert front is not None
        front.lead(_leader_app())
        led.set()

    elector = Elector(store, "http://127.0.0.1:1", 6.0, on_lead=lead,
                      on_lost=lambda reason: None)
    front = ReplicaApp(elector)
    elector.start()
    try:
        deadline = time.monotonic() + 30
        while elector.fence is None:  # it took the lease; the control plane is building
            assert time.monotonic() < deadline, "the replica never took the lease"
            time.sleep(0.01)
        assert not led.is_set()
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=front),
                                     base_url="http://replica") as client:
            ready = await client.get("/readyz")
            assert ready.status_code == 503  # not ready until built: readiness is not held
            answer = await client.post("/v1/jobs", json={"name": "held"})
        assert led.is_set()
        assert (answer.status_code, answer.json()) == (201, {"stored": "held"})
    finally:
        elector.stop()
        store.close()


@pytest.mark.anyio
async def test_a_follower_does_not_hold_requests(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 'state.db'}")
    elector = Elector(store, "http://127.0.0.1:1", 6.0, on_lead=lambda fence: None,
                      on_lost=lambda reason: None)  # never started: it follows
    front = ReplicaApp(elector)
    try:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=front),
                                     base_url="http://replica") as client:
            answer = await client.post("/v1/jobs", json={"name": "x"})
        assert answer.status_code == 503 and answer.json()["error"]["type"] == "NotLeader"
    finally:
        store.close()
