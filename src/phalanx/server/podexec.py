"""``/v1/jobs/{name}/exec``: a command inside a running pod, over a WebSocket.

The query says what to run: ``command`` (repeated, one word each), ``pod`` (a rank
or a pod name; rank 0 by default), ``tty`` (a terminal, for interactive shells)
and its ``cols``/``rows``. Once accepted, every message either way is one frame of
``phalanx.relay``: the client sends input (``I``, empty at its end) and
terminal sizes (``R``); the server sends output (``1``/``2``) and, last, the exit
(``X``), then closes. The compute plane runs the command (``ComputePlane.exec``); a
plane behind a worker hands back the worker's WebSocket (``plane_exec.py``), which is
relayed on the event loop rather than through threads (``AsyncExecSession``).

Refusals come before the connection is accepted, as HTTP answers in the usual
error envelope (the WebSocket denial response): 401 without the token (the guard),
403 where the control plane was started without interactivity
(``phalanx up --no-interactive``, ``worker.enableRunInteractivity: false``), 404
when the job has no such running pod, 429 past the bound on concurrent sessions.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Protocol, runtime_checkable

import anyio
from anyio import to_thread
from fastapi import FastAPI, WebSocket
from starlette.responses import Response
from starlette.websockets import WebSocketDisconnect

from phalanx import relay
from phalanx.compute.base import ExecSession
from phalanx.control.service import JobService
from phalanx.errors import Forbidden, NotFound, PhalanxError, SpecError, TooManyRequests
from phalanx.server.access import PRINCIPAL
from phalanx.server.principal import Principal

log = logging.getLogger("phalanx.server")

MAX_EXEC_SESSIONS = 32
"""Commands running through the API at once; each holds a thread while it waits for output."""
MAX_TERMINAL = 10_000  # columns or rows: beyond any screen


@runtime_checkable
class AsyncExecSession(Protocol):
    """An ``ExecSession`` spoken to on the event loop (the worker's end of a command)."""

    async def asend(self, frame: bytes) -> None: ...

    async def areceive(self) -> bytes | None: ...

    def close(self) -> None: ...


async def deny(websocket: WebSocket, response: Response) -> None:
    """Refuse a WebSocket before accepting it, with ``response`` (an error envelope) where
    the server can send one, else with a policy-violation close saying why."""
    if "websocket.http.response" in websocket.scope.get("extensions", {}):
        await websocket.send_denial_response(response)
        return
    reason = bytes(response.body).decode("utf-8", "replace")[:120]
    await websocket.close(code=1008, reason=reason)


def _terminal_size(value: str | None, name: str, default: int) -> int:
    if value is None:
        return default
    if not value.isdigit() or not 1 <= int(value) <= MAX_TERMINAL:
        raise SpecError(f"{name}={value!r} is not a terminal size", field=name,
                        fix=f"give a whole number from 1 to {MAX_TERMINAL}")
    return int(value)


def authorize(websocket: WebSocket, service: JobService, name: str) -> None:
    """Only the job's submitter or an admin runs commands in its pods: a command there reads
    the pod's environment, secrets included, which teammates are not shown either. A job
    the caller may not see is answered as one that does not exist."""
    principal = websocket.scope.get("state", {}).get(PRINCIPAL)
    if not isinstance(principal, Principal):
        raise Forbidden("no caller is known for this connection", field="Authorization",
                        fix="connect with a bearer token")
    missing = NotFound(f"job {name!r} does not exist", field="name",
                       fix="check the name with `phalanx jobs`")
    try:
        record = service.get(name)
    except NotFound:
        raise missing from None
    if principal.acts_as_admin or principal.owns(record):
        return
    if not principal.sees(record):
        raise missing
    raise Forbidden(f"only the job's submitter ({record.user}) or an admin may run commands "
                    f"in its pods; {principal.name} may not", field="name",
                    fix="ask the job's submitter, or an admin")


def add_exec_route(
    app: FastAPI, service: JobService, *, interactive: bool,
    error_response: Callable[[PhalanxError], Response],
) -> None:
    """Serve ``/v1/jobs/{name}/exec`` on ``app`` (refusing every call unless ``interactive``)."""
    threads = anyio.CapacityLimiter(MAX_EXEC_SESSIONS)  # each session waits on its pod in one
    running = 0

    @app.websocket("/v1/jobs/{name}/exec")
    async def job_exec(websocket: WebSocket, name: str) -> None:
        nonlocal running
        query = websocket.query_params
        try:
            if not interactive:
                raise Forbidden(
                    "running commands in pods is turned off on this control plane",
                    field="interactivity",
                    fix="start it with interactivity on (phalanx up without --no-interactive; "
                        "on Kubernetes, worker.enableRunInteractivity: true)",
                )
            authorize(websocket, service, name)
            argv = query.getlist("command")
            if not argv or not all(argv):
                raise SpecError("no command to run", field="command",
                                fix="give the command's words as command=...&command=...")
            tty = query.get("tty", "false").lower() in ("1", "true", "yes")
            cols = _terminal_size(query.get("cols"), "cols", 80)
            rows = _terminal_size(query.get("rows"), "rows", 24)
            if running >= MAX_EXEC_SESSIONS:
                raise TooManyRequests(
                    f"{MAX_EXEC_SESSIONS} commands are running through the API already",
                    field="exec", fix="retry once one of them has ended")
            running += 1  # counted from here: the plane's exec below may take a moment
            try:
                # A plane behind a worker waits here for it (seconds): in a thread of the
                # sessions' own, never one of the pool every other route runs in.
                session = await to_thread.run_sync(lambda: service.exec(
                    name, query.get("pod"), argv, tty=tty, cols=cols, rows=rows),
                    limiter=threads)
            except BaseException:
                running -= 1
                raise
        except PhalanxError as exc:
            await deny(websocket, error_response(exc))
            return
        try:
            await websocket.accept()
            await _relay(websocket, session, threads)
        finally:
            running -= 1
            session.close()
            with contextlib.suppress(RuntimeError):
                await websocket.close()


async def _relay(websocket: WebSocket, session: ExecSession,
                 threads: anyio.CapacityLimiter) -> None:
    """Frames both ways until the pod's side ends (after the exit frame) or the client goes."""
    send: Callable[[bytes], Awaitable[None]]
    receive: Callable[[], Awaitable[bytes | None]]
    if isinstance(session, AsyncExecSession):
        send, receive = session.asend, session.areceive
    else:
        def send(data: bytes) -> Awaitable[None]:
            return to_thread.run_sync(session.send, data)

        def receive() -> Awaitable[bytes | None]:
            return to_thread.run_sync(session.receive, limiter=threads)

    async with anyio.create_task_group() as group:

        async def from_client() -> None:
            try:
                while True:
                    await send(await websocket.receive_bytes())
            except OSError:
                return  # the command ended: its exit is still on its way to the client
            except (WebSocketDisconnect, RuntimeError, relay.RelayError, ValueError, KeyError):
                pass
            # The client went away (or sent what is not input): closing the session hangs
            # the command up and ends the other direction.
            session.close()

        async def from_pod() -> None:
            try:
                while (frame := await receive()) is not None:
                    await websocket.send_bytes(frame)
            except (OSError, ValueError) as exc:
                log.debug("exec stream ended: %s", exc)
            group.cancel_scope.cancel()

        group.start_soon(from_client)
        group.start_soon(from_pod)
