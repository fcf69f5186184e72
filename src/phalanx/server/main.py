"""Running the control plane: state directory, store, compute plane, HTTP server."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import functools
import json
import logging
import os
import signal
import socket
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import IO, Any, ParamSpec

import uvicorn
from fastapi import FastAPI
from starlette.types import ASGIApp

from phalanx.compute.base import AttemptSecrets, PodCredential
from phalanx.compute.factory import compute_plane, make_plane
from phalanx.compute.federation import PlaneSet
from phalanx.compute.remote import PlaneTimers
from phalanx.control import Controller
from phalanx.control.loop import CredentialSource
from phalanx.control.planes import PlaneRegistry, check_timers, current_placement
from phalanx.control.reader import StoredPlaneNames
from phalanx.control.retention import DEFAULT_WORKDIR_RETENTION
from phalanx.defaults import (
    DEFAULT_HOST,
    DEFAULT_PORT,
    DEFAULT_WEBHOOK_PORT,
    HOME_ENV,
    PRIVATE_UMASK,
    SERVER_FILE,
    make_private_dir,
    open_private,
    phalanx_home,
    redact_url,
    replace_private,
    tighten_state_dir,
)
from phalanx.errors import Conflict, SpecError
from phalanx.lazy import imported
from phalanx.server.app import MAX_BODY_BYTES, create_app
from phalanx.server.auth import BOOTSTRAP_USER, TOKEN_TTL, Authenticator
from phalanx.server.jobkeys import JobKeys
from phalanx.server.keys import control_plane_id
from phalanx.server.logstream import LogLimits
from phalanx.server.redaction import SecretEnvRule
from phalanx.server.replicas import (
    Elector,
    FollowerReads,
    LeaderLeases,
    ReplicaApp,
    check_ha_store,
    exit_lost,
    leader_leases,
    parse_leader_lease,
)
from phalanx.server.secrets import SecretVault
from phalanx.server.webhook import WebhookListener, check_cert_dir
from phalanx.spec.base import check_api_url
from phalanx.spec.computeplanes import PlaneOptions
from phalanx.spec.planes import LOCAL_PLANE
from phalanx.spec.status import JobRecord
from phalanx.store import IdentityStore, LogStore, Store
from phalanx.store.leases import DEFAULT_LEASE_SECONDS, Fence, check_lease_seconds
from phalanx.store.planes import PlaneStore
from phalanx.store.workdirs import WorkdirStore

P = ParamSpec("P")

GRACEFUL_SECONDS = 5  # open requests (a worker's long poll) get this long at shutdown


class _Server(uvicorn.Server):
    """uvicorn's server, telling the planes first when asked to stop: while it drains its
    connections, a worker that can no longer reach it must not count as silent."""

    def __init__(self, config: uvicorn.Config, on_exit: Callable[[], None]) -> None:
        super().__init__(config)
        self._on_exit = on_exit

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        self._on_exit()
        super().handle_exit(sig, frame)


def pods_url(host: str, port: int) -> str:
    """The API's URL for pods on this machine: the address listened on, or loopback for
    every address (0.0.0.0, ::)."""
    if host in ("", "0.0.0.0", "::"):
        host = "::1" if host == "::" else "127.0.0.1"
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def pod_credentials(keys: JobKeys, api_url: str, vault: SecretVault | None = None,
                    ) -> CredentialSource:
    """What each launched attempt's pods call ``api_url`` with, and the values of the
    secrets their job names (resolved at each launch; a SpecError fails the attempt)."""
    def credential(record: JobRecord, attempt: int) -> PodCredential:
        secrets = vault.for_attempt(record.spec, record.user) if vault else AttemptSecrets()
        return PodCredential(api_url, keys.key_for(record, attempt), secrets)

    return credential


def _owner_only_files(run: Callable[P, None]) -> Callable[P, None]:
    """``run`` with umask 077: everything it creates in the state directory is owner-only."""

    @functools.wraps(run)
    def private(*args: P.args, **kwargs: P.kwargs) -> None:
        previous = os.umask(PRIVATE_UMASK)
        try:
            run(*args, **kwargs)
        finally:
            os.umask(previous)

    return private


def listen(host: str, port: int) -> socket.socket:
    """The API's socket, bound; a port another program holds is a SpecError naming it."""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # Accepted connections inherit this; without it small responses wait on delayed ACKs
    # (about 40 ms a request on Linux).
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise SpecError(f"port {port} on {host} is already in use", field="--port",
                            fix="stop what listens there, or pass another --port "
                            "(0: any free port)") from None
        raise SpecError(f"cannot listen on {host}:{port}: {exc.strerror}",
                        field="--host/--port", fix="pass an address of this machine and a "
                        "free port (--port 0: any)") from None
    return sock


