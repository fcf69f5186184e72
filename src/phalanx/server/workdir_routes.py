"""The routes of packed working directories (``workdir`` of a job, docs/your-work.md).

- ``HEAD /v1/workdirs/{sha256}``: 200 when the caller may read the archive (so the CLI and
  SDK skip the upload), 404 otherwise;
- ``PUT /v1/workdirs/{sha256}``: upload it (a member, or an admin); the body must hash to
  the path's digest; the caller and its teams may read it from then on;
- ``GET /v1/workdirs/{sha256}``: the archive, to those who may read it: its uploader, the
  members of the uploader's teams, and a job's credential acting for one of them (the
  init container of a Kubernetes pod fetches it so);
- ``GET /v1/planes/{name}/workdirs/{sha256}``: the archive, to the worker of plane
  ``name`` while the control plane wants an attempt that names it started there;
- ``POST /v1/workdirs:prune``: an admin's pruning pass now (``control/retention.py``).

A HEAD that answers 200, an upload and a submit that names an archive mark it used, so
its retention counts from then.

Whether another team holds an archive is never told: to a caller that may not read it,
the answer is the same 404 whether the bytes are here or not (``store/workdirs.py``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated

from fastapi import APIRouter, Path, Query, Request
from fastapi.responses import Response, StreamingResponse
from starlette.types import Scope

from phalanx.control import Controller
from phalanx.control.planes import PlaneRegistry
from phalanx.control.retention import DEFAULT_WORKDIR_RETENTION, WorkdirPruner
from phalanx.errors import NotFound, SpecError
from phalanx.server.access import Access, caller_of, needs, principal_of
from phalanx.server.principal import Principal
from phalanx.server.routes.context import errors
from phalanx.spec.quantity import parse_duration
from phalanx.spec.resources import JobSpec
from phalanx.spec.sources import (
    PrunedWorkdir,
    WorkdirArchive,
    WorkdirPruneResult,
    check_resolved,
)
from phalanx.store.workdirs import MAX_ARCHIVE_BYTES, WorkdirStore, check_digest

# An archive's name: its SHA-256, declared so the document says what the route takes.
Digest = Annotated[str, Path(pattern="^[0-9a-f]{64}$",
                            description="The archive's SHA-256 (64 lower-case hex digits)")]

PREFIX = "/v1/workdirs/"
ARCHIVE_TYPE = "application/gzip"


def _absent(sha256: str) -> NotFound:
    return NotFound(f"workdir archive {sha256[:12]} is not uploaded", field="workdir.sha256",
                    fix="upload it (PUT /v1/workdirs/<sha256>; the phalanx CLI and SDK do "
                        "when they submit a job with a workdir)")


def own_body_cap(scope: Scope) -> bool:
    """Whether the request is an archive upload, whose route caps its body itself (the
    API's --max-body-bytes is for JSON, far smaller than a directory)."""
    return scope.get("method") == "PUT" and str(scope.get("path", "")).startswith(PREFIX)


def check_job_sources(store: WorkdirStore, principal: Principal, specs: list[JobSpec]) -> None:
    """At submit: every job's code source is resolved, and its archive readable by the
    submitter. The refusal is the same whether another team holds the archive or not."""
    for spec in specs:
        check_resolved(spec.workdir, spec.git)
        if isinstance(spec.workdir, WorkdirArchive):
            if not store.readable_by(spec.workdir.sha256, principal.name, principal.teams):
                raise _absent(spec.workdir.sha256)
            store.touch(spec.workdir.sha256)  # not pruned between here and the job's store


def add_workdir_routes(app: APIRouter, controller: Controller, store: WorkdirStore, *,
                       planes: PlaneRegistry | None = None) -> None:
    """Mount the routes on ``app``; uploads are counted in the controller's metrics
    (``phalanx_workdir_uploads_total``)."""
    router = APIRouter()

    def pruner() -> WorkdirPruner:
        """The loop's pruner when it prunes this store; else one for this pass alone."""
        found = controller.workdirs
        if found is not None and found.archives is store:
            return found
        return WorkdirPruner(store, controller.state, None, controller.state.clock)

    def readable(request: Request, sha256: str) -> Principal:
        principal = caller_of(request)
        if not store.readable_by(check_digest(sha256), principal.name, principal.teams):
            raise _absent(sha256)
        return principal

    @router.head(PREFIX + "{sha256}", dependencies=needs(Access.READ),
                 responses=errors(400, 401, 404))
    def held(sha256: Digest, request: Request) -> Response:
        """200 when the caller may read the archive, 404 otherwise."""
        readable(request, sha256)
        store.touch(sha256)  # the client submits a job naming it next
        return Response(status_code=200)

    @router.post("/v1/workdirs:prune", dependencies=needs(Access.ADMIN),
                 responses=errors(400, 401, 403))
    def prune(older_than: Annotated[str | None, Query(
                  alias="olderThan", description="Remove archives unused this long (e.g. "
                  "12h, 7d; default: the control plane's --workdir-retention, else 7d)")] = None,
              dry_run: Annotated[bool, Query(alias="dryRun",
                                             description="Only say what would go")] = False,
              ) -> WorkdirPruneResult:
        """Remove the uploaded workdirs no job that has not ended names and no one used
        (uploaded, asked about, submitted) for ``olderThan``."""
        keep_for = None if older_than is None else parse_duration(older_than, "olderThan")
        if keep_for is not None and keep_for < 0:
            raise SpecError("is negative", field="olderThan", fix="write e.g. 12h, 7d or 0")
        passing = pruner()
        keep_for = keep_for if keep_for is not None else (
            passing.retention or DEFAULT_WORKDIR_RETENTION)
        report = passing.prune(keep_for, dry_run=dry_run)
        return WorkdirPruneResult(
            removed=[PrunedWorkdir(sha256=a.sha256, size=a.size, idle_seconds=a.idle_seconds)
                     for a in report.removed],
            removed_bytes=report.removed_bytes, kept_in_use=report.kept_in_use,
            kept_recent=report.kept_recent, older_than=keep_for, dry_run=dry_run)

    @router.put(PREFIX + "{sha256}", status_code=201, dependencies=needs(Access.WRITE),
                responses={200: {"model": WorkdirArchive,
                                 "description": "The caller could read it already"},
                           **errors(400, 401, 403)})
    async def upload(sha256: Digest, request: Request, response: Response) -> WorkdirArchive:
        """Upload an archive (a gzipped tar of a directory) under its SHA-256."""
        principal = caller_of(request)
        check_digest(sha256)
        if store.readable_by(sha256, principal.name, principal.teams):
            store.touch(sha256)
            response.status_code = 200
            return WorkdirArchive(sha256=sha256, size=store.path(sha256).stat().st_size)
        # Even when the bytes are here already (another team's), receiving them again
        # proves this caller holds them; then they are its too.
        receiving = store.upload(sha256, MAX_ARCHIVE_BYTES)
        try:
            async for chunk in request.stream():
                receiving.write(chunk)
        except BaseException:
            receiving.abort()
            raise
        size = receiving.commit()
        store.grant(sha256, principal.name, principal.teams)
        controller.metrics.workdir_uploads.inc()
        return WorkdirArchive(sha256=sha256, size=size)

    @router.get(PREFIX + "{sha256}", response_class=StreamingResponse,
                dependencies=needs(Access.READ),
                responses={200: {"content": {ARCHIVE_TYPE: {}}}, **errors(400, 401, 404)})
    def download(sha256: Digest, request: Request) -> StreamingResponse:
        """The archive, to its uploader's teams and their jobs' pods."""
        readable(request, sha256)
        return _archive(store, sha256)

    if planes is not None:
        registry = planes

        @router.get("/v1/planes/{name}/workdirs/{sha256}", response_class=StreamingResponse,
                    dependencies=needs(Access.PLANE),
                    responses={200: {"content": {ARCHIVE_TYPE: {}}},
                               **errors(400, 401, 403, 404)})
        def plane_download(name: str, sha256: Digest, request: Request) -> StreamingResponse:
            """The archive of an attempt the control plane wants started on plane ``name``
            (its worker unpacks it for the pods)."""
            principal_of(request)
            check_digest(sha256)
            wanted = registry.remote(name).desired(after=-1, timeout=0).attempts
            named = {a.spec["workdir"].get("sha256") for a in wanted
                     if isinstance(a.spec.get("workdir"), dict)}
            if sha256 not in named or not store.has(sha256):
                raise _absent(sha256)
            return _archive(store, sha256)

    app.include_router(router)


def workdir_router(controller: Controller, store: WorkdirStore | None, *,
                   planes: PlaneRegistry | None = None) -> APIRouter:
    """The routes as a router of their own (none without a store)."""
    r = APIRouter()
    if store is not None:
        add_workdir_routes(r, controller, store, planes=planes)
    return r


def _archive(store: WorkdirStore, sha256: str) -> StreamingResponse:
    chunks: Iterator[bytes] = store.read(sha256)
    return StreamingResponse(chunks, media_type=ARCHIVE_TYPE, headers={
        "Content-Length": str(store.path(sha256).stat().st_size)})
