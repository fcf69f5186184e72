"""``/v1/jobs/{name}/ray/{path}``: a Ray job's dashboard and job-submission API, proxied.

A Ray cluster's dashboard (and Ray's job-submission API, which it serves) listens where
the head runs: loopback on this machine, an in-cluster Service on Kubernetes. Neither is
reachable from a notebook elsewhere, and neither asks who calls. The control plane, which
reaches both, forwards ``/v1/jobs/{name}/ray/<path>`` to ``<dashboard>/<path>`` for the
caller's own bearer token, as it does every ``/v1`` route, so Ray's own
``JobSubmissionClient(address, headers={"Authorization": "Bearer ..."})`` works with the
address ``<control plane>/v1/jobs/{name}/ray``.

Who may: reading (GET, HEAD, OPTIONS) whoever sees the job in full (its team, an admin);
anything else (submitting a Ray job, stopping one) only its submitter or an admin, as
``phalanx exec``: code submitted there runs with the pods' environment, secrets included.
Another team's job answers as one that does not exist. A job on a plane behind a worker
is refused (501): the worker dials out and its connection carries pod commands, reports
and logs, not HTTP, so the control plane cannot reach that dashboard.

Bodies stream both ways. Hop-by-hop headers, the caller's ``Authorization`` and cookies
(the control plane's, never the dashboard's) are not forwarded; a redirect to the
dashboard's own path comes back under the proxied one. What the dashboard serves is the
cluster's image's, not the control plane's: every answer carries
``Content-Security-Policy: sandbox ...``, so a page of it opened in a browser runs in an
origin of its own and never reaches the control plane's (its web dashboard's session).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
from anyio import to_thread
from fastapi import APIRouter, Request
from fastapi.responses import StreamingResponse
from starlette.background import BackgroundTask
from starlette.responses import Response

from phalanx.control.planes import unreachable_plane_of
from phalanx.errors import Forbidden, NotFound, NotSupported, Unavailable
from phalanx.server.access import Access, caller_of, needs
from phalanx.server.routes.context import ApiContext, error_response, errors
from phalanx.spec.api import ACT_AS_HEADER
from phalanx.spec.ray import DASHBOARD_PROXY, dashboard_proxy
from phalanx.spec.resources import JobKind
from phalanx.spec.status import JobStatus

READS = ["GET", "HEAD", "OPTIONS"]
WRITES = ["POST", "PUT", "PATCH", "DELETE"]
# RFC 9110 section 7.6.1: meant for one connection, never forwarded.
HOP_BY_HOP = frozenset({"connection", "keep-alive", "proxy-authenticate", "proxy-authorization",
                        "proxy-connection", "te", "trailer", "transfer-encoding", "upgrade"})
# The caller's credentials for the control plane are not the dashboard's business; the
# dashboard's cookies would be set on the control plane's origin, for every job's.
NOT_FORWARDED = HOP_BY_HOP | {"authorization", "cookie", "host", ACT_AS_HEADER.lower()}
NOT_RETURNED = HOP_BY_HOP | {"set-cookie"}
# Scripts may run (the dashboard is an app), but in an opaque origin: no cookie, storage
# or same-origin request of the control plane's.
SANDBOX = (b"content-security-policy",
           b"sandbox allow-scripts allow-forms allow-popups allow-downloads")
CONNECT_SECONDS = 5.0
READ_SECONDS = 300.0  # a dashboard's slowest answers (a big log) come well within this
_ANSWERED: dict[int | str, dict[str, Any]] = {200: {
    "description": "The Ray dashboard's answer, as it gave it (any status and type)",
    "content": {"*/*": {}}}}


def _dropped(headers: list[tuple[str, str]], always: frozenset[str]) -> frozenset[str]:
    """The headers not to pass on: ``always``, and those the Connection header names."""
    named = {token.strip().lower() for key, value in headers if key.lower() == "connection"
             for token in value.split(",")}
    return always | frozenset(named)


def forwarded_headers(request: Request) -> list[tuple[str, str]]:
    items = request.headers.items()
    dropped = _dropped(items, NOT_FORWARDED)
    return [(key, value) for key, value in items if key.lower() not in dropped]


def returned_headers(upstream: httpx.Response, name: str) -> list[tuple[bytes, bytes]]:
    items = upstream.headers.multi_items()
    dropped = _dropped(items, NOT_RETURNED)
    kept = []
    for key, value in items:
        if key.lower() in dropped:
            continue
        if key.lower() == "location" and value.startswith("/") and not value.startswith("//"):
            value = dashboard_proxy(name) + value  # the dashboard's own path, proxied
        kept.append((key.lower().encode("latin-1"), value.encode("latin-1")))
    return [*kept, SANDBOX]


def router(ctx: ApiContext) -> APIRouter:
    r = APIRouter()
    service = ctx.service

    def dashboard_of(name: str, request: Request) -> str:
        """The dashboard's base URL, once the caller may use it this way."""
        principal = caller_of(request)
        record = ctx.visible_job(name, principal)
        if request.method not in READS and not (principal.acts_as_admin
                                                or principal.owns(record)):
            raise Forbidden(
                f"only the job's submitter ({record.user}) or an admin may change what runs "
                f"in its Ray cluster (it runs with the pods' environment); {principal.name} "
                "may read its dashboard only", field="name",
                fix="ask the job's submitter, or an admin; or bring up a cluster of your own")
        if record.spec.kind is not JobKind.RAY:
            raise NotFound(f"job {name!r} is a {record.spec.kind.value} job: it has no Ray "
                           "dashboard", field="name", fix="name a job of kind ray")
        remote = unreachable_plane_of(record, service.plane)
        if remote is not None:
            raise NotSupported(
                f"job {name!r} runs on compute plane {remote}, behind a worker: the control "
                "plane cannot reach its Ray dashboard (the worker dials out, and its "
                "connection carries pod commands, reports and logs, not HTTP)", field="name",
                fix=f"submit Ray work from inside the cluster (`phalanx exec {name} -- ray job "
                    "submit ...`), or run the cluster on a plane the control plane reaches")
        dashboard = record.endpoints.get("dashboard")
        if record.status not in (JobStatus.STARTING, JobStatus.RUNNING) or not dashboard:
            raise NotFound(f"job {name!r} has no Ray dashboard now (it is "
                           f"{record.status.value})", field="name",
                           fix="wait until it runs (`phalanx cluster up --wait`, or "
                               "`Cluster.wait_ready()`)")
        return dashboard.rstrip("/")

    async def proxy(name: str, path: str, request: Request) -> Response:
        try:
            base = await to_thread.run_sync(dashboard_of, name, request)  # may read the store
        except NotSupported as exc:
            return error_response(exc)  # an answer, not a failure of the control plane's
        url = httpx.URL(f"{base}/{path}", query=request.url.query.encode("latin-1"))
        has_body = "content-length" in request.headers or \
            "transfer-encoding" in request.headers
        http = httpx.AsyncClient(timeout=httpx.Timeout(READ_SECONDS, connect=CONNECT_SECONDS))
        outgoing = http.build_request(request.method, url, headers=forwarded_headers(request),
                                      content=request.stream() if has_body else None)
        try:
            upstream = await http.send(outgoing, stream=True)
        except httpx.HTTPError as exc:
            await http.aclose()
            # A head still starting answers so for a while (wait_ready polls it): said to the
            # caller, not logged as the control plane's failure.
            return error_response(Unavailable(
                f"the Ray dashboard of job {name!r} did not answer ({type(exc).__name__})",
                field="name", fix=f"check the cluster with `phalanx cluster status {name}`: "
                "its head may be starting, or gone"))

        async def body() -> AsyncIterator[bytes]:
            try:
                async for chunk in upstream.aiter_raw():  # as sent: its encoding kept
                    yield chunk
            finally:
                await close()

        async def close() -> None:
            await upstream.aclose()
            await http.aclose()

        answer = StreamingResponse(body(), status_code=upstream.status_code,
                                   background=BackgroundTask(close))
        answer.raw_headers = returned_headers(upstream, name)
        return answer

    description = ("The Ray dashboard and job-submission API of a Ray job (`kind: ray`), "
                   "proxied: `{path}` is the dashboard's own path (`api/jobs/`, ...). Give "
                   f"Ray's JobSubmissionClient the address `{DASHBOARD_PROXY}` and the "
                   "bearer token as a header.")
    for method in (*READS, *WRITES):
        reads = method in READS
        # One route per method, so each operation has its own id in /openapi.json.
        r.api_route(
            f"{DASHBOARD_PROXY}/{{path:path}}", methods=[method],
            dependencies=needs(Access.READ if reads else Access.WRITE),
            responses={**_ANSWERED, **errors(400, 401, *(() if reads else (403,)), 404, 501,
                                             503)},
            summary=(f"{method} on a Ray job's dashboard" + (
                "" if reads else " (submit or stop Ray jobs: its submitter or an admin)")),
            description=description, response_class=Response,
            operation_id=f"ray_dashboard_{method.lower()}")(proxy)
    return r
