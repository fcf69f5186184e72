"""Live pages over Server-Sent Events: one stream per open page, not a poll per table.

The stream renders the page's fragments (``views``) from the control plane's state
once a second and sends only those that changed, each as an event named after the
fragment, which htmx swaps into the element waiting for it. A stream ends after
``STREAM_SECONDS`` and the browser reconnects at once (``retry``): a control plane
shutting down never waits long on an open dashboard.

A pod's log follows over SSE too, through the API's own follower (``server/logstream``)
and its bounds per job and per client.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable

import anyio
from anyio import to_thread
from fastapi import APIRouter, Request
from starlette.responses import Response, StreamingResponse

from phalanx.errors import NotFound, PhalanxError
from phalanx.server.logstream import TEXT, FollowedResponse, LogFollower, stream_logs
from phalanx.server.ui import views
from phalanx.server.ui.context import Dashboard
from phalanx.server.ui.session import Session

SSE = "text/event-stream"
TICK_SECONDS = 1.0
STREAM_SECONDS = 20.0
RETRY_MS = 500
SSE_HEADERS = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}


def sse_event(event: str, data: str) -> bytes:
    """One event; every line of ``data`` goes on a ``data:`` line of its own."""
    lines = "".join(f"data: {line}\n" for line in data.split("\n"))
    return f"event: {event}\n{lines}\n".encode()


def _renderer(d: Dashboard, session: Session, page: str,
              request: Request) -> Callable[[], views.Fragments]:
    if page == "overview":
        return lambda: views.overview(d, session)
    if page == "queues":
        return lambda: views.queues(d, session)
    if page == "jobs":
        query = views.JobsQuery.parse(request.query_params)
        return lambda: views.jobs(d, session, query)
    if page == "nodes":
        return lambda: views.nodes(d, session)
    if page.startswith("job/"):
        name = page.removeprefix("job/")
        return lambda: views.job(d, session, name)
    raise NotFound(f"no live page {page!r}", field="page",
                       fix="open a page of the dashboard")


async def _page_stream(render: Callable[[], views.Fragments], request: Request,
                       seconds: float) -> AsyncIterator[bytes]:
    yield f"retry: {RETRY_MS}\n\n".encode()
    sent: dict[str, str] = {}
    ends = time.monotonic() + seconds
    while time.monotonic() < ends:
        try:
            fragments = await to_thread.run_sync(render)
        except PhalanxError as exc:  # the job was deleted, say: the page says so and stops
            yield sse_event("gone", exc.message)
            return
        for name, html in fragments.items():
            if sent.get(name) != html:
                sent[name] = html
                yield sse_event(name, html)
        if await request.is_disconnected():
            return
        await anyio.sleep(TICK_SECONDS)


def router(d: Dashboard, stream_seconds: float = STREAM_SECONDS) -> APIRouter:
    r = APIRouter()

    @r.get("/live/{page:path}")
    async def live(request: Request, page: str) -> Response:
        session = d.session(request)
        render = _renderer(d, session, page, request)
        return StreamingResponse(_page_stream(render, request, stream_seconds),
                                 media_type=SSE, headers=SSE_HEADERS)

    async def _follower(request: Request, name: str, pod: str | None) -> LogFollower:
        session = d.session(request)
        record = await to_thread.run_sync(d.service.get, name, limiter=d.log_reads)
        if d.visibility.record(record, session) is None:
            raise NotFound(f"no job {name!r} you may see", field="job",
                               fix="pick a job of your teams from the Jobs page")
        await to_thread.run_sync(d.service.flush_logs, limiter=d.log_reads)
        return LogFollower(d.logs, record, pod or None)

    @r.get("/jobs/{name}/log")
    async def log_follow(request: Request, name: str, pod: str | None = None) -> Response:
        """The pod's log as SSE, ``line`` events until the job ends, then ``end``."""
        follower = await _follower(request, name, pod)
        body = stream_logs(follower, follow=True, finished=lambda: d.service.finished(name),
                           flush=d.service.flush_logs, disconnected=request.is_disconnected,
                           limiter=d.log_reads)

        async def events() -> AsyncIterator[bytes]:
            # No retry: a log that ended must not start over when the browser reconnects.
            async for chunk in body:
                text = chunk.decode("utf-8", "replace").rstrip("\n")
                yield sse_event("line", text)
            yield sse_event("end", "the job has ended")

        client = request.client.host if request.client is not None else "unknown"
        d.slots.take(name, client)
        response = FollowedResponse(events(), release=lambda: d.slots.give_back(name, client))
        response.media_type = SSE
        response.headers["content-type"] = SSE
        response.headers.update(SSE_HEADERS)
        return response

    @r.get("/jobs/{name}/log.txt")
    async def log_download(request: Request, name: str, pod: str | None = None) -> Response:
        """The pod's whole log as a file, read from disk as it is sent."""
        follower = await _follower(request, name, pod)
        body = stream_logs(follower, follow=False, finished=lambda: True,
                           flush=d.service.flush_logs, disconnected=request.is_disconnected,
                           limiter=d.log_reads)
        filename = f"{name}-{pod}.log" if pod else f"{name}.log"
        return StreamingResponse(body, media_type=TEXT, headers={
            "Content-Disposition": f'attachment; filename="{filename}"'})

    return r
