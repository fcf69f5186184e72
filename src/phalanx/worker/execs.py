"""Commands in this plane's pods (``phalanx exec``), asked for by the control plane.

The worker still only dials out: ``ExecRelay`` long-polls the control plane for commands
(``GET /v1/planes/{plane}/exec``) and, for each, opens the WebSocket
``/v1/planes/{plane}/exec/{session}``, starts the command with its own plane's exec (the
local pod's supervisor socket, or a cluster's pods/exec), says so in a first text message
(``ExecReady``, or the plane's refusal in the API's error form) and from there relays
``phalanx.relay`` frames both ways, one per message, until the command's exit has
gone out or either side went away (which hangs the command up).
"""

from __future__ import annotations

import contextlib
import logging
import threading

from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection

from phalanx import relay
from phalanx.compute.base import ComputePlane, ExecSession
from phalanx.errors import InternalError, PhalanxError
from phalanx.spec.planes import ExecReady, ExecRequest
from phalanx.worker.client import PlaneClient

log = logging.getLogger("phalanx.worker")


class ExecRelay:
    """Takes the control plane's commands for ``plane`` and runs each on a thread of its own."""

    def __init__(self, plane: ComputePlane, client: PlaneClient, stop: threading.Event, *,
                 poll_seconds: float = 25.0, backoff_cap: float = 5.0) -> None:
        self.plane = plane
        self.client = client
        self.stop = stop
        self.poll_seconds = poll_seconds
        self.backoff_cap = backoff_cap

    def run(self) -> None:
        delay = 0.2
        while not self.stop.is_set():
            try:
                requests = self.client.exec_requests(self.poll_seconds)
            except PhalanxError as exc:
                log.warning("cannot ask the control plane for commands: %s", exc)
                self.stop.wait(delay)
                delay = min(delay * 2, self.backoff_cap)
                continue
            delay = 0.2
            for request in requests:
                threading.Thread(target=self.serve, args=(request,), daemon=True,
                                 name=f"phalanx-exec-{request.session[:8]}").start()

    def serve(self, request: ExecRequest) -> None:
        """Run one command and relay it until it ends. Never raises."""
        try:
            conn = self.client.exec_socket(request.session)
        except PhalanxError as exc:
            log.warning("cannot open the session of a command in %s: %s", request.job, exc)
            return
        with conn:
            try:
                session = self.plane.exec(request.job, request.pod, request.argv,
                                          tty=request.tty, cols=request.cols, rows=request.rows)
            except PhalanxError as exc:
                _say(conn, ExecReady(error=exc.to_dict()))
                return
            except Exception as exc:  # the cluster's fault: said to the user, kept in the log
                log.exception("a command in %s did not start", request.job)
                _say(conn, ExecReady(error=InternalError(
                    f"the plane could not start the command: {exc}",
                    fix="see the worker's log").to_dict()))
                return
            try:
                if _say(conn, ExecReady()):
                    relay_frames(conn, session)
            finally:
                session.close()


def _say(conn: ClientConnection, ready: ExecReady) -> bool:
    try:
        conn.send(ready.model_dump_json(by_alias=True, exclude_none=True))
    except (ConnectionClosed, OSError):
        return False
    return True


def relay_frames(conn: ClientConnection, session: ExecSession) -> None:
    """The control plane's frames to the command, the command's to the control plane."""

    def to_command() -> None:
        try:
            for message in conn:
                if isinstance(message, bytes):
                    session.send(message)
        except OSError:
            return  # the command ended: its exit is on its way out
        except (ConnectionClosed, relay.RelayError, ValueError):
            pass
        session.close()  # the user went away: the command is hung up

    threading.Thread(target=to_command, daemon=True, name="phalanx-exec-in").start()
    with contextlib.suppress(OSError, ConnectionClosed, relay.RelayError, ValueError):
        while (frame := session.receive()) is not None:
            conn.send(frame)
