"""The admission webhook over TLS: a second listener, for the API server's calls only.

The API server calls admission webhooks over HTTPS, checking the certificate against the
webhook configuration's ``caBundle`` (``phalanx k8s render`` makes both, or cert-manager
does: docs/kubernetes.md). With ``--webhook-cert-dir`` the control plane serves the
``/admission/`` routes of its own app on a separate port over TLS (``tls.crt`` and
``tls.key`` in that directory, as a ``kubernetes.io/tls`` Secret mounts them); every other
path there is 404, and the API itself stays where it was. The listener runs in its own
thread and event loop, without the app's lifespan (which the main server runs).
"""

from __future__ import annotations

import logging
import socket
import ssl
import threading
import time
from pathlib import Path

import uvicorn
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from phalanx.errors import SpecError

log = logging.getLogger("phalanx.server")

CERT_FILE = "tls.crt"
KEY_FILE = "tls.key"
PREFIX = "/admission/"


def check_cert_dir(directory: Path) -> tuple[Path, Path]:
    """The certificate and key files in ``directory``; a SpecError naming what is missing."""
    cert, key = directory / CERT_FILE, directory / KEY_FILE
    missing = [p.name for p in (cert, key) if not p.is_file()]
    if missing:
        raise SpecError(f"{directory} has no {' or '.join(missing)}",
                        field="--webhook-cert-dir",
                        fix="name the directory a kubernetes.io/tls Secret is mounted at "
                        f"({CERT_FILE} and {KEY_FILE}, PEM)")
    return cert, key


class _AdmissionOnly:
    """``app`` for the ``/admission/`` paths; 404 for anything else."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"].startswith(PREFIX):
            await self.app(scope, receive, send)
            return
        if scope["type"] == "http":
            await JSONResponse({"error": {"type": "NotFound", "message": "only admission "
                                          "webhook calls are served on this port"}},
                               status_code=404)(scope, receive, send)


class WebhookListener:
    """Serves the admission routes of an app over TLS on its own socket."""

    def __init__(self, cert_dir: Path, sock: socket.socket) -> None:
        self.cert, self.key = check_cert_dir(cert_dir)
        try:  # read now: a bad pair is said at start, before anything runs
            ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(
                self.cert, self.key)
        except (OSError, ValueError) as exc:
            raise SpecError(f"cannot serve TLS with {self.cert} and {self.key}: {exc}",
                            field="--webhook-cert-dir",
                            fix="mount a matching PEM certificate and key") from None
        self.sock = sock
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self.sock.getsockname()[1])

    def start(self, app: ASGIApp) -> None:
        config = uvicorn.Config(_AdmissionOnly(app), log_level="warning", access_log=False,
                                lifespan="off", ssl_certfile=str(self.cert),
                                ssl_keyfile=str(self.key))
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run,
                                        kwargs={"sockets": [self.sock]},
                                        name="phalanx-webhook", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started and self._thread.is_alive() \
                and time.monotonic() < deadline:  # listening when this returns
            time.sleep(0.01)
        log.info("admission webhook listening on port %d (TLS)", self.port)

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
