"""``/healthz``, ``/metrics`` (both open), the version and the server's status."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from phalanx.control.planes import plane_views
from phalanx.errors import Unavailable
from phalanx.server.access import Access, needs
from phalanx.server.routes.context import V1, ApiContext, error_response, errors
from phalanx.spec.api import Health, ServerStatus, VersionInfo
from phalanx.version import __version__


def router(ctx: ApiContext) -> APIRouter:
    r = APIRouter()
    controller, service, disk, planes = ctx.controller, ctx.service, ctx.disk, ctx.planes

    @r.get("/healthz", response_model=Health, responses=errors(503))
    def healthz() -> Health | JSONResponse:
        """Answers 200 while the control loop completes steps and the state directory has
        room; 503 once the loop stops or is stuck, or the directory is full."""
        healthy, message = controller.health()
        if not healthy:
            raise Unavailable(message, fix="see the control plane's log (server.log)")
        if disk is not None and (full := disk.problem()) is not None:
            # Answered, not raised: the refused writes were logged already.
            return error_response(Unavailable(
                full.message, fix=f"free space on the disk of {disk.home} "
                                  "(delete finished jobs and their logs: phalanx delete)"))
        return Health(message=message)

    @r.get("/metrics", response_class=PlainTextResponse, responses=errors())
    def metrics() -> Response:
        """Prometheus metrics, in its text format."""
        service.refresh_metrics()
        return Response(generate_latest(controller.metrics.registry),
                        media_type=CONTENT_TYPE_LATEST)

    @r.get("/v1/version", dependencies=needs(Access.READ), responses=V1)
    def version() -> VersionInfo:
        return VersionInfo(version=__version__)

    @r.get("/v1/status", dependencies=needs(Access.READ), responses=V1)
    def status() -> ServerStatus:
        shown = plane_views(planes, service) if planes is not None else []
        return ServerStatus.model_validate(
            {"version": __version__, "db": ctx.db_label, **controller.status()}
        ).model_copy(update={"planes": shown})

    return r