def _listen_as(host: str, port: int, flag: str) -> socket.socket:
    """``listen``, its refusal naming ``flag``."""
    try:
        return listen(host, port)
    except SpecError as exc:
        raise SpecError(exc.message, field=flag,
                        fix=f"pass another {flag} (0: any free port)") from None


@_owner_only_files
def serve(
    home: Path | None = None,
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    db: str | None = None,
    compute: str = "local",
    grace_seconds: float = 10.0,
    secret_env: Sequence[str] = (),
    max_body_bytes: int = MAX_BODY_BYTES,
    finished_ttl: float | None = None,
    token_ttl: float = TOKEN_TTL,
    interactive: bool = True,
    pod_api_url: str | None = None,
    local_plane: bool = True,
    worker_grace: float = 60.0,
    worker_lost_after: float = 900.0,
    ha: bool = False,
    lease_seconds: float = DEFAULT_LEASE_SECONDS,
    advertise_url: str | None = None,
    leader_lease: str = "store",
    workdir_retention: float | None = DEFAULT_WORKDIR_RETENTION,
    plane_options: PlaneOptions | None = None,
    webhook_cert_dir: Path | None = None,
    webhook_port: int = DEFAULT_WEBHOOK_PORT,
    **more_plane_options: object,
) -> None:
    """Run the control plane in the foreground until SIGINT or SIGTERM.

    ``compute`` names the in-process plane (``spec/computeplanes/``); ``plane_options`` and
    ``more_plane_options`` are its options, by ``PlaneOption.param`` (``nodes_file=``,
    ``run_as_user=``, ``max_pods=``, ...: ``compute/factory.py``'s ``make_plane`` refuses one
    the plane does not take); ``secret_env`` adds names or glob patterns of env
    variables whose values API answers redact (see ``server/redaction.py``);
    ``finished_ttl``: seconds after which finished jobs and their logs are deleted (None or
    0: kept for ever); ``token_ttl``: seconds a token exchanged for an API key lives;
    ``interactive``: whether ``phalanx exec`` may run commands in pods; ``pod_api_url``:
    the API's URL as job pods reach it (default: the address this server listens on, the
    loopback one when it listens on every address); ``local_plane``: whether it runs the
    in-process compute plane ``local`` (False: it only waits for workers, ``phalanx
    worker``); ``worker_grace``/``worker_lost_after``: the timers of planes that dial in
    (``compute/remote.py``); ``ha``: run as one replica of several
    on one PostgreSQL store, leading while it holds the store's lease of ``lease_seconds``
    and advertising ``advertise_url`` (default: the address it listens on) to the others
    (``server/replicas.py``); ``leader_lease``: where that lease is kept, ``store`` or
    ``kubernetes[:NAMESPACE/NAME]`` (a Lease object, ``compute/kubernetes/leader.py``);
    ``workdir_retention``: seconds an uploaded workdir no live job names is kept after its
    last use (None or 0: pruned only when an admin asks); ``webhook_cert_dir``: serve the
    admission webhook over TLS on ``webhook_port`` with the certificate there
    (``server/webhook.py``).
    ``plane_options`` (and any more keywords): the plane's own options, as declared in
    ``spec/computeplanes/``.

    Everything it creates in the state directory is owner-only (umask 077 while it
    runs); an existing state directory with looser modes is tightened, and said so.
    """
    home = phalanx_home(home).resolve()
    make_private_dir(home)
    lock = os.fdopen(open_private(home / "server.lock", os.O_WRONLY), "w")
    try:
        # Replicas (--ha) share the state directory (its keys, the local plane's pods) and
        # the lock; a lone control plane holds it alone.
        fcntl.flock(lock, (fcntl.LOCK_SH if ha else fcntl.LOCK_EX) | fcntl.LOCK_NB)
    except BlockingIOError:
        raise Conflict(
            f"a control plane is already running on {home}", field=HOME_ENV,
            fix="use `phalanx status`, or `phalanx down` first"
                + ("" if ha else " (replicas started with --ha share it)"),
        ) from None
    if ha:
        check_lease_seconds(lease_seconds, "--lease")
        parse_leader_lease(leader_lease)
        if advertise_url is not None:
            check_api_url(advertise_url, "--advertise-url")
    if webhook_cert_dir is not None:
        check_cert_dir(webhook_cert_dir)
    sock = listen(host, port)  # first: a taken port is said before anything starts
    webhook = None if webhook_cert_dir is None else WebhookListener(
        webhook_cert_dir, _listen_as(host, webhook_port, "--webhook-port"))
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    loosened = tighten_state_dir(home)
    if loosened:
        shown = ", ".join(str(p.relative_to(home)) for p in loosened[:5])
        more = f" and {len(loosened) - 5} more" if len(loosened) > 5 else ""
        logging.getLogger("phalanx").warning(
            "tightened %d entries of the state directory %s that others could read or write "
            "to owner-only (directories 0700, files 0600): %s%s",
            len(loosened), home, shown, more,
        )
    store = Store.for_home(home, db)
    if ha:
        check_ha_store(store)
        store.end_idle_transactions_after(lease_seconds / 2)
        kubeconfig = (plane_options or {}).get("kubeconfig") or more_plane_options.get(
            "kubeconfig")
        leases = leader_leases(store, leader_lease,
                               Path(str(kubeconfig)) if kubeconfig else None)
    real_port = sock.getsockname()[1]
    url_host = f"[{host}]" if ":" in host else host
    info: dict[str, object] = {
        "url": f"http://{url_host}:{real_port}", "pid": os.getpid(),
        "compute": compute if local_plane else "workers only",
        "db": redact_url(db) if db else "sqlite",
    }
    if webhook is not None:
        info["webhook"] = f"https://{url_host}:{webhook.port}"
    if compute_plane(compute).pods_elsewhere and pod_api_url is None:
        logging.getLogger("phalanx").warning(
            "no --pod-api-url: job pods are told the API is at %s, which they may not reach "
            "(the deploy values pass the Service's URL)", pods_url(host, real_port))

    def build(term: int | None = None) -> _Leader:
        """The control plane proper: what a lone server runs, and a replica once it leads
        (under ``term``: its local plane refuses to act for an older one)."""
        auth = Authenticator(home, IdentityStore(store), token_ttl=token_ttl)
        timers = PlaneTimers(worker_grace=worker_grace, worker_lost_after=worker_lost_after)
        check_timers(timers)
        plane = PlaneSet()
        if local_plane:
            # The control plane's identity keys the local plane's shared directories (the
            # in-process Kubernetes plane's objects stay untagged, as they always were).
            plane.add(LOCAL_PLANE, make_plane(compute, home, {**(plane_options or {}),
                                                              **more_plane_options},
                                              control_plane=control_plane_id(home),
                                              term=term),
                      qualify=False)
        logs = LogStore.for_home(home)
        planes = PlaneRegistry(plane, PlaneStore(store), timers=timers, logs=logs)
        credentials = pod_credentials(auth.job_keys,
                                      pod_api_url or pods_url(host, real_port), auth.secrets)
        workdirs = WorkdirStore.for_home(home)
        controller = Controller(store, plane, grace_seconds=grace_seconds, logs=logs,
                                finished_ttl=finished_ttl, credentials=credentials,
                                workdirs=workdirs, workdir_retention=workdir_retention,
                                native=getattr(plane.member(LOCAL_PLANE), "native", None))
        auth.attempts = controller.service.running_attempt
        plane.placement_of = current_placement(controller.state, plane)
        app = api(controller, auth, logs, workdirs, planes=planes)
        if webhook is not None:  # the leader's: only it holds what the webhook answers from
            webhook.start(app)
        return _Leader(controller, plane, planes, app)

    def api(controller: Controller, auth: Authenticator, logs: LogStore,
            workdirs: WorkdirStore, **more: Any) -> FastAPI:
        """The HTTP API over ``controller``: the leader's, and a follower's reads."""
        return create_app(controller, auth, logs, db_label=str(info["db"]),
                          secrets=SecretEnvRule(extra=tuple(secret_env)),
                          max_body_bytes=max_body_bytes, log_limits=LogLimits.from_env(),
                          interactive=interactive, control_plane_id=control_plane_id(home),
                          home=home, workdirs=workdirs, **more)

    def build_reads(leader_url: Callable[[], str | None]) -> FollowerReads:
        """A follower's reads: the same routes over the store, every write refused."""
        view = store.reader("this replica follows: it answers reads, and the leader "
                            "makes every change")
        identity = IdentityStore(view)
        # Not before a leader has made the state directory's keys (the admin user comes
        # after them): a follower making them too would race it.
        identity.get_user(BOOTSTRAP_USER)
        auth = Authenticator(home, identity, token_ttl=token_ttl)
        plane = StoredPlaneNames(PlaneStore(view), local_plane=local_plane)
        logs = LogStore.for_home(home)
        controller = Controller(view, plane, logs=logs, reader=True)
        auth.attempts = controller.service.running_attempt
        app = api(controller, auth, logs, WorkdirStore.for_home(home), dashboard=False,
                  leader_url=leader_url)
        # What leading would import first, imported now: the compute plane's modules.
        with contextlib.suppress(ImportError):  # (an extra missing: leading says so)
            imported(compute_plane(compute).build)
        return FollowerReads(app, auth.reload_standing)

    server_file = home / SERVER_FILE
    try:
        if not ha:
            _run_alone(build(), sock, server_file, info, store, lock)
            return
        _run_replica(build, build_reads, sock, server_file, info, store, lock,
                     advertise_url or str(info["url"]), lease_seconds, leases)
    finally:
        if webhook is not None:
            webhook.stop()


