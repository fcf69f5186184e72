"""The jobs: submit (one or a batch, idempotent with a key), list, describe, cancel (one or
by selector), delete, events and logs. A job the caller may not see answers as one that
does not exist; other teams' jobs show as queue occupancy only (``server/redaction.py``).
Running a command in a job's pod is ``server/podexec.py``'s WebSocket."""

from __future__ import annotations

import time
from typing import Any

from anyio import to_thread
from fastapi import APIRouter, Header, Query, Request
from fastapi.responses import PlainTextResponse, Response, StreamingResponse

from phalanx.control.planes import with_plane
from phalanx.errors import Conflict, SpecError
from phalanx.server.access import Access, audit_entry, caller_of, needs
from phalanx.server.logstream import (
    TEXT,
    FollowedResponse,
    LogFollower,
    parse_since,
    stream_logs,
)
from phalanx.server.manifest_routes import add_manifest_routes, manifest_of
from phalanx.server.principal import Principal
from phalanx.server.redaction import (
    clash_as_seen_by,
    job_as_seen_by,
    jobs_as_seen_by,
    refuse_reserved_names,
)
from phalanx.server.routes.context import Answer, ApiContext, errors
from phalanx.server.workdir_routes import check_job_sources
from phalanx.spec.api import ErrorResponse, EventList, JobBatch, JobList, JobSelector, parse_job
from phalanx.spec.gitrepo import with_commit
from phalanx.spec.labels import merge_selectors
from phalanx.spec.resources import JobSpec
from phalanx.spec.status import JobDetail, JobRecord, JobStatus, PodInfo
from phalanx.store import JobFilter

viewer_of = caller_of

_REPLAYED = "A retry with the same Idempotency-Key and request: the first answer's jobs"
_IDEMPOTENCY_HEADER = Header(
    None, alias="Idempotency-Key", min_length=1, max_length=255, pattern=r"^[\x21-\x7e]+$",
    description="A key of the client's choosing (a UUID); a retry with the same key and "
                "request submits nothing and answers the first request's jobs (200); keys are "
                "kept for 24 hours",
)
MAX_LIMIT = 1_000_000


