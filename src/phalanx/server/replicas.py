"""Several replicas of the control plane on one store: the election and the front door.

``phalanx up --ha`` starts a replica. Each listens at once, and an ``Elector`` thread
watches the store's lease (``store/leases.py``): a follower reads it every 0.1 s (or third
of the lease, if shorter) without a lock and contends for it once it is free or expired,
the leader renews it every third of the lease. The one that holds it leads: it sets the
store's fence to its term, builds the control plane (store, planes, loop, routes: what a
restart builds, adopting what the planes run), and from then on ``ReplicaApp`` hands
every request to that. The others follow: ``/healthz`` answers 200 (the process lives),
``/readyz`` 503, the reads of ``FOLLOWER_READS`` are answered by the leader's own routes
over a view of the store that refuses writes (``FollowerReads``), and every other request
is redirected (307, method and body kept) to the URL the leader advertises in the lease;
with no live leader known, 503 ``NotLeader`` with ``Retry-After``, which clients retry.

A leader that cannot renew its lease before it runs out, or finds another holder, stops
at once (``os._exit``): its writes are refused by the fence anyway, and a supervisor
(systemd, Kubernetes) restarts it as a follower. A leader whose store cannot be reached
for less than that is not ready (``/readyz``) and is ready again once it answers. SIGTERM
hands over (``ReplicaApp.step_down``, then ``server/main.py`` stops the loop and releases
the lease), so a follower leads at its next look rather than after the lease's period.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Protocol
from urllib.parse import quote

import anyio
from anyio import to_thread
from fastapi import FastAPI
from fastapi.routing import APIRoute
from starlette.routing import Match
from starlette.types import ASGIApp, Receive, Scope, Send

from phalanx.errors import NotLeader, SpecError
from phalanx.store import Store
from phalanx.store.engine import is_sqlite
from phalanx.store.leases import NOT_LEADER_FIX, Fence, Lease, LeaseStore

log = logging.getLogger("phalanx.replicas")

EXIT_LOST_LEADERSHIP = 75  # EX_TEMPFAIL: restart me (as a follower)
RETRY_AFTER_SECONDS = 1
# A follower reads the lease (a plain read, no lock) this often, and contends for it only
# once it is free or has run out: a released lease is taken within this, and the leader's
# fenced writes never wait on a follower's look.
FOLLOWER_POLL_SECONDS = 0.1
STORE_RETRY_SECONDS = 1.0
# At a planned stop, the writes already under way get this long to finish before the
# leader stops its loop and releases the lease (new writes are refused from the start).
HANDOVER_DRAIN_SECONDS = 3.0
# A replica that holds the lease and is still building its control plane holds a request
# this long for it (checking every BUILDING_POLL_SECONDS) rather than answer 503 at once:
# the client would wait a round of its URLs and a pause before sending it again.
BUILDING_WAIT_SECONDS = 10.0
BUILDING_POLL_SECONDS = 0.01
READS = frozenset({"GET", "HEAD", "OPTIONS"})


def replica_id() -> str:
    """A name for this process among the replicas: host, pid and a random part (a pid may
    be reused after a restart; the lease must not think the new process held it)."""
    return f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(3)}"


def check_ha_store(store: Store) -> None:
    if is_sqlite(store.engine):
        raise SpecError(
            "--ha needs a store every replica reaches: a SQLite file belongs to one "
            "process on one machine, and replicas on it could neither share it safely nor "
            "take over when its machine is lost",
            field="--db", fix="pass --db postgresql://USER@HOST:PORT/DATABASE, or drop --ha",
        )


class LeaderLeases(Protocol):
    """Where the leader's lease is kept: the store's row (``LeaseStore``) or a Kubernetes
    Lease mirrored into it (``compute/kubernetes/leader.py``)."""

    @property
    def store(self) -> Store: ...

    def read(self) -> Lease | None: ...

    def try_acquire(self, holder: str, url: str, seconds: float) -> Lease: ...

    def release(self, fence: Fence) -> bool: ...


def parse_leader_lease(kind: str) -> tuple[str, str | None, str | None]:
    """``--leader-lease``: ``store``, ``kubernetes`` or ``kubernetes:NAMESPACE/NAME``, as
    (kind, namespace, name)."""
    base, _, where = kind.partition(":")
    namespace, _, name = where.partition("/")
    if kind == "store" or (base == "kubernetes" and (not where or (namespace and name))):
        return base, namespace or None, name or None
    raise SpecError(f"is {kind!r}", field="--leader-lease",
                    fix="write store, kubernetes, or kubernetes:NAMESPACE/NAME")


def leader_leases(store: Store, kind: str, kubeconfig: Path | None = None) -> LeaderLeases:
    """The leases ``--leader-lease`` names: ``store`` (the default), or ``kubernetes`` /
    ``kubernetes:NAMESPACE/NAME`` (a Lease in the control plane's namespace, by default the
    one its credentials name, called ``phalanx-control-plane``)."""
    base, namespace, name = parse_leader_lease(kind)
    if base == "store":
        return LeaseStore(store)
    # The kubernetes extra loads only for an install that asks for its Lease.
    from phalanx.compute.kubernetes.client import KubeClient, configure
    from phalanx.compute.kubernetes.leader import DEFAULT_NAME, KubeLeaderLease

    configuration, own_namespace = configure(kubeconfig=kubeconfig)
    return KubeLeaderLease(KubeClient(configuration), namespace or own_namespace or "default",
                           LeaseStore(store), name or DEFAULT_NAME)


class Elector:
    """Contends for the lease and keeps it; calls ``on_lead`` (in a thread of its own)
    when this replica starts leading and ``on_lost`` when it stops before being asked."""

    def __init__(
        self, store: Store, url: str, lease_seconds: float, *,
        on_lead: Callable[[Fence], None], on_lost: Callable[[str], None],
        holder: str | None = None, leases: LeaderLeases | None = None,
    ) -> None:
        self.leases: LeaderLeases = leases if leases is not None else LeaseStore(store)
        self.holder = holder or replica_id()
        self.url = url
        self.lease_seconds = lease_seconds
        self.on_lead, self.on_lost = on_lead, on_lost
        self.fence: Fence | None = None
        self.seen: Lease | None = None  # the lease as last read
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def retry_seconds(self) -> float:
        """The leader renews every third of the lease; a follower looks every
        ``FOLLOWER_POLL_SECONDS``, so it takes a released or expired lease soon after."""
        third = self.lease_seconds / 3
        if self.fence is None:
            return min(FOLLOWER_POLL_SECONDS, third)
        # A leader whose store failed tries again soon: it is ready again once it answers.
        return min(STORE_RETRY_SECONDS, third) if self.leases.store.unavailable else third

    def leader_url(self) -> str | None:
        """Where the live leader answers, as last seen; None if none is known to live."""
        seen = self.seen
        if seen is None or seen.expired(time.time()) or seen.holder == self.holder:
            return None
        return seen.url

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="phalanx-elector", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop contending and, if leading, release the lease for a follower to take."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        if self.fence is not None:
            try:
                self.leases.release(self.fence)
            except Exception:  # the lease then runs out by itself
                log.exception("could not release the lease")

    def _look(self) -> Lease:
        """The lease after this try: a follower that sees another live holder only reads
        it (no lock); otherwise renew it or contend for it."""
        if self.fence is None:
            seen = self.leases.read()
            if seen is not None and seen.holder != self.holder \
                    and not seen.expired(time.time()):
                return seen
        return self.leases.try_acquire(self.holder, self.url, self.lease_seconds)

    def _run(self) -> None:
        valid_until = 0.0  # monotonic: until when this replica's lease surely holds
        while not self._stop.is_set():
            tried = time.monotonic()
            try:
                lease = self._look()
            except Exception as exc:
                log.warning("could not renew or read the lease: %s", exc)
                if self.fence is not None and time.monotonic() >= valid_until:
                    self.on_lost("the lease ran out while it could not be renewed")
                    return
            else:
                self.seen = lease
                if lease.holder == self.holder:
                    valid_until = tried + self.lease_seconds
                    if self.fence is None:
                        self.fence = Fence(lease.name, self.holder, lease.term)
                        log.info("this replica leads, term %d", lease.term)
                        threading.Thread(target=self.on_lead, args=(self.fence,),
                                         name="phalanx-lead", daemon=True).start()
                    elif lease.term != self.fence.term:  # cannot happen: ids are unique
                        self.on_lost(f"the lease moved to term {lease.term}")
                        return
                elif self.fence is not None:
                    self.on_lost(f"{lease.holder} took the lease, term {lease.term}")
                    return
            self._stop.wait(self.retry_seconds)


def exit_lost(reason: str) -> None:
    """Stop this process now: it no longer leads (its writes would be refused anyway)."""
    log.critical("leadership lost (%s): exiting so this replica restarts as a follower",
                 reason)
    logging.shutdown()
    os._exit(EXIT_LOST_LEADERSHIP)


# The leader's routes a follower answers itself (GET and HEAD only), from the store: each
# is a read of stored rows alone. Every other route needs the leader's loop (queues'
# usage, pending reasons of this moment, nodes, the status), its planes (logs, exec, the
# workers' routes, the Ray proxy, the planes' connections) or writes: those go to the
# leader. A read among these that finds it needs the leader after all (the pods of a live
# job) raises ``LeaderOnly`` and is redirected too.
FOLLOWER_READS = frozenset({
    "/v1/version", "/v1/jobs", "/v1/jobs/{name}", "/v1/jobs/{name}/events", "/v1/pools",
    "/v1/auth/whoami", "/v1/users", "/v1/keys", "/v1/teams", "/v1/audit",
})
STANDING_SECONDS = 0.5  # a follower reads revocations again at most this often


class FollowerReads:
    """The routes of ``FOLLOWER_READS`` of an app built as the leader's is, over a store
    that refuses writes (``Store.reader``), with ``reload`` (the authenticator's standing)
    called at most every ``STANDING_SECONDS`` before a request."""

    def __init__(self, app: FastAPI, reload: Callable[[], None]) -> None:
        self.app = app
        self.reload = reload
        self.routes = [route for route in app.state.api_routes if isinstance(route, APIRoute)
                       and route.path in FOLLOWER_READS and "GET" in (route.methods or ())]
        missing = FOLLOWER_READS - {route.path for route in self.routes}
        if missing:
            raise ValueError(f"no GET route {sorted(missing)} to serve on followers")
        self._reloaded = -STANDING_SECONDS

    def serves(self, scope: Scope) -> bool:
        if scope["type"] != "http" or scope.get("method") not in ("GET", "HEAD"):
            return False
        probe = {**scope, "method": "GET"}
        return any(route.matches(probe)[0] is Match.FULL for route in self.routes)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if time.monotonic() - self._reloaded >= STANDING_SECONDS:
            await to_thread.run_sync(self.reload)
            self._reloaded = time.monotonic()
        await self.app(scope, receive, send)


class ReplicaApp:
    """The ASGI app of a replica: the control plane's app once leading; before, the
    follower's answers (``/healthz``, ``/readyz``, redirects to the leader)."""

    def __init__(self, elector: Elector) -> None:
        self.elector = elector
        self.leader_app: ASGIApp | None = None
        self.stepping_down = False  # a planned stop: new writes are refused
        self.reads: FollowerReads | None = None  # once built (prepare_reads)
        self.writes_in_flight = 0  # requests that may write, handed to the leader's app

    def lead(self, app: ASGIApp) -> None:
        self.leader_app = app

    def prepare_reads(self, build: Callable[[], FollowerReads],
                      stop: threading.Event) -> None:
        """Build the follower's reads, trying again every second until it can (the store
        may not be reachable yet, or no leader has made the admin user yet); then every
        read in ``FOLLOWER_READS`` is answered here rather than redirected."""
        while self.leader_app is None and not stop.is_set():
            try:
                self.reads = build()
                return
            except Exception as exc:  # redirected meanwhile
                log.info("this follower does not answer reads yet: %s", exc)
            stop.wait(1.0)

    def step_down(self, drain_seconds: float = HANDOVER_DRAIN_SECONDS) -> None:
        """Refuse new writes (503 ``NotLeader``, which clients retry elsewhere) and wait,
        up to ``drain_seconds``, for those under way to finish: called from a thread other
        than the server's before the loop stops and the lease is released."""
        self.stepping_down = True
        deadline = time.monotonic() + drain_seconds
        while self.writes_in_flight and time.monotonic() < deadline:
            time.sleep(0.01)

    async def _built(self) -> ASGIApp | None:
        """The control plane's app, once built, if this replica holds the lease and is
        building it now (waiting up to ``BUILDING_WAIT_SECONDS``); else None at once."""
        deadline = time.monotonic() + BUILDING_WAIT_SECONDS
        while self.leader_app is None and self.elector.fence is not None \
                and not self.stepping_down and time.monotonic() < deadline:
            await anyio.sleep(BUILDING_POLL_SECONDS)
        return self.leader_app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
            return
        path = scope.get("path", "")
        app = self.leader_app
        if app is None and path not in ("/readyz", "/healthz"):
            app = await self._built()
        writes = scope.get("method", "GET") not in READS or scope["type"] == "websocket"
        if self.stepping_down and (writes or path == "/readyz"):
            # Nothing of the request was done: any client may send it again elsewhere.
            await _unavailable(scope, send, "this replica is handing leadership over "
                               "(a planned stop); another replica leads in a moment")
            return
        if path == "/readyz" and scope["type"] == "http":
            role = "leader" if app is not None else "follower"
            fence = self.elector.fence
            term = fence.term if fence is not None and app is not None else None
            # A leader whose store cannot be reached acknowledges nothing: not ready.
            fault = self.elector.leases.store.unavailable if app is not None else None
            ready = app is not None and fault is None
            await _json(send, 200 if ready else 503, {
                "ready": ready, "role": role, "term": term,
                "leader": self.elector.leader_url() if app is None else None,
                **({"reason": f"the store is unavailable: {fault}"} if fault else {})})
            return
        if app is not None:
            if not writes or scope["type"] != "http":  # an exec session is not waited for
                await app(scope, receive, send)
                return
            self.writes_in_flight += 1
            try:
                await app(scope, receive, send)
            finally:
                self.writes_in_flight -= 1
            return
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1013})  # try again later
            return
        if path == "/healthz":
            await _json(send, 200, {"status": "ok", "message": "a follower: it serves no "
                                    "requests itself; /readyz answers 200 on the leader"})
            return
        reads = self.reads
        if not writes and reads is not None and reads.serves(scope):
            await reads(scope, receive, send)
            return
        await _json(send, *to_leader(self.elector.leader_url(), scope))


