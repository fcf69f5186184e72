"""The dashboard's pages (GET) and signing in and out."""

from __future__ import annotations

from anyio import to_thread
from fastapi import APIRouter, Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from phalanx.errors import AuthError
from phalanx.server.ui import views
from phalanx.server.ui.context import (
    SECURITY_HEADERS,
    Dashboard,
    refuse_cross_site,
    safe_next,
)


def router(d: Dashboard) -> APIRouter:
    r = APIRouter()

    @r.get("/login")
    def login_form(request: Request, next: str | None = None) -> HTMLResponse:
        return d.page(request, "login.html", None, next=safe_next(next), error=None)

    @r.post("/login")
    async def login(request: Request) -> Response:
        refuse_cross_site(request)
        form = await request.form()
        key = str(form.get("key", ""))
        target = safe_next(str(form.get("next", "")) or None)
        client = request.client.host if request.client is not None else "-"
        session = d.sessions.sign_in(key, client)
        if session is None:
            error = AuthError("that API key is not valid here", field="key",
                              fix="paste your API key (`phalanx keys create` makes one), or "
                                  "the admin key in $PHALANX_HOME/token (phalanx ui prints "
                                  "where it is)")
            return d.page(request, "login.html", None, status_code=401, next=target,
                          error=error)
        response = RedirectResponse(target, status_code=303, headers=SECURITY_HEADERS)
        d.sessions.set_cookie(response, request, session)
        return response

    @r.post("/logout")
    async def logout(request: Request) -> Response:
        await d.acting(request)
        response = RedirectResponse("/ui/login", status_code=303)
        d.sessions.clear_cookie(response)
        return response

    @r.get("/")
    async def overview(request: Request) -> HTMLResponse:
        session = d.session(request)
        fragments = await to_thread.run_sync(views.overview, d, session)
        return d.page(request, "overview.html", session, page="overview", fragments=fragments,
                      live="overview")

    @r.get("/queues")
    async def queues(request: Request) -> HTMLResponse:
        session = d.session(request)
        fragments = await to_thread.run_sync(views.queues, d, session)
        return d.page(request, "queues.html", session, page="queues", fragments=fragments,
                      live="queues")

    @r.get("/jobs")
    async def jobs(request: Request) -> HTMLResponse:
        session = d.session(request)
        query = views.JobsQuery.parse(request.query_params)
        fragments = await to_thread.run_sync(views.jobs, d, session, query)
        return d.page(request, "jobs.html", session, page="jobs", fragments=fragments,
                      live="jobs", jobs_query=query, statuses=views.JobStatus,
                      kinds=views.JobKind)

    @r.get("/jobs/{name}")
    async def job(request: Request, name: str) -> HTMLResponse:
        session = d.session(request)
        fragments = await to_thread.run_sync(views.job, d, session, name)
        record = d.visibility.record(await to_thread.run_sync(d.service.get, name), session)
        assert record is not None  # views.job refused a job the session may not see
        return d.page(request, "job.html", session, page="jobs", fragments=fragments,
                      live=f"job/{name}", job=record, spec_yaml=views.spec_yaml(record),
                      pods=views.job_pods(record))

    @r.get("/nodes")
    async def nodes(request: Request) -> HTMLResponse:
        session = d.session(request)
        fragments = await to_thread.run_sync(views.nodes, d, session)
        return d.page(request, "nodes.html", session, page="nodes", fragments=fragments,
                      live="nodes")

    return r