def router(ctx: ApiContext) -> APIRouter:
    r = APIRouter()
    controller, service, identity, logs = ctx.controller, ctx.service, ctx.identity, ctx.logs
    secret_env, occupancy, parsers = ctx.secret_env, ctx.occupancy, ctx.parsers
    slots, log_reads = ctx.slots, ctx.log_reads

    def visible(name: str, request: Request) -> JobRecord:
        """The job, if the caller may see it; NotFound otherwise, as if it did not exist."""
        return ctx.visible_job(name, viewer_of(request))

    def submit_jobs(request: Request, specs: list[JobSpec], *, batch: bool,
                    idempotency_key: str | None, manifests: dict[str, Any] | None = None,
                    ) -> tuple[Principal, list[JobRecord], bool]:
        """Submit as the caller, once it may submit every job: (the caller, the jobs,
        whether this is a retry's answer). A name held by a job the caller may not see,
        or one of the reserved form of hidden jobs' names, is refused with one answer
        (``server/redaction.py``); a dependency on such a job answers as one on no job."""
        principal = viewer_of(request)
        sent, ready = specs, list[JobSpec]()
        for spec in specs:
            principal.check_submit(spec.queue)
            values = ctx.auth.secrets.material(spec, principal.name, principal.teams)
            # A git source with a key: resolved here, the key's holder, once for every attempt.
            ready.append(with_commit(spec, values.git) if values.git else spec)
        specs = ready
        if ctx.archives is not None:
            check_job_sources(ctx.archives, principal, specs)
        refuse_reserved_names(specs, batch=batch)
        audit = submit_audit(request, specs)
        try:
            if idempotency_key is None:
                return principal, service.submit_many(
                    specs, batch=batch, user=principal.name, audit=audit,
                    sees=principal.sees, manifests=manifests), False
            records, replayed = service.submit_keyed(
                specs, batch=batch, key=idempotency_key, user=principal.name, audit=audit,
                sees=principal.sees, manifests=manifests, sent=sent)
            return principal, records, replayed
        except Conflict as exc:
            raise clash_as_seen_by(exc, specs, principal, service.get) from None

    def submit_audit(request: Request, specs: list[JobSpec]) -> list[Any]:
        names = [s.name for s in specs]
        entry = audit_entry(request, "submit", names[0] if len(names) == 1
                            else f"{len(names)} jobs", jobs=names,
                            queues=sorted({s.queue for s in specs}))
        return [entry]

    record_answer, list_answer = Answer(JobRecord), Answer(JobList)

    @r.post("/v1/jobs", status_code=201, dependencies=needs(Access.WRITE),
            response_model=JobRecord, responses={
                200: {"model": JobRecord, "description": _REPLAYED},
                **errors(400, 401, 403, 404, 409, 413, 429)})
    def submit(spec: JobSpec, request: Request,
               idempotency_key: str | None = _IDEMPOTENCY_HEADER) -> Response:
        """Submit a job (to one of the caller's teams' LocalQueues, unless an admin). With an
        Idempotency-Key, a retry gets the first answer back."""
        principal, records, replayed = submit_jobs(request, [spec], batch=False,
                                                   idempotency_key=idempotency_key)
        return record_answer(job_as_seen_by(records[0], principal, secret_env),
                             200 if replayed else 201)

    parsers["/v1/jobs"] = parse_job

    @r.post("/v1/jobs:batch", status_code=201, dependencies=needs(Access.WRITE),
            response_model=JobList, responses={
                200: {"model": JobList, "description": _REPLAYED},
                **errors(400, 401, 403, 404, 409, 413, 429)})
    def submit_batch(batch: JobBatch, request: Request,
                     idempotency_key: str | None = _IDEMPOTENCY_HEADER) -> Response:
        """Submit several jobs at once, all or nothing (one store transaction)."""
        principal, records, replayed = submit_jobs(request, batch.items, batch=True,
                                                   idempotency_key=idempotency_key)
        return list_answer(JobList(items=jobs_as_seen_by(records, principal, secret_env)),
                           200 if replayed else 201)

    parsers["/v1/jobs:batch"] = JobBatch.parse
    add_manifest_routes(r, submit_jobs,
                        lambda records, viewer: jobs_as_seen_by(records, viewer, secret_env),
                        errors, _IDEMPOTENCY_HEADER, _REPLAYED)

    @r.get("/v1/jobs", dependencies=needs(Access.READ), responses=errors(400, 401))
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

    @r.post("/v1/jobs:cancel", dependencies=needs(Access.WRITE),
              responses=errors(400, 401, 403))
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

    @r.delete("/v1/jobs/{name}", dependencies=needs(Access.WRITE),
                responses=errors(401, 403, 404, 409))
    def delete_job(name: str, request: Request) -> JobRecord:
        """Delete a finished job with its events and logs; its name is free again."""
        visible(name, request)
        record = service.delete_job(name)
        identity.append([audit_entry(request, "delete-job", name)])
        return job_as_seen_by(record, viewer_of(request), secret_env)

    @r.get("/v1/jobs/{name}", dependencies=needs(Access.READ), responses=errors(401, 404))
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

    @r.get("/v1/jobs/{name}/events", dependencies=needs(Access.READ),
             responses=errors(401, 404))
    def events(name: str, request: Request) -> EventList:
        visible(name, request)
        return EventList(items=controller.store.list_events(name))

    @r.post("/v1/jobs/{name}/cancel", dependencies=needs(Access.WRITE),
              responses=errors(401, 403, 404))
    def cancel(name: str, request: Request) -> JobRecord:
        visible(name, request)
        record = with_plane(service.cancel(name), service.plane)
        identity.append([audit_entry(request, "cancel", name)])
        return job_as_seen_by(record, viewer_of(request), secret_env)

    @r.get(
        "/v1/jobs/{name}/logs", response_class=PlainTextResponse, dependencies=needs(Access.READ),
        responses={200: {"description": "The log lines; with follow, streamed until the job "
                         "has finished"}, **errors(400, 401, 404),
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

    return r