@dataclass
class _Leader:
    controller: Controller
    plane: PlaneSet
    planes: PlaneRegistry
    app: ASGIApp


def _write_server_file(server_file: Path, info: dict[str, object]) -> None:
    # Written whole and then renamed: clients poll for this file and must never read half of it.
    replace_private(server_file, json.dumps(info) + "\n", server_file.with_suffix(".json.tmp"))


def _uvicorn(app: ASGIApp, on_exit: Callable[[], None]) -> _Server:
    server = _Server(uvicorn.Config(app, log_level="warning", access_log=False,
                                    timeout_graceful_shutdown=GRACEFUL_SECONDS),
                     on_exit=on_exit)
    # uvicorn handles SIGINT/SIGTERM itself and re-raises the signal once it has shut down;
    # a no-op handler underneath lets that re-raise fall through to the cleanup below
    # instead of killing the process before the controller has flushed.
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: None)
    return server


def _run_alone(leader: _Leader, sock: socket.socket, server_file: Path,
               info: dict[str, object], store: Store, lock: IO[str]) -> None:
    _write_server_file(server_file, info)
    leader.controller.start()
    server = _uvicorn(leader.app, leader.planes.stopping)
    logging.getLogger("phalanx").info("control plane listening on %s", info["url"])
    try:
        server.run(sockets=[sock])
    finally:
        leader.controller.stop()
        leader.plane.close()
        store.close()
        with contextlib.suppress(FileNotFoundError):
            server_file.unlink()
        lock.close()


