"""The API's edge: what every request meets before its route.

``Guard`` authenticates ``/v1`` (the principal goes into the request's state for the
routes' access checks), bounds request bodies (413 naming the limit: the server's, or the
smaller one of a single job), and answers in the error envelope what no handler caught: a
write that found the state directory full as 507 (``server/storage.py``), anything else
as 500 with the traceback in the server's log.
"""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request, WebSocket
from fastapi.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from phalanx.errors import AuthError, Forbidden, InternalError, PayloadTooLarge, PhalanxError
from phalanx.server.access import PRINCIPAL
from phalanx.server.auth import Authenticator
from phalanx.server.plane_routes import check_plane_key
from phalanx.server.podexec import deny
from phalanx.server.storage import StateDisk
from phalanx.spec.resources import MAX_JOB_SPEC_BYTES

log = logging.getLogger("phalanx.api")


def error_response(exc: PhalanxError) -> JSONResponse:
    """The error envelope ``{"error": {type, message, field, fix}}`` with the error's status."""
    return JSONResponse({"error": exc.to_dict()}, status_code=exc.status_code)


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


class Guard:
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
        if scope["path"].startswith("/v1/") and scope["path"] not in OPEN:
            header = next((v for k, v in scope["headers"] if k == b"authorization"), None)
            try:
                principal = self.auth.verify(bearer(header))
                check_plane_key(principal, scope["path"])
                if scope["type"] == "websocket":
                    # Running commands in pods changes things: never a viewer or a read-only
                    # key. Which jobs' pods, the exec route checks per job.
                    principal.check_writes()
            except (AuthError, Forbidden) as exc:
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
        if declared is not None and declared.isdigit() and int(declared) > cap:
            await error_response(too_large)(scope, receive, send)
            return
        if declared is None and scope.get("method") in ("POST", "PUT", "PATCH"):
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
            full = self.disk.refusal(exc) if self.disk is not None else None
            if full is None:
                # The client gets the envelope; the traceback stays in the server's log.
                log.exception("%s %s failed", scope.get("method"), scope["path"])
            if not started:
                await error_response(full or InternalError(
                    "the control plane failed to answer", fix="see the control plane's log",
                ))(scope, receive, send)


def methods_of(app: FastAPI, request: Request) -> list[str]:
    """Every method some route answers at the request's path (for a 405's ``Allow``)."""
    path = request.scope["path"]
    methods: set[str] = set()
    for route in app.router.routes:
        regex, allowed = getattr(route, "path_regex", None), getattr(route, "methods", None)
        if regex is not None and allowed and regex.match(path):
            methods.update(allowed)
    return sorted(methods)


OPEN = frozenset({"/v1/auth/token"})  # the exchange takes a key, not a token


def bearer(header: bytes | None) -> str:
    text = header.decode("latin-1") if header else ""
    if not text.startswith("Bearer ") or not text[7:].strip():
        raise AuthError("missing token", field="Authorization",
                        fix="send 'Authorization: Bearer <token>': exchange an API key for "
                        "one at POST /v1/auth/token (the SDK and CLI do it themselves)")
    return text[7:].strip()


