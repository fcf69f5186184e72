"""The versioned JSON HTTP API (``/v1``) over one Controller."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

from fastapi import Body, FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from phalanx.control import Controller
from phalanx.errors import AuthError, NotFound, PhalanxError, SpecError
from phalanx.server.auth import token_matches
from phalanx.server.logstream import LogFollower
from phalanx.spec.base import validate
from phalanx.spec.config import parse_config_documents
from phalanx.spec.quantity import format_quantity
from phalanx.spec.resources import JobSpec
from phalanx.spec.status import JobDetail, JobStatus, PodInfo
from phalanx.store import LogStore
from phalanx.version import __version__

OPEN_PATHS = ("/healthz", "/metrics", "/openapi.json", "/docs", "/redoc")


def _error(exc: PhalanxError) -> JSONResponse:
    return JSONResponse({"error": exc.to_dict()}, status_code=exc.status_code)


def create_app(controller: Controller, token: str, logs: LogStore, *, db_label: str) -> FastAPI:
    service = controller.service
    app = FastAPI(
        title="Phalanx", version=__version__,
        description="Queue, gang-schedule and run distributed training jobs.",
    )

    @app.middleware("http")
    async def authenticate(request: Request, call_next: Any) -> Response:
        if request.url.path.startswith("/v1/") and not token_matches(
            request.headers.get("authorization"), token
        ):
            return _error(AuthError(
                "missing or wrong API token", field="Authorization",
                fix="send 'Authorization: Bearer <token>' with the token from $PHALANX_HOME/token",
            ))
        response: Response = await call_next(request)
        return response

    @app.exception_handler(PhalanxError)
    async def phalanx_error(_: Request, exc: PhalanxError) -> JSONResponse:
        return _error(exc)

    @app.exception_handler(RequestValidationError)
    async def bad_request(_: Request, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0] if exc.errors() else {}
        loc = ".".join(str(p) for p in first.get("loc", ()) if p != "body")
        return _error(SpecError(
            first.get("msg", "invalid request"), field=loc or None,
            fix="send a JSON body as described in /openapi.json",
        ))

    @app.get("/healthz")
    def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/metrics")
    def metrics() -> Response:
        service.refresh_metrics()
        return Response(generate_latest(controller.metrics.registry),
                        media_type=CONTENT_TYPE_LATEST)

    @app.get("/v1/version")
    def version() -> dict[str, str]:
        return {"version": __version__, "api": "v1"}

    @app.get("/v1/status")
    def status() -> dict[str, object]:
        return {"version": __version__, "db": db_label, **controller.status()}

    # ------------------------------------------------------------------ jobs
    @app.post("/v1/jobs", status_code=201)
    def submit(body: dict[str, Any] = Body(...)) -> dict[str, Any]:
        spec = validate(JobSpec, body)
        return service.submit(spec).to_dict()

    @app.post("/v1/jobs:batch", status_code=201)
    def submit_batch(body: dict[str, Any] = Body(...)) -> dict[str, Any]:
        """Submit several jobs at once, all or nothing (one store transaction)."""
        items = body.get("items")
        if not isinstance(items, list) or not items:
            raise SpecError("must be a non-empty list of jobs", field="items",
                            fix='send {"items": [{"name": ..., "podSets": [...]}, ...]}')
        specs = [validate(JobSpec, item, prefix=f"items[{i}]") for i, item in enumerate(items)]
        return {"items": [record.to_dict() for record in service.submit_many(specs)]}

    @app.get("/v1/jobs")
    def list_jobs(
        status: list[JobStatus] | None = Query(None),
        queue: str | None = None,
        limit: int | None = Query(None, ge=1),
    ) -> dict[str, Any]:
        records = service.list_jobs(statuses=status, queue=queue, limit=limit)
        return {"items": [r.to_dict() for r in records]}

    @app.get("/v1/jobs/{name}")
    def describe(name: str) -> dict[str, Any]:
        record = service.get(name)
        pods = [
            PodInfo(
                name=p.ref.name, pod_set=p.ref.pod_set, index=p.ref.index, rank=p.ref.rank,
                node=p.node, phase=p.phase.value, exit_code=p.exit_code, signal=p.signal,
                reason=p.reason, pid=p.pid, started_at=p.started_at, finished_at=p.finished_at,
            )
            for p in sorted(service.pods_of(name), key=lambda p: p.ref.rank)
        ]
        events = service.events_of(name)
        detail = JobDetail(**record.model_dump(), pods=pods, events=events)
        return detail.to_dict()

    @app.get("/v1/jobs/{name}/events")
    def events(name: str) -> dict[str, Any]:
        service.get(name)
        return {"items": [e.to_dict() for e in controller.store.list_events(name)]}

    @app.post("/v1/jobs/{name}/cancel")
    def cancel(name: str) -> dict[str, Any]:
        return service.cancel(name).to_dict()

    @app.get("/v1/jobs/{name}/logs")
    def job_logs(name: str, pod: str | None = None, follow: bool = False) -> Response:
        record = service.get(name)
        service.flush_logs()
        follower = LogFollower(logs, record, pod)

        def finished() -> bool:
            try:
                return service.get(name).status.terminal
            except NotFound:
                return True

        def chunks() -> Iterator[bytes]:
            yield from follower.drain()
            while follow and not finished():
                time.sleep(0.2)
                yield from follower.drain()
            service.flush_logs()
            yield from follower.drain(final=True)

        if not follow:
            return PlainTextResponse(b"".join(chunks()))
        return StreamingResponse(chunks(), media_type="text/plain; charset=utf-8")

    # ------------------------------------------------------------------ queues & nodes
    @app.get("/v1/queues")
    def queues() -> dict[str, Any]:
        overview = service.queues()
        return {
            "clusterQueues": [
                {
                    "name": cq.name, "cohort": cq.cohort, "pending": cq.pending,
                    "admitted": cq.admitted, "stopped": cq.stopped,
                    "weightedShare": cq.weighted_share,
                    "usage": [
                        {
                            "flavor": u.flavor, "resource": u.resource,
                            "nominal": format_quantity(u.nominal, u.resource),
                            "used": format_quantity(u.used, u.resource),
                            "borrowed": format_quantity(u.borrowed, u.resource),
                            "lendable": format_quantity(u.lendable, u.resource),
                        }
                        for u in cq.usage
                    ],
                }
                for cq in overview.cluster_queues
            ],
            "localQueues": [
                {"name": lq.name, "clusterQueue": lq.cluster_queue, "pending": lq.pending,
                 "admitted": lq.admitted}
                for lq in overview.local_queues
            ],
            "cohorts": [{"name": c.name, "parent": c.parent}
                        for c in overview.config.cohorts.values()],
        }

    @app.get("/v1/nodes")
    def nodes() -> dict[str, Any]:
        items = []
        for entry in service.nodes():
            doc = entry.node.to_dict()
            doc["used"] = {res: format_quantity(v, res) for res, v in entry.used.items()}
            items.append(doc)
        return {"items": items}

    # ------------------------------------------------------------------ config
    @app.post("/v1/config/apply")
    def apply(body: dict[str, Any] = Body(...)) -> dict[str, Any]:
        documents = body.get("documents")
        if not isinstance(documents, list):
            raise SpecError("must be a list of documents", field="documents",
                            fix='send {"documents": [{"kind": "ClusterQueue", ...}]}')
        objects = parse_config_documents(documents)
        return {"applied": service.apply_config(objects)}

    @app.get("/v1/config")
    def config() -> dict[str, Any]:
        return {"documents": [o.to_dict() for o in service.config().objects()]}

    return app
