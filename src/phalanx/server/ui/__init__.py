"""The web dashboard, served by the control plane at ``/ui`` (same origin as ``/v1``).

Server-rendered pages (Jinja2) with htmx, which ships in ``static/`` (no Node.js, nothing
fetched at run time); live updates over Server-Sent Events, one stream per open page;
charts as inline SVG drawn on the server. ``docs/dashboard.md`` says what each page
shows and how signing in works.
"""

from __future__ import annotations

import hashlib
import hmac

import anyio
from fastapi import FastAPI, Request
from fastapi.staticfiles import StaticFiles
from starlette.responses import RedirectResponse, Response

from phalanx.control import Controller
from phalanx.control.planes import PlaneRegistry
from phalanx.errors import PhalanxError
from phalanx.server.auth import Authenticator
from phalanx.server.logstream import FollowerSlots
from phalanx.server.redaction import SecretEnvRule
from phalanx.server.ui import actions, live, pages, whatif
from phalanx.server.ui.context import (
    HERE,
    Dashboard,
    SignInNeeded,
    error_page,
    sign_in_url,
    template_environment,
)
from phalanx.server.ui.history import AdmissionCounter, History
from phalanx.server.ui.session import Sessions
from phalanx.server.ui.visibility import Visibility
from phalanx.store import LogStore

MOUNT = "/ui"


def create_ui(
    controller: Controller, logs: LogStore, token: str, *, secrets: SecretEnvRule,
    slots: FollowerSlots, log_reads: anyio.CapacityLimiter, sample_history: bool = True,
    authenticator: Authenticator | None = None, planes: PlaneRegistry | None = None,
) -> FastAPI:
    """The dashboard as an app of its own, to mount at ``MOUNT``; it shares the API's log
    follower bounds (``slots``) and disk readers (``log_reads``), and shows the compute
    planes of ``planes``."""
    service = controller.service
    history = History(service, AdmissionCounter(controller.metrics.registry))
    if sample_history:
        history.start()
    hidden_key = hmac.new(token.encode(), b"phalanx hidden job names", hashlib.sha256).digest()
    d = Dashboard(
        controller=controller, logs=logs, sessions=Sessions(token, authenticator=authenticator),
        visibility=Visibility(hidden_key, secrets), history=history, slots=slots,
        log_reads=log_reads, templates=template_environment(), planes=planes,
    )
    app = FastAPI(openapi_url=None, docs_url=None, redoc_url=None)
    app.mount("/static", StaticFiles(directory=HERE / "static"), name="static")
    for module in (pages, actions, live, whatif):
        app.include_router(module.router(d))

    @app.exception_handler(SignInNeeded)
    async def sign_in(request: Request, _: SignInNeeded) -> Response:
        if request.method != "GET" or request.url.path.startswith(f"{MOUNT}/live/"):
            return Response("sign in first", status_code=401, media_type="text/plain")
        return RedirectResponse(sign_in_url(request), status_code=303)

    @app.exception_handler(PhalanxError)
    async def refused(request: Request, exc: PhalanxError) -> Response:
        return error_page(d, request, exc)

    return app
