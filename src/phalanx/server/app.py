"""The versioned JSON HTTP API (``/v1``) over one Controller.

Every route declares the model it takes and the one it returns (``phalanx.spec.api``),
and every error answer is the envelope ``{"error": {type, message, field, fix}}``, so
``/openapi.json`` describes all that goes over the wire.
"""

from __future__ import annotations

import inspect
import logging
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import anyio
from anyio import to_thread
from fastapi import FastAPI, Request, WebSocket
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import BaseRoute
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from phalanx.control import Controller
from phalanx.control.planes import PlaneRegistry
from phalanx.errors import (
    AuthError,
    Forbidden,
    InternalError,
    LeaderOnly,
    PayloadTooLarge,
    PhalanxError,
    SpecError,
    error_by_status,
)
from phalanx.server.access import PRINCIPAL, check_every_route
from phalanx.server.auth import Authenticator
from phalanx.server.document import openapi_document
from phalanx.server.logstream import READ_THREADS, FollowerSlots, LogLimits
from phalanx.server.podexec import deny, exec_router
from phalanx.server.redaction import SecretEnvRule
from phalanx.server.replicas import to_leader
from phalanx.server.routes import (
    admission,
    cluster,
    configuration,
    identity,
    jobs,
    pools,
    ray,
    status,
)
from phalanx.server.routes import planes as plane_routes
from phalanx.server.routes.context import ApiContext, error_response
from phalanx.server.secret_routes import secret_router
from phalanx.server.storage import StateDisk, store_unavailable
from phalanx.server.ui import MOUNT, create_ui
from phalanx.server.workdir_routes import own_body_cap, workdir_router
from phalanx.spec.api import ACT_AS_HEADER
from phalanx.spec.base import spec_error_from_errors
from phalanx.spec.resources import MAX_JOB_SPEC_BYTES
from phalanx.store import LogStore
from phalanx.store.workdirs import WORKDIRS, WorkdirStore
from phalanx.version import __version__

log = logging.getLogger("phalanx.api")

MAX_BODY_BYTES = 16 * 2**20  # the default of ``phalanx up --max-body-bytes``
# One job's body (POST /v1/jobs): its spec's bounded parts (MAX_JOB_SPEC_BYTES) and room
# for the rest and for JSON's escapes.
MAX_JOB_BODY_BYTES = 2 * MAX_JOB_SPEC_BYTES