Answer = tuple[int, dict[str, object], list[tuple[bytes, bytes]]]


def not_leader(message: str) -> Answer:
    """503 ``NotLeader`` with ``Retry-After``: nothing was done; try again, elsewhere."""
    error = NotLeader(message, field="leader", fix=NOT_LEADER_FIX)
    return (error.status_code, {"error": error.to_dict()},
            [(b"retry-after", str(RETRY_AFTER_SECONDS).encode())])


def to_leader(leader: str | None, scope: Scope) -> Answer:
    """A request sent on to the leader: 307 to the same path and query there (method and
    body kept), or, with no live leader known, ``not_leader``."""
    if leader is None:
        return not_leader("this replica does not lead, and no live leader is known yet "
                          "(an election is under way)")
    # raw_path is the path as the client sent it, escapes and all.
    raw = scope.get("raw_path") or quote(scope.get("path", "")).encode()
    target = leader.rstrip("/") + raw.decode("latin-1")
    if scope.get("query_string"):
        target += "?" + scope["query_string"].decode("latin-1")
    return 307, {"leader": leader}, [(b"location", target.encode())]


async def _unavailable(scope: Scope, send: Send, message: str) -> None:
    if scope["type"] == "websocket":
        await send({"type": "websocket.close", "code": 1013})  # try again later
        return
    await _json(send, *not_leader(message))


async def _json(send: Send, status: int, body: object,
                headers: list[tuple[bytes, bytes]] | None = None) -> None:
    data = json.dumps(body).encode()
    await send({"type": "http.response.start", "status": status, "headers": [
        (b"content-type", b"application/json"), (b"content-length", str(len(data)).encode()),
        *(headers or [])]})
    await send({"type": "http.response.body", "body": data})


async def _lifespan(receive: Receive, send: Send) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return
