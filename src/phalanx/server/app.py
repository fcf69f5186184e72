"""The versioned JSON HTTP API (``/v1``) over one Controller.

Every route declares the model it takes and the one it returns (``phalanx.spec.api``),
and every error answer is the envelope ``{"error": {type, message, field, fix}}``, so
``/openapi.json`` describes all that goes over the wire.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
from anyio import to_thread
from fastapi import FastAPI, Header, Query, Request, WebSocket
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from phalanx.control import Controller
from phalanx.control.planes import PlaneRegistry, plane_views, with_plane
from phalanx.errors import (
    AuthError,
    Conflict,
    Forbidden,
    InternalError,
    NotFound,
    PayloadTooLarge,
    PhalanxError,
    SpecError,
    Unavailable,
    error_by_status,
)
from phalanx.server.access import (
    PRINCIPAL,
    Access,
    audit_entry,
    caller_of,
    check_every_route,
    needs,
)
from phalanx.server.auth import Authenticator
from phalanx.server.cluster_routes import add_cluster_routes
from phalanx.server.document import openapi_document
from phalanx.server.identity_routes import add_identity_routes
from phalanx.server.logstream import (
    READ_THREADS,
    TEXT,
    FollowedResponse,
    FollowerSlots,
    LogFollower,
    LogLimits,
    parse_since,
    stream_logs,
)
from phalanx.server.manifest_routes import add_manifest_routes, manifest_of
from phalanx.server.plane_routes import add_plane_routes, check_plane_key
from phalanx.server.podexec import add_exec_route, deny
from phalanx.server.principal import Principal
from phalanx.server.redaction import (
    Occupancy,
    SecretEnvRule,
    clash_as_seen_by,
    job_as_seen_by,
    jobs_as_seen_by,
    refuse_reserved_names,
)
from phalanx.server.secret_routes import add_secret_routes
from phalanx.server.storage import StateDisk
from phalanx.server.ui import MOUNT, create_ui
from phalanx.server.workdir_routes import add_workdir_routes, check_job_sources, own_body_cap
from phalanx.spec.api import (
    ACT_AS_HEADER,
    ErrorResponse,
    EventList,
    Health,
    JobBatch,
    JobList,
    JobSelector,
    ServerStatus,
    VersionInfo,
    parse_job,
)
from phalanx.spec.base import spec_error_from_errors
from phalanx.spec.labels import merge_selectors
from phalanx.spec.resources import MAX_JOB_SPEC_BYTES, JobSpec
from phalanx.spec.status import JobDetail, JobRecord, JobStatus, PodInfo
from phalanx.store import JobFilter, LogStore
from phalanx.store.workdirs import WORKDIRS, WorkdirStore
from phalanx.version import __version__

log = logging.getLogger("phalanx.api")

def _error(exc: PhalanxError) -> JSONResponse:
    return JSONResponse({"error": exc.to_dict()}, status_code=exc.status_code)


def _errors(*codes: int) -> dict[int | str, dict[str, Any]]:
    """The error answers a route declares, all in the error envelope."""
    words = {
        400: "The request is invalid; the error names the field and the fix",
        401: "Missing, expired or wrong token, or (exchanging a key) a wrong key",
        403: "The caller's role, team or key scope does not allow this; the error says "
             "what was needed",
        404: "No such job or object",
        409: "The name is taken, the object is in use, or the Idempotency-Key came with "
             "another request",
        413: "The request body is larger than the control plane takes",
        429: "The queue holds as many pending jobs as its maxPendingJobs allows, or (exchanging "
             "a key) the client failed too often",
        500: "The control plane failed; it logged why",
        503: "The control loop is stuck or stopped",
        507: "No space left in the control plane's state directory (PHALANX_HOME); "
             "nothing was written",
    }
    return {code: {"model": ErrorResponse, "description": words[code]}
            for code in (*codes, 500, 507)}


_V1 = _errors(401)
# Routes reserved to some roles answer 403 too.
_ROLE_ERRORS = _errors(401, 403)
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
                check_plane_key(principal, scope["path"])
                if scope["type"] == "websocket":
                    # Running commands in pods changes things: never a viewer or a read-only
                    # key. Which jobs' pods, the exec route checks per job.
                    principal.check_writes()
            except (AuthError, Forbidden, SpecError) as exc:
                refusal = _error(exc)
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
            await _error(too_large)(scope, receive, send)
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
                    await _error(too_large)(scope, receive, send)
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
            full = self.disk.refusal(exc) if self.disk is not None else None
            if full is None:
                # The client gets the envelope; the traceback stays in the server's log.
                log.exception("%s %s failed", scope.get("method"), scope["path"])
            if not started:
                await _error(full or InternalError(
                    "the control plane failed to answer", fix="see the control plane's log",
                ))(scope, receive, send)


def _methods_of(app: FastAPI, request: Request) -> list[str]:
    """Every method some route answers at the request's path (for a 405's ``Allow``)."""
    path = request.scope["path"]
    methods: set[str] = set()
    for route in app.router.routes:
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


viewer_of = caller_of


def _not_found(name: str) -> NotFound:
    """The answer for a job that does not exist, or that the caller may not see: the same,
    so a refusal never tells whether a job exists."""
    return NotFound(f"job {name!r} does not exist", field="name",
                    fix="check the name with `phalanx jobs`")


def create_app(
    controller: Controller, auth: Authenticator, logs: LogStore, *, db_label: str,
    secrets: SecretEnvRule | None = None, max_body_bytes: int = MAX_BODY_BYTES,
    log_limits: LogLimits | None = None, dashboard: bool = True, interactive: bool = True,
    planes: PlaneRegistry | None = None, control_plane_id: str = "", home: Path | None = None,
    workdirs: WorkdirStore | None = None,
) -> FastAPI:
    """``secrets`` says which env values job specs in answers redact (default: the built-in
    rule); see ``server/redaction.py``. ``dashboard`` serves the web dashboard at ``/ui``.
    ``interactive`` says whether commands may run in pods through the API
    (``server/podexec.py``). ``home``: the state directory, whose free space ``/healthz``
    reports and a write that found none answers (507; ``server/storage.py``).
    ``workdirs`` holds jobs' packed working directories (default: beside the logs, in
    the control plane's home)."""
    service = controller.service
    secret_env = secrets if secrets is not None else SecretEnvRule()
    slots = FollowerSlots(log_limits if log_limits is not None else LogLimits())
    log_reads = anyio.CapacityLimiter(READ_THREADS)
    app = FastAPI(
        title="Phalanx", version=__version__,
        description="Queue, gang-schedule and run distributed training jobs.",
    )
    # Typed bodies are checked by FastAPI first; when they fail, the route's own parser
    # looks at the same body again so the error names the field and the fix as before.
    parsers: dict[str, Callable[[object], object]] = {}

    disk = StateDisk(home) if home is not None else None
    app.add_middleware(_Guard, auth=auth, max_body_bytes=max_body_bytes, disk=disk)
    add_exec_route(app, service, interactive=interactive, error_response=_error)
    identity = auth.identity
    archives = workdirs if workdirs is not None else WorkdirStore(logs.root.parent / WORKDIRS)
    add_workdir_routes(app, controller, archives, planes=planes, errors=_errors)
    occupancy = Occupancy(auth.hasher.pepper)

    def visible(name: str, request: Request) -> JobRecord:
        """The job, if the caller may see it; NotFound otherwise, as if it did not exist."""
        try:
            record = service.get(name)
        except NotFound:
            raise _not_found(name) from None
        if not viewer_of(request).sees(record):
            raise _not_found(name)
        return record

    @app.exception_handler(PhalanxError)
    async def phalanx_error(request: Request, exc: PhalanxError) -> JSONResponse:
        full = disk.refusal(exc) if disk is not None and exc.status_code >= 500 else None
        if full is not None:
            return _error(full)
        if exc.status_code >= 500:
            log.error("%s %s: %s", request.method, request.url.path, exc, exc_info=exc)
        return _error(exc)

    @app.exception_handler(RequestValidationError)
    async def bad_request(request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = [
            {**e, "loc": tuple(e.get("loc", ()))[1:]} if e.get("loc", ("",))[0] in _WHERE else e
            for e in exc.errors()
        ]
        if errors and errors[0].get("type") == "json_invalid":
            return _error(SpecError("is not valid JSON", field="body",
                                    fix="send a JSON body as described in /openapi.json"))
        route = request.scope.get("route")
        parse = parsers.get(getattr(route, "path", ""))
        if parse is not None and exc.body is not None:
            try:
                parse(exc.body)
            except SpecError as friendly:
                return _error(friendly)
        error = spec_error_from_errors(errors)
        where = tuple(exc.errors()[0].get("loc", ("body",)))[:1] if exc.errors() else ("body",)
        if error.fix is None or error.fix.startswith("correct the document"):
            error.fix = _FIX_AT.get(where[0] if where else "body", _FIX_AT["body"])
        return _error(error)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        cls = error_by_status(exc.status_code, PhalanxError)
        error = cls(str(exc.detail), fix="see /openapi.json for the routes")
        headers = getattr(exc, "headers", None)
        if exc.status_code == 405:
            # Starlette names the methods of the first route that matched the path only.
            headers = {**(headers or {}), "Allow": ", ".join(_methods_of(app, request))}
        return JSONResponse({"error": error.to_dict()}, status_code=exc.status_code,
                            headers=headers)

    @app.get("/healthz", response_model=Health, responses=_errors(503))
    def healthz() -> Health | JSONResponse:
        """Answers 200 while the control loop completes steps and the state directory has
        room; 503 once the loop stops or is stuck, or the directory is full."""
        healthy, message = controller.health()
        if not healthy:
            raise Unavailable(message, fix="see the control plane's log (server.log)")
        if disk is not None and (full := disk.problem()) is not None:
            # Answered, not raised: the refused writes were logged already.
            return _error(Unavailable(full.message, fix=f"free space on the disk of {disk.home} "
                                      "(delete finished jobs and their logs: phalanx delete)"))
        return Health(message=message)

    @app.get("/metrics", response_class=PlainTextResponse, responses=_errors())
    def metrics() -> Response:
        """Prometheus metrics, in its text format."""
        service.refresh_metrics()
        return Response(generate_latest(controller.metrics.registry),
                        media_type=CONTENT_TYPE_LATEST)

    @app.get("/v1/version", dependencies=needs(Access.READ), responses=_V1)
    def version() -> VersionInfo:
        return VersionInfo(version=__version__)

    @app.get("/v1/status", dependencies=needs(Access.READ), responses=_V1)
    def status() -> ServerStatus:
        shown = plane_views(planes, service) if planes is not None else []
        return ServerStatus.model_validate(
            {"version": __version__, "db": db_label, **controller.status()}
        ).model_copy(update={"planes": shown})

    # ------------------------------------------------------------------ jobs
    def submit_jobs(request: Request, specs: list[JobSpec], *, batch: bool,
                    idempotency_key: str | None, manifests: dict[str, Any] | None = None,
                    ) -> tuple[Principal, list[JobRecord], bool]:
        """Submit as the caller, once it may submit every job: (the caller, the jobs,
        whether this is a retry's answer). A name held by a job the caller may not see,
        or one of the reserved form of hidden jobs' names, is refused with one answer
        (``server/redaction.py``); a dependency on such a job answers as one on no job."""
        principal = viewer_of(request)
        for spec in specs:
            principal.check_submit(spec.queue)
            auth.secrets.material(spec, principal.name, principal.teams)  # each can resolve
        check_job_sources(archives, principal, specs)
        refuse_reserved_names(specs, batch=batch)
        audit = submit_audit(request, specs)
        try:
            if idempotency_key is None:
                return principal, service.submit_many(
                    specs, batch=batch, user=principal.name, audit=audit,
                    sees=principal.sees, manifests=manifests), False
            records, replayed = service.submit_keyed(
                specs, batch=batch, key=idempotency_key, user=principal.name, audit=audit,
                sees=principal.sees, manifests=manifests)
            return principal, records, replayed
        except Conflict as exc:
            raise clash_as_seen_by(exc, specs, principal, service.get) from None

    def submit_audit(request: Request, specs: list[JobSpec]) -> list[Any]:
        names = [s.name for s in specs]
        entry = audit_entry(request, "submit", names[0] if len(names) == 1
                            else f"{len(names)} jobs", jobs=names,
                            queues=sorted({s.queue for s in specs}))
        return [entry]

    @app.post("/v1/jobs", status_code=201, dependencies=needs(Access.WRITE), responses={
        200: {"model": JobRecord, "description": _REPLAYED},
        **_errors(400, 401, 403, 409, 413, 429)})
    def submit(spec: JobSpec, request: Request, response: Response,
               idempotency_key: str | None = _IDEMPOTENCY_HEADER) -> JobRecord:
        """Submit a job (to one of the caller's teams' LocalQueues, unless an admin). With an
        Idempotency-Key, a retry gets the first answer back."""
        principal, records, replayed = submit_jobs(request, [spec], batch=False,
                                                   idempotency_key=idempotency_key)
        if replayed:
            response.status_code = 200
        return job_as_seen_by(records[0], principal, secret_env)

    parsers["/v1/jobs"] = parse_job

    @app.post("/v1/jobs:batch", status_code=201, dependencies=needs(Access.WRITE), responses={
        200: {"model": JobList, "description": _REPLAYED},
        **_errors(400, 401, 403, 409, 413, 429)})
    def submit_batch(batch: JobBatch, request: Request, response: Response,
                     idempotency_key: str | None = _IDEMPOTENCY_HEADER) -> JobList:
        """Submit several jobs at once, all or nothing (one store transaction)."""
        principal, records, replayed = submit_jobs(request, batch.items, batch=True,
                                                   idempotency_key=idempotency_key)
        if replayed:
            response.status_code = 200
        return JobList(items=jobs_as_seen_by(records, principal, secret_env))

    parsers["/v1/jobs:batch"] = JobBatch.parse
    add_manifest_routes(app, submit_jobs,
                        lambda records, viewer: jobs_as_seen_by(records, viewer, secret_env),
                        _errors, _IDEMPOTENCY_HEADER, _REPLAYED)

    @app.get("/v1/jobs", dependencies=needs(Access.READ), responses=_errors(400, 401))
    def list_jobs(
        request: Request,
        status: list[JobStatus] | None = Query(None),
        queue: str | None = None,
        user: str | None = Query(None, description="Who submitted the jobs"),
        label: list[str] | None = Query(
            None, description="Label selector, key=value[,key=value...] (all must match)"),
        limit: int | None = Query(None, ge=1, le=MAX_LIMIT),
        continue_token: str | None = Query(
            None, alias="continue", description="The continue token of the previous page"),
    ) -> JobList:
        """Jobs, newest submission first; with ``limit``, a page and how many follow.

        Jobs the caller may not see (other teams') show as queue occupancy only: an opaque
        name, queue, status, priority and resources; filtered by user or label, they are
        left out (the filter would tell whose they are)."""
        where = JobFilter(statuses=status, queue=queue, user=user,
                          labels=merge_selectors(label))
        page = service.page_jobs(where, limit=limit, after=continue_token)
        shown = occupancy if user is None and not label else None
        items = [with_plane(r, service.plane) for r in page.items]
        return JobList(items=jobs_as_seen_by(items, viewer_of(request), secret_env, shown),
                       continue_token=page.next,
                       remaining_item_count=page.remaining if limit is not None else None)

    @app.post("/v1/jobs:cancel", dependencies=needs(Access.WRITE),
              responses=_errors(400, 401, 403))
    def cancel_matching(selector: JobSelector, request: Request) -> JobList:
        """Cancel every live job the selector matches (queue, labels, user: all that are
        given) among those the caller sees; answers the jobs cancelled."""
        if selector.queue is None and selector.user is None and not selector.labels:
            raise SpecError("selects no jobs", field="selector",
                            fix="give a queue, labels or a user (or several)")
        where = JobFilter(queue=selector.queue, user=selector.user, labels=selector.labels)
        principal = viewer_of(request)
        cancelled = service.cancel_matching(where, allowed=principal.sees)
        if cancelled:
            identity.append([audit_entry(request, "cancel", f"{len(cancelled)} jobs",
                                         jobs=[r.name for r in cancelled],
                                         selector=selector.to_dict())])
        return JobList(items=jobs_as_seen_by(cancelled, principal, secret_env))

    @app.delete("/v1/jobs/{name}", dependencies=needs(Access.WRITE),
                responses=_errors(401, 403, 404, 409))
    def delete_job(name: str, request: Request) -> JobRecord:
        """Delete a finished job with its events and logs; its name is free again."""
        visible(name, request)
        record = service.delete_job(name)
        identity.append([audit_entry(request, "delete-job", name)])
        return job_as_seen_by(record, viewer_of(request), secret_env)

    @app.get("/v1/jobs/{name}", dependencies=needs(Access.READ), responses=_errors(401, 404))
    def describe(name: str, request: Request) -> JobDetail:
        record = job_as_seen_by(with_plane(visible(name, request), service.plane),
                                viewer_of(request), secret_env)
        pods = [
            PodInfo(
                name=p.ref.name, pod_set=p.ref.pod_set, index=p.ref.index, rank=p.ref.rank,
                node=p.node, phase=p.phase.value, exit_code=p.exit_code, signal=p.signal,
                reason=p.reason, pid=p.pid, started_at=p.started_at, finished_at=p.finished_at,
                cpus=list(p.cpus),
            )
            for p in sorted(service.pods_of(name), key=lambda p: p.ref.rank)
        ]
        return JobDetail(**record.model_dump(), pods=pods, events=service.events_of(name),
                         **manifest_of(service.store, record, viewer_of(request)))

    @app.get("/v1/jobs/{name}/events", dependencies=needs(Access.READ),
             responses=_errors(401, 404))
    def events(name: str, request: Request) -> EventList:
        visible(name, request)
        return EventList(items=controller.store.list_events(name))

    @app.post("/v1/jobs/{name}/cancel", dependencies=needs(Access.WRITE),
              responses=_errors(401, 403, 404))
    def cancel(name: str, request: Request) -> JobRecord:
        visible(name, request)
        record = with_plane(service.cancel(name), service.plane)
        identity.append([audit_entry(request, "cancel", name)])
        return job_as_seen_by(record, viewer_of(request), secret_env)

    @app.get(
        "/v1/jobs/{name}/logs", response_class=PlainTextResponse, dependencies=needs(Access.READ),
        responses={200: {"description": "The log lines; with follow, streamed until the job "
                         "has finished"}, **_errors(400, 401, 404),
                   429: {"model": ErrorResponse, "description": "Too many followers of this "
                         "job, or from this client; the error says which bound and the fix"}},
    )
    async def job_logs(
        request: Request,
        name: str,
        pod: str | None = None,
        follow: bool = False,
        tail: int | None = Query(None, ge=0, description="Only the last N lines of each pod"),
        since: str | None = Query(
            None, description="Only lines written since then: a duration back from now "
            "(\"10m\", \"1h30m\") or a time (ISO 8601, UTC unless it says otherwise). Exact "
            "to the second: lines written earlier in that second are included, and a line "
            "partly written then is included whole. Logs written before the server kept a "
            "time index are included whole if modified since.",
        ),
    ) -> Response:
        """The job's logs (one pod's, by rank or name, or all of them prefixed by pod name).

        Read from disk as they are sent, never whole. With follow, the stream ends once the
        job has finished; followers are bounded per job and per client (429 beyond).
        """
        since_time = None if since is None else parse_since(since, time.time())
        # Every call that may block (the store, the state's lock, the disk) runs in a thread
        # of the logs' own limiter: waiting followers hold none, and no route starves.
        record = await to_thread.run_sync(visible, name, request, limiter=log_reads)
        follower = LogFollower(logs, record, pod, tail=tail, since=since_time)
        await to_thread.run_sync(service.flush_logs, limiter=log_reads)
        body = stream_logs(
            follower, follow=follow, finished=lambda: service.finished(name),
            flush=service.flush_logs, disconnected=request.is_disconnected, limiter=log_reads,
        )
        if not follow:
            return StreamingResponse(body, media_type=TEXT)
        client = request.client.host if request.client is not None else "unknown"
        slots.take(name, client)
        return FollowedResponse(body, release=lambda: slots.give_back(name, client))

    add_cluster_routes(app, service, identity, parsers, _errors)
    if planes is not None:
        add_plane_routes(app, controller, planes, auth, control_plane_id, _errors, _error)
    add_identity_routes(app, auth, _ROLE_ERRORS, _errors)
    add_secret_routes(app, auth, _errors)
    check_every_route(app.routes)
    if dashboard:
        # Any user's API key opens a dashboard session with that user's role and teams;
        # the bootstrap key signs the session cookies.
        app.mount(MOUNT, create_ui(controller, logs, auth.bootstrap_key, secrets=secret_env,
                                   slots=slots, log_reads=log_reads, authenticator=auth,
                                   planes=planes))
    app.openapi = lambda: openapi_document(app, _OPEN)  # type: ignore[method-assign]
    return app


_REPLAYED = "A retry with the same Idempotency-Key and request: the first answer's jobs"
_IDEMPOTENCY_HEADER = Header(
    None, alias="Idempotency-Key", min_length=1, max_length=255, pattern=r"^[\x21-\x7e]+$",
    description="A key of the client's choosing (a UUID); a retry with the same key and "
                "request submits nothing and answers the first request's jobs (200); keys are "
                "kept for 24 hours",
)


_WHERE = ("body", "query", "path", "header", "cookie")
# The fix of a request error that names none, by where the error is.
_FIX_AT = {
    "body": "send a JSON body as described in /openapi.json",
    "query": "correct the query parameters as /openapi.json describes them",
    "path": "correct the path as /openapi.json describes it",
    "header": "correct the headers as /openapi.json describes them",
    "cookie": "send no cookies; the API takes a bearer token",
}
MAX_LIMIT = 1_000_000