def _replay(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that gives ``body`` whole first, then whatever ``receive`` gives."""
    given = False

    async def replay() -> Message:
        nonlocal given
        if not given:
            given = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


class _Guard:
    """Authentication for ``/v1`` (the principal goes into the request's state for the
    routes' access checks) and the error envelope for failures no handler caught.

    Plain ASGI rather than ``@app.middleware("http")``: Starlette's BaseHTTPMiddleware
    runs every request in an extra task and copies its answer through a stream, which
    cost about a sixth of the server's time per submission.
    """

    def __init__(self, app: ASGIApp, auth: Authenticator, max_body_bytes: int,
                 disk: StateDisk | None) -> None:
        # A WebSocket (``/v1/jobs/{name}/exec``) carries its token in the same header.
        self.app = app
        self.auth = auth
        self.max_body_bytes = max_body_bytes
        self.disk = disk

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        if scope["path"].startswith("/v1/") and scope["path"] not in _OPEN:
            header = next((v for k, v in scope["headers"] if k == b"authorization"), None)
            try:
                principal = self.auth.verify(_bearer(header))
                acting = next((v for k, v in scope["headers"] if k == _ACT_AS), None)
                if acting is not None:
                    principal = await to_thread.run_sync(
                        self.auth.act_as, principal, acting.decode("latin-1"),
                        _client_host(scope), f"{scope.get('method', 'GET')} {scope['path']}")
                plane_routes.check_plane_key(principal, scope["path"])
                if scope["type"] == "websocket":
                    # Running commands in pods changes things: never a viewer or a read-only
                    # key. Which jobs' pods, the exec route checks per job.
                    principal.check_writes()
            except (AuthError, Forbidden, SpecError) as exc:
                refusal = error_response(exc)
                if scope["type"] == "websocket":
                    await deny(WebSocket(scope, receive, send), refusal)
                else:
                    await refusal(scope, receive, send)
                return
            scope.setdefault("state", {})[PRINCIPAL] = principal
        if scope["type"] == "websocket":
            await self.app(scope, receive, send)
            return
        cap = self.max_body_bytes
        too_large = PayloadTooLarge(
            f"the request body is larger than {cap} bytes", field="body",
            fix="send less per request (split a batch into several), or start the control "
                "plane with a larger --max-body-bytes",
        )
        if scope["path"] == "/v1/jobs" and cap > MAX_JOB_BODY_BYTES:
            cap = MAX_JOB_BODY_BYTES
            too_large = PayloadTooLarge(
                f"the request body is larger than {cap} bytes, the most one job takes",
                field="body", fix="pass large data as a file (a volume, the checkpoint "
                "directory), not in the job's command, env or labels")
        declared = next((v for k, v in scope["headers"] if k == b"content-length"), None)
        capped = not own_body_cap(scope)  # an archive upload's route caps it, streaming it
        if capped and declared is not None and declared.isdigit() and int(declared) > cap:
            await error_response(too_large)(scope, receive, send)
            return
        if capped and declared is None and scope.get("method") in ("POST", "PUT", "PATCH"):
            # A body sent without a declared length (chunked) is read here up to the cap,
            # then handed to the route whole.
            chunks, size, more = [], 0, True
            while more:
                message = await receive()
                if message["type"] != "http.request":
                    return  # the client went away
                chunk = message.get("body", b"")
                size += len(chunk)
                if size > cap:
                    await error_response(too_large)(scope, receive, send)
                    return
                chunks.append(chunk)
                more = message.get("more_body", False)
            receive = _replay(b"".join(chunks), receive)
        started = False

        async def watch(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, watch)
        except Exception as exc:
            full = (self.disk.refusal(exc) if self.disk is not None else None) \
                or store_unavailable(exc)
            if full is None:
                # The client gets the envelope; the traceback stays in the server's log.
                log.exception("%s %s failed", scope.get("method"), scope["path"])
            if not started:
                await error_response(full or InternalError(
                    "the control plane failed to answer", fix="see the control plane's log",
                ))(scope, receive, send)


def _methods_of(routes: list[BaseRoute], path: str) -> list[str]:
    """Every method some route answers at ``path`` (for a 405's ``Allow``)."""
    methods: set[str] = set()
    for route in routes:
        regex, allowed = getattr(route, "path_regex", None), getattr(route, "methods", None)
        if regex is not None and allowed and regex.match(path):
            methods.update(allowed)
    return sorted(methods)


_OPEN = frozenset({"/v1/auth/token"})  # the exchange takes a key, not a token
_ACT_AS = ACT_AS_HEADER.lower().encode()


def _client_host(scope: Scope) -> str:
    client = scope.get("client")
    return str(client[0]) if client else "unknown"


def _bearer(header: bytes | None) -> str:
    text = header.decode("latin-1") if header else ""
    if not text.startswith("Bearer ") or not text[7:].strip():
        raise AuthError("missing token", field="Authorization",
                        fix="send 'Authorization: Bearer <token>': exchange an API key for "
                        "one at POST /v1/auth/token (the SDK and CLI do it themselves)")
    return text[7:].strip()


def telemetry_options(environ: Mapping[str, str] = os.environ) -> dict[str, Any]:
    """FastAPI's own OpenTelemetry off unless the environment configures OpenTelemetry
    (an ``OTEL_`` or ``FASTAPI_OTEL_`` variable): left on, FastAPI asks the environment
    for a tracer, meter and logger provider on every request, about a tenth of a
    submit's time, to find none."""
    if "telemetry" not in inspect.signature(FastAPI).parameters:
        return {}  # a FastAPI without telemetry of its own
    if any(name.startswith(("OTEL_", "FASTAPI_OTEL_")) for name in environ):
        return {}
    return {"telemetry": {"tracing": False, "metrics": False, "logs": False,
                          "operation_spans": False}}


def create_app(
    controller: Controller, auth: Authenticator, logs: LogStore, *, db_label: str,
    secrets: SecretEnvRule | None = None, max_body_bytes: int = MAX_BODY_BYTES,
    log_limits: LogLimits | None = None, dashboard: bool = True, interactive: bool = True,
    planes: PlaneRegistry | None = None, control_plane_id: str = "", home: Path | None = None,
    workdirs: WorkdirStore | None = None,
    leader_url: Callable[[], str | None] | None = None,
) -> FastAPI:
    """``secrets`` says which env values job specs in answers redact (default: the built-in
    rule); see ``server/redaction.py``. ``dashboard`` serves the web dashboard at ``/ui``.
    ``interactive`` says whether commands may run in pods through the API
    (``server/podexec.py``). ``home``: the state directory, whose free space ``/healthz``
    reports and a write that found none answers (507; ``server/storage.py``).
    ``workdirs`` holds jobs' packed working directories (default: beside the logs, in
    the control plane's home). ``leader_url``: on a replica that follows, where the leader
    answers (None: not known); a read that needs the leader (``LeaderOnly``) goes there."""
    ctx = ApiContext(
        controller, auth, logs, db_label,
        secret_env=secrets if secrets is not None else SecretEnvRule(),
        slots=FollowerSlots(log_limits if log_limits is not None else LogLimits()),
        log_reads=anyio.CapacityLimiter(READ_THREADS), planes=planes,
        control_plane_id=control_plane_id, disk=StateDisk(home) if home is not None else None,
        archives=workdirs if workdirs is not None else (
            controller.workdirs.archives if controller.workdirs is not None
            else WorkdirStore(logs.root.parent / WORKDIRS)),
    )
    disk, parsers = ctx.disk, ctx.parsers
    app = FastAPI(
        title="Phalanx", version=__version__,
        description="Queue, gang-schedule and run distributed training jobs.",
        **telemetry_options(),
    )
    app.add_middleware(_Guard, auth=auth, max_body_bytes=max_body_bytes, disk=disk)

    @app.exception_handler(PhalanxError)
    async def phalanx_error(request: Request, exc: PhalanxError) -> JSONResponse:
        full = (disk.refusal(exc) if disk is not None else None) or store_unavailable(exc) \
            if exc.status_code >= 500 else None
        if full is not None:
            return error_response(full)
        if exc.status_code >= 500:
            log.error("%s %s: %s", request.method, request.url.path, exc, exc_info=exc)
        return error_response(exc)

    if leader_url is not None:
        leader_of = leader_url

        @app.exception_handler(LeaderOnly)
        async def to_the_leader(request: Request, exc: LeaderOnly) -> JSONResponse:
            status, body, headers = to_leader(leader_of(), request.scope)
            return JSONResponse(body, status_code=status,
                                headers={k.decode(): v.decode() for k, v in headers})

    @app.exception_handler(RequestValidationError)
    async def bad_request(request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = [
            {**e, "loc": tuple(e.get("loc", ()))[1:]} if e.get("loc", ("",))[0] in _WHERE else e
            for e in exc.errors()
        ]
        if errors and errors[0].get("type") == "json_invalid":
            return error_response(SpecError("is not valid JSON", field="body",
                                            fix="send a JSON body as described in /openapi.json"))
        route = request.scope.get("route")
        parse = parsers.get(getattr(route, "path", ""))
        if parse is not None and exc.body is not None:
            try:
                parse(exc.body)
            except SpecError as friendly:
                return error_response(friendly)
        error = spec_error_from_errors(errors)
        where = tuple(exc.errors()[0].get("loc", ("body",)))[:1] if exc.errors() else ("body",)
        if error.fix is None or error.fix.startswith("correct the document"):
            error.fix = _FIX_AT.get(where[0] if where else "body", _FIX_AT["body"])
        return error_response(error)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        cls = error_by_status(exc.status_code, PhalanxError)
        error = cls(str(exc.detail), fix="see /openapi.json for the routes")
        headers = getattr(exc, "headers", None)
        if exc.status_code == 405:
            # Starlette names the methods of the first route that matched the path only.
            allowed = _methods_of([*app.router.routes, *api_routes], request.scope["path"])
            headers = {**(headers or {}), "Allow": ", ".join(allowed)}
        return JSONResponse({"error": error.to_dict()}, status_code=exc.status_code,
                            headers=headers)

    # Included in this order, the order of /openapi.json's paths.
    routers = [
        exec_router(ctx.service, interactive=interactive, error_response=error_response),
        workdir_router(controller, ctx.archives, planes=planes),
        status.router(ctx), jobs.router(ctx), ray.router(ctx), cluster.router(ctx),
        pools.router(ctx), configuration.router(ctx),
        *([plane_routes.router(ctx, planes)] if planes is not None else []),
        identity.router(ctx), secret_router(auth), admission.router(ctx),
    ]
    # The routes themselves, as the routers hold them: FastAPI may keep an included
    # router as one entry of ``app.routes``.
    api_routes = [route for router in routers for route in router.routes]
    check_every_route(api_routes)
    app.state.api_routes = api_routes  # what a follower matches its reads against
    for router in routers:
        app.include_router(router)
    if dashboard:
        # Any user's API key opens a dashboard session with that user's role and teams;
        # the bootstrap key signs the session cookies.
        app.mount(MOUNT, create_ui(controller, logs, auth.bootstrap_key, secrets=ctx.secret_env,
                                   slots=ctx.slots, log_reads=ctx.log_reads, authenticator=auth,
                                   planes=planes))
    app.openapi = lambda: openapi_document(app, _OPEN)  # type: ignore[method-assign]
    return app


_WHERE = ("body", "query", "path", "header", "cookie")
# The fix of a request error that names none, by where the error is.
_FIX_AT = {
    "body": "send a JSON body as described in /openapi.json",
    "query": "correct the query parameters as /openapi.json describes them",
    "path": "correct the path as /openapi.json describes it",
    "header": "correct the headers as /openapi.json describes them",
    "cookie": "send no cookies; the API takes a bearer token",
}