def _run_replica(build: Callable[[int], _Leader],
                 build_reads: Callable[[Callable[[], str | None]], FollowerReads],
                 sock: socket.socket, server_file: Path, info: dict[str, object],
                 store: Store, lock: IO[str], url: str, lease_seconds: float,
                 leases: LeaderLeases) -> None:
    """Serve as a follower at once; lead (build and start the control plane) once elected."""
    led: list[_Leader] = []

    def lead(fence: Fence) -> None:
        store.fence = fence  # before anything is built: every write from now on is fenced
        began = time.monotonic()
        try:
            leader = build(fence.term)
            _write_server_file(server_file, {**info, "term": fence.term})
            leader.controller.start()
        except Exception as exc:
            logging.getLogger("phalanx").exception("could not start leading")
            exit_lost(f"starting to lead failed: {exc}")
            return
        led.append(leader)
        front.lead(leader.app)
        # The time a takeover costs beyond the lease: what to cut, if anything.
        logging.getLogger("phalanx").info("leading (term %d) at %s (control plane built and "
                                          "started in %.2f s)", fence.term, url,
                                          time.monotonic() - began)

    elector = Elector(store, url, lease_seconds, on_lead=lead, on_lost=exit_lost,
                      leases=leases)
    front = ReplicaApp(elector)

    def hand_over() -> None:
        """A planned stop: refuse new writes, let those under way finish, stop the loop
        (its last write), then release the lease, so a follower leads at its next look
        while this process still drains its connections."""
        began = time.monotonic()
        front.step_down()
        for leader in led:
            leader.controller.stop()
            leader.plane.close()  # pods keep running; the next leader adopts them
        elector.stop()
        if led:
            logging.getLogger("phalanx").info("leadership handed over (lease released "
                                              "%.2f s after the signal)",
                                              time.monotonic() - began)

    handover = threading.Thread(target=hand_over, name="phalanx-handover", daemon=True)

    def stopping() -> None:
        for leader in led:
            leader.planes.stopping()
        if handover.ident is None:  # the first signal only
            handover.start()

    server = _uvicorn(front, stopping)
    logging.getLogger("phalanx").info(
        "replica %s listening on %s (advertised as %s), lease %gs",
        elector.holder, info["url"], url, lease_seconds)
    elector.start()
    stopped = threading.Event()
    threading.Thread(target=front.prepare_reads, name="phalanx-follower-reads", daemon=True,
                     args=(functools.partial(build_reads, elector.leader_url), stopped),
                     ).start()
    try:
        server.run(sockets=[sock])
    finally:
        stopped.set()
        if handover.ident is None:  # stopped otherwise than by a signal
            handover.start()
        handover.join()
        store.close()
        if led:
            with contextlib.suppress(FileNotFoundError):
                server_file.unlink()
        lock.close()
