"""What every dashboard route shares: the control plane's service, the signed-in session,
the templates, and the one way a page or an action is refused."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

import anyio
from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.requests import Request
from starlette.responses import HTMLResponse

from phalanx.control import Controller, JobService
from phalanx.control.planes import PlaneRegistry, plane_views
from phalanx.errors import PhalanxError
from phalanx.server.logstream import FollowerSlots
from phalanx.server.ui import charts
from phalanx.server.ui.history import History
from phalanx.server.ui.session import CSRF_FIELD, CSRF_HEADER, Session, Sessions
from phalanx.server.ui.visibility import Visibility
from phalanx.spec.planes import PlaneView
from phalanx.store import LogStore

HERE = Path(__file__).parent
PAGES = ("overview", "queues", "jobs", "nodes", "whatif")


class Forbidden(PhalanxError):
    """The session may not do this (its role, or no CSRF token)."""

    status_code = 403


class SignInNeeded(Exception):
    """No valid session: a page sends the browser to the sign-in form."""


@dataclass
class Dashboard:
    controller: Controller
    logs: LogStore
    sessions: Sessions
    visibility: Visibility
    history: History
    slots: FollowerSlots
    log_reads: anyio.CapacityLimiter
    templates: Environment
    planes: PlaneRegistry | None = None  # the compute planes (clusters); None: not served

    @property
    def service(self) -> JobService:
        return self.controller.service

    def plane_views(self) -> list[PlaneView]:
        """Every compute plane as ``GET /v1/planes`` has it; none without a registry."""
        return plane_views(self.planes, self.service) if self.planes is not None else []

    def session(self, request: Request) -> Session:
        session = self.sessions.session_of(request)
        if session is None:
            raise SignInNeeded()
        return session

    async def acting(self, request: Request) -> tuple[Session, dict[str, Any]]:
        """The session of an action (a POST) and its form, refused without the session's
        CSRF token (in the form's ``csrf`` field or the ``X-CSRF-Token`` header)."""
        session = self.session(request)
        refuse_cross_site(request)
        form = dict(await request.form())
        sent = form.get(CSRF_FIELD) or request.headers.get(CSRF_HEADER)
        if not self.sessions.csrf_ok(session, sent if isinstance(sent, str) else None):
            raise Forbidden("the request carries no valid CSRF token", field=CSRF_FIELD,
                            fix="act from the dashboard's own pages (reload the page if it "
                                "was open before you signed in again)")
        return session, form

    def page(self, request: Request, template: str, session: Session | None,
             status_code: int = 200, **values: Any) -> HTMLResponse:
        html = self.templates.get_template(template).render(
            session=session, csrf=self.sessions.csrf_token(session) if session else "",
            path=request.url.path, query=request.url.query, **values)
        return HTMLResponse(html, status_code=status_code, headers=SECURITY_HEADERS)

    def fragment(self, template: str, session: Session, **values: Any) -> str:
        return self.templates.get_template(template).render(
            session=session, csrf=self.sessions.csrf_token(session), **values)


def refuse_cross_site(request: Request) -> None:
    """Refuse a POST that a page of another site made the browser send (browsers say so in
    ``Sec-Fetch-Site``): defence in depth beside the CSRF token, and the only defence of
    the sign-in form, which has no session yet."""
    if request.headers.get("sec-fetch-site") in ("cross-site", "same-site"):
        raise Forbidden("the request came from a page of another site", field="Origin",
                        fix="act from the dashboard's own pages")


def error_page(dashboard: Dashboard, request: Request, exc: PhalanxError) -> HTMLResponse:
    session = dashboard.sessions.session_of(request)
    return dashboard.page(request, "error.html", session, status_code=exc.status_code,
                          error=exc)


def safe_next(target: str | None) -> str:
    """Where to go after signing in or acting: a dashboard path only (never another site)."""
    if not target:
        return "/ui/"
    parts = urlsplit(target)
    if parts.scheme or parts.netloc or not parts.path.startswith("/ui"):
        return "/ui/"
    return target


def sign_in_url(request: Request) -> str:
    back = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    return f"/ui/login?next={quote(back, safe='')}"


# The dashboard's own scripts and styles only; htmx adds a style element, hence
# 'unsafe-inline' for styles (never for scripts).
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; script-src 'self'; "
                               "style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
                               "frame-ancestors 'none'; form-action 'self'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}


def template_environment() -> Environment:
    env = Environment(loader=FileSystemLoader(HERE / "templates"),
                      autoescape=select_autoescape(["html"]), trim_blocks=True,
                      lstrip_blocks=True)
    env.globals.update(pages=PAGES, age=charts.age, clock=charts.clock,
                       quantity=charts.quantity, usage_bar=charts.usage_bar)
    return env
