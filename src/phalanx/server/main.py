"""Running the control plane: state directory, store, compute plane, HTTP server."""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import signal
import socket
from pathlib import Path

import uvicorn

from phalanx.compute.base import ComputePlane
from phalanx.control import Controller
from phalanx.defaults import (
    DEFAULT_HOST,
    DEFAULT_PORT,
    HOME_ENV,
    SERVER_FILE,
    phalanx_home,
    redact_url,
)
from phalanx.errors import Conflict, SpecError
from phalanx.server.app import create_app
from phalanx.server.auth import ensure_token
from phalanx.store import LogStore, Store


def make_plane(
    compute: str,
    home: Path,
    nodes_file: Path | None = None,
    kubeconfig: Path | None = None,
    namespace: str | None = None,
    default_image: str | None = None,
) -> ComputePlane:
    """Build the compute plane ``serve`` drives; each branch imports only what it needs."""
    if default_image is not None and compute != "kubernetes":
        raise SpecError(
            f"the {compute} compute plane runs commands, not images", field="--default-image",
            fix="use --default-image with --compute kubernetes only",
        )
    if compute == "local":
        from phalanx.compute.local import LocalPlane

        return LocalPlane(home)
    if compute == "simulated":
        from phalanx.compute.simulated import SimulatedPlane

        if nodes_file is None:
            raise SpecError(
                "the simulated compute plane needs its nodes", field="--nodes",
                fix="pass --nodes FILE (a YAML list of nodes)",
            )
        return SimulatedPlane.from_file(nodes_file, logs_root=LogStore.for_home(home).root)
    if compute == "kubernetes":
        from phalanx.compute.kubernetes import KubernetesPlane

        return KubernetesPlane.connect(home=home, kubeconfig=kubeconfig, namespace=namespace,
                                       default_image=default_image)
    raise SpecError(
        f"unknown compute plane {compute!r}", field="--compute",
        fix="use 'local', 'simulated' or 'kubernetes'",
    )


def serve(
    home: Path | None = None,
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    db: str | None = None,
    compute: str = "local",
    nodes_file: Path | None = None,
    grace_seconds: float = 10.0,
    kubeconfig: Path | None = None,
    namespace: str | None = None,
    default_image: str | None = None,
    finished_ttl: float | None = None,
) -> None:
    """Run the control plane in the foreground until SIGINT or SIGTERM.

    ``finished_ttl``: seconds after which finished jobs and their logs are deleted (None or
    0: kept for ever).
    """
    home = phalanx_home(home).resolve()
    home.mkdir(parents=True, exist_ok=True)
    lock = open(home / "server.lock", "w")  # noqa: SIM115 - held for the process lifetime
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        raise Conflict(
            f"a control plane is already running on {home}", field=HOME_ENV,
            fix="use `phalanx status`, or `phalanx down` first",
        ) from None
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    token = ensure_token(home)
    store = Store.for_home(home, db)
    plane = make_plane(compute, home, nodes_file, kubeconfig, namespace, default_image)
    logs = LogStore.for_home(home)
    controller = Controller(store, plane, grace_seconds=grace_seconds, logs=logs,
                            finished_ttl=finished_ttl)
    db_label = redact_url(db) if db else "sqlite"
    app = create_app(controller, token, logs, db_label=db_label)

    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # Accepted connections inherit this; without it small responses wait on delayed ACKs
    # (about 40 ms a request on Linux).
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.bind((host, port))
    real_port = sock.getsockname()[1]
    url_host = f"[{host}]" if ":" in host else host
    info = {
        "url": f"http://{url_host}:{real_port}", "pid": os.getpid(), "compute": compute,
        "db": db_label,
    }
    server_file = home / SERVER_FILE
    server_file.write_text(json.dumps(info) + "\n")
    controller.start()
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False))
    logging.getLogger("phalanx").info("control plane listening on %s", info["url"])
    # uvicorn handles SIGINT/SIGTERM itself and re-raises the signal once it has shut down;
    # a no-op handler underneath lets that re-raise fall through to the cleanup below
    # instead of killing the process before the controller has flushed.
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: None)
    try:
        server.run(sockets=[sock])
    finally:
        controller.stop()
        plane.close()
        store.close()
        with contextlib.suppress(FileNotFoundError):
            server_file.unlink()
        lock.close()
