"""The ``/v1`` routers: every route declares the access it needs, and the app checks the
routes as the routers hold them (FastAPI may keep an included router as one entry)."""

from __future__ import annotations

import pytest
from fastapi import APIRouter

from phalanx.errors import InternalError
from phalanx.server.access import Access, check_every_route, needs, route_access
from phalanx.server.openapi import document


def test_a_v1_route_that_declares_no_access_is_refused() -> None:
    router = APIRouter()

    @router.get("/v1/checked", dependencies=needs(Access.READ))
    def checked() -> None: ...

    @router.get("/v1/unchecked")
    def unchecked() -> None: ...

    with pytest.raises(InternalError, match="/v1/unchecked declares no access"):
        check_every_route(router.routes)
    check_every_route(router.routes[:1])
    assert route_access(router.routes[0]) is Access.READ  # type: ignore[arg-type]


def test_every_router_is_served() -> None:
    paths = document()["paths"]
    for path in ("/healthz", "/v1/status", "/v1/jobs/{name}/logs", "/v1/nodes/{name}:drain",
                 "/v1/pools", "/v1/config/apply", "/v1/planes/{name}/exec", "/v1/audit"):
        assert path in paths, path
