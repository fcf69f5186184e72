"""Commands in the pods of a plane behind a worker: the worker's two exec routes.

``phalanx exec`` into such a pod reaches ``/v1/jobs/{name}/exec`` (``podexec.py``) as
any other; the plane set hands it to the pod's ``RemotePlane``, which leaves the command
for the worker and waits. The worker, which only dials out:

- long-polls ``GET /v1/planes/{name}/exec`` for commands (each is handed out once);
- opens the WebSocket ``/v1/planes/{name}/exec/{session}`` for each, starts it with its
  own plane's exec and says so in its first (text) message, an ``ExecReady``; from there
  every message is one ``phalanx.relay`` frame, as on the user's WebSocket, which
  the exec route bridges to this one frame for frame (``WorkerChannel``).

Both need the key of the plane the path names: a wrong key is refused by the guard (401),
another plane's key too (403, ``check_plane_key``), and so is any user's here (403).
A session that is unknown, timed out or taken already is not found (404).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable
from typing import Any

import anyio
from anyio import to_thread
from fastapi import FastAPI, Query, WebSocket
from starlette.responses import Response
from starlette.websockets import WebSocketDisconnect

from phalanx import errors, relay
from phalanx.control.planes import PlaneRegistry
from phalanx.errors import Forbidden, NotFound, PhalanxError, ServerError
from phalanx.server.access import PRINCIPAL, Access, needs
from phalanx.server.podexec import deny
from phalanx.server.principal import Principal
from phalanx.spec.planes import ExecReady, ExecRequests, plane_scope

MAX_WAIT = 60.0


class WorkerChannel:
    """The worker's end of a running command: frames over its WebSocket.

    The exec route relays through ``asend``/``areceive`` on the event loop; ``send`` and
    ``receive`` are the same for a thread other than the loop's (``ExecSession``).
    ``close`` (from anywhere) ends the worker's connection, which hangs the command up.
    """

    def __init__(self, websocket: WebSocket) -> None:
        self._websocket = websocket
        self._loop = asyncio.get_running_loop()
        self._closed = asyncio.Event()

    async def asend(self, frame: bytes) -> None:
        """Input or a terminal size for the command; OSError once its stream has ended."""
        kind, _ = relay.split_frame(frame)
        if kind not in (relay.STDIN, relay.RESIZE):
            raise relay.RelayError(f"a client may send input or a terminal size, not {kind!r}")
        if self._closed.is_set():
            raise OSError("the command's stream has ended")
        try:
            await self._websocket.send_bytes(frame)
        except (RuntimeError, WebSocketDisconnect) as exc:
            raise OSError(f"the command's stream has ended: {exc}") from None

    async def areceive(self) -> bytes | None:
        """The command's next output or exit frame; None once the worker's side ended."""
        while not self._closed.is_set():
            try:
                message = await self._websocket.receive()
            except (RuntimeError, OSError):
                break
            if message["type"] == "websocket.disconnect":
                break
            data = message.get("bytes")
            if data is not None:
                relay.split_frame(data)  # a whole frame, or ValueError/RelayError
                return bytes(data)
        self.close()
        return None

    def send(self, frame: bytes) -> None:
        asyncio.run_coroutine_threadsafe(self.asend(frame), self._loop).result()

    def receive(self) -> bytes | None:
        return asyncio.run_coroutine_threadsafe(self.areceive(), self._loop).result()

    def close(self) -> None:
        self._loop.call_soon_threadsafe(self._closed.set)

    async def wait_closed(self) -> None:
        await self._closed.wait()


def error_of(found: dict[str, Any]) -> PhalanxError:
    """The plane's refusal, as the error the worker's plane raised (ServerError if unknown)."""
    kind = errors.ERROR_TYPES.get(str(found.get("type")), ServerError)
    message = str(found.get("message") or "the worker's plane refused the command")
    field, fix = found.get("field"), found.get("fix")
    return kind(message, field=str(field) if field else None, fix=str(fix) if fix else None)


def add_plane_exec_routes(
    app: FastAPI, registry: PlaneRegistry, polls: anyio.CapacityLimiter,
    errors_of: Callable[..., dict[int | str, dict[str, Any]]],
    error_response: Callable[[PhalanxError], Response],
) -> None:
    """Serve the worker's exec routes; its long polls wait in threads of ``polls``."""

    @app.get("/v1/planes/{name}/exec", dependencies=needs(Access.PLANE),
             responses=errors_of(400, 401, 403, 404))
    async def exec_requests(name: str, wait: float = Query(default=25.0, ge=0, le=MAX_WAIT),
                            ) -> ExecRequests:
        """Commands to run in the plane's pods, each handed out once (a long poll of ``wait``
        s); the worker opens ``/v1/planes/{name}/exec/{session}`` for each."""
        remote = registry.remote(name)
        found = await to_thread.run_sync(remote.exec_requests, wait, limiter=polls)
        return ExecRequests(sessions=found)

    @app.websocket("/v1/planes/{name}/exec/{session}")
    async def worker_exec(websocket: WebSocket, name: str, session: str) -> None:
        try:
            principal = websocket.scope.get("state", {}).get(PRINCIPAL)
            if not isinstance(principal, Principal) or principal.scope != plane_scope(name):
                who = principal.name if isinstance(principal, Principal) else "the caller"
                raise Forbidden(f"this needs the key of compute plane {name}; {who}'s is not",
                                field="Authorization",
                                fix=f"use the key `phalanx plane add {name}` wrote")
            remote = registry.remote(name)
            if remote.take_exec(session) is None:
                raise NotFound(f"no command of compute plane {name} waits as session "
                               f"{session!r}", field="session",
                               fix="it ended or timed out: run `phalanx exec` again")
        except PhalanxError as exc:
            await deny(websocket, error_response(exc))
            return
        await websocket.accept()
        channel = WorkerChannel(websocket)
        try:
            with anyio.fail_after(remote.exec_start):
                first = await websocket.receive_text()
            ready = ExecReady.model_validate(json.loads(first))
        except (TimeoutError, WebSocketDisconnect, RuntimeError, KeyError, ValueError) as exc:
            remote.exec_ready(session, error=ServerError(
                f"the worker of compute plane {name} did not start the command: "
                f"{type(exc).__name__} {exc}", field="pod", fix="see the worker's log"))
        else:
            if ready.error is not None:
                remote.exec_ready(session, error=error_of(ready.error))
            elif remote.exec_ready(session, channel):
                await channel.wait_closed()  # the exec route relays until then
        with contextlib.suppress(RuntimeError, OSError):
            await websocket.close()


__all__ = ["WorkerChannel", "add_plane_exec_routes", "error_of"]
