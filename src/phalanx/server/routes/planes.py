"""The compute planes: the worker's (``hello``, ``report``, ``desired``, and
``exec`` in ``plane_exec.py``: only a key of scope ``plane:<name>`` for that plane) and the
admins' registry (``phalanx plane``).

A plane key reaches nothing else: ``check_plane_key`` refuses it on every other path, so
a key for cluster A can neither report for B nor read a job.
"""

from __future__ import annotations

import time

import anyio
from anyio import to_thread
from fastapi import APIRouter, Query, Request

from phalanx.compute.lease import fence_margin, lost_after_needed
from phalanx.control.planes import PlaneRegistry, jobs_by_plane, plane_views, stop_jobs_on
from phalanx.errors import Forbidden, SpecError
from phalanx.server.access import Access, audit_entry, needs, principal_of
from phalanx.server.keys import new_key
from phalanx.server.plane_exec import add_plane_exec_routes
from phalanx.server.principal import Principal
from phalanx.server.routes.context import ApiContext, error_response, errors
from phalanx.spec.planes import (
    PLANE_SCOPE_PREFIX,
    DesiredState,
    PlaneCreate,
    PlaneDrain,
    PlaneDrained,
    PlaneFlags,
    PlaneHello,
    PlaneKey,
    PlaneList,
    PlaneReport,
    PlaneView,
    PlaneWelcome,
    ReportAck,
    check_plane_name,
    plane_scope,
)
from phalanx.store import StoredKey

_WORKER_PATHS = ("hello", "report", "desired", "exec")
MAX_WAIT = 60.0
MAX_POLLS = 1000  # workers waiting at once


def check_plane_key(principal: Principal, path: str) -> None:
    """Forbidden unless a plane key is used on its own plane's worker routes."""
    if not principal.scope.startswith(PLANE_SCOPE_PREFIX):
        return
    plane = principal.scope[len(PLANE_SCOPE_PREFIX):]
    session = path.removeprefix(f"/v1/planes/{plane}/exec/")  # a command's WebSocket
    archive = path.removeprefix(f"/v1/planes/{plane}/workdirs/")  # a workdir to unpack
    if path not in {f"/v1/planes/{plane}/{tail}" for tail in _WORKER_PATHS} and (
            session == path or not session or "/" in session) and (
            archive == path or not archive or "/" in archive):
        raise Forbidden(f"a key of compute plane {plane} only reports for that plane",
                        field="Authorization", fix="use a user's key for anything else")


def router(ctx: ApiContext, registry: PlaneRegistry) -> APIRouter:
    """The planes' routes, served when the control plane keeps a registry of them."""
    r = APIRouter()
    controller, auth, control_plane_id = ctx.controller, ctx.auth, ctx.control_plane_id
    timers = registry.timers
    # Long polls wait in threads of their own: with the shared pool (40 threads), 40
    # waiting workers would hold up every other request of the API.
    polls = anyio.CapacityLimiter(MAX_POLLS)

    # ------------------------------------------------------------------ the worker's
    @r.post("/v1/planes/{name}/hello", dependencies=needs(Access.PLANE),
              responses=errors(400, 401, 403, 404))
    def hello(name: str, body: PlaneHello) -> PlaneWelcome:
        """A worker registers (again) for its plane; refused unless ``--worker-lost-after``
        is longer than its fence, the time the fence takes to stop the pods, and a margin
        (its pods must be stopped before their jobs run elsewhere)."""
        remote = registry.remote(name)
        needed = lost_after_needed(body.fence_after, body.fence_stops_within)
        if needed >= timers.worker_lost_after:
            raise SpecError(
                f"the worker's --fence-after ({body.fence_after:g}s), {body.fence_stops_within:g}s "
                f"for its fence to stop the pods and a margin of "
                f"{fence_margin(body.fence_after):g}s come to {needed:g}s, not shorter than "
                f"the control plane's --worker-lost-after ({timers.worker_lost_after:g}s)",
                field="fenceAfter", fix="start the worker with a shorter --fence-after, or "
                                        "the control plane with a longer --worker-lost-after")
        remote.hello(body)
        registry.heard(name)
        return PlaneWelcome(control_plane=control_plane_id, plane=name,
                            worker_grace=timers.worker_grace,
                            worker_lost_after=timers.worker_lost_after,
                            poll_seconds=timers.poll_seconds)

    @r.post("/v1/planes/{name}/report", dependencies=needs(Access.PLANE),
              responses=errors(400, 401, 403, 404, 409))
    def report(name: str, body: PlaneReport) -> ReportAck:
        """What the worker's plane has now: nodes (when changed), pods, refusals, logs."""
        wanted = registry.remote(name).report(body)
        registry.heard(name)
        return ReportAck(nodes_wanted=wanted)

    @r.get("/v1/planes/{name}/desired", dependencies=needs(Access.PLANE),
             responses=errors(400, 401, 403, 404, 409))
    async def desired(name: str, after: int = -1,
                      wait: float = Query(default=25.0, ge=0, le=MAX_WAIT),
                      worker: str | None = None) -> DesiredState:
        """The desired state once its version passes ``after`` (a long poll of ``wait`` s);
        409 for a ``worker`` other than the one that drives the plane."""
        remote = registry.remote(name)
        state = await to_thread.run_sync(remote.desired, after, wait, worker, limiter=polls)
        # The term it leads under: a worker then acts on nothing an older leader, paused
        # and resumed, still answers (the store refuses that leader's writes, not its words).
        fence = controller.store.fence
        return state if fence is None else state.model_copy(update={"term": fence.term})

    add_plane_exec_routes(r, registry, polls, errors, error_response)

    # ------------------------------------------------------------------ the registry
    def by_plane() -> dict[str, list[str]]:
        return jobs_by_plane(controller.state, registry.planes)

    @r.get("/v1/planes", dependencies=needs(Access.READ), responses=errors(401))
    def list_planes() -> PlaneList:
        """Every compute plane, its state, the jobs it holds and what they use."""
        return PlaneList(planes=plane_views(registry, controller.service))

    @r.get("/v1/planes/{name}", dependencies=needs(Access.READ), responses=errors(401, 404))
    def get_plane(name: str) -> PlaneView:
        registry.remote(name)
        return next(v for v in plane_views(registry, controller.service) if v.name == name)

    def mint_key(name: str, request: Request, description: str) -> PlaneKey:
        key, key_id = new_key()
        owner = principal_of(request).name
        stored = StoredKey(key_id, owner, auth.hasher.hash(key), plane_scope(name),
                           description or f"compute plane {name}", time.time())
        auth.identity.create_key(stored, audit_entry(request, "key-create", key_id,
                                                     scope=stored.scope))
        return PlaneKey(name=name, key=key, key_id=key_id)

    @r.post("/v1/planes", dependencies=needs(Access.ADMIN), status_code=201,
              responses=errors(400, 401, 403, 409))
    def add_plane(body: PlaneCreate, request: Request) -> PlaneKey:
        """Register a compute plane; its key is in the answer, shown once."""
        check_plane_name(body.name)
        registry.add(body.name, audit_entry(request, "plane-add", body.name))
        return mint_key(body.name, request, body.description)

    @r.post("/v1/planes/{name}/keys", dependencies=needs(Access.ADMIN), status_code=201,
              responses=errors(400, 401, 403, 404))
    def rotate_key(name: str, request: Request) -> PlaneKey:
        """Another key for the plane (both work until the old one is revoked)."""
        registry.remote(name)
        return mint_key(name, request, f"compute plane {name} (rotated)")

    @r.post("/v1/planes/{name}/cordon", dependencies=needs(Access.ADMIN),
              responses=errors(400, 401, 403, 404))
    def cordon_plane(name: str, body: PlaneFlags, request: Request) -> PlaneView:
        """Take no new placements on the plane (or take them again)."""
        registry.set_flags(name, audit_entry(request, "plane-cordon", name,
                                             cordoned=body.cordoned),
                           cordoned=body.cordoned, draining=False if not body.cordoned else None)
        controller.state.wake.set()
        return get_plane(name)

    @r.post("/v1/planes/{name}/drain", dependencies=needs(Access.ADMIN),
              responses=errors(400, 401, 403, 404))
    def drain_plane(name: str, body: PlaneDrain, request: Request) -> PlaneDrained:
        """Stop new work on the plane; ``move``: stop its jobs now, to run elsewhere."""
        registry.set_flags(name, audit_entry(request, "plane-drain", name, move=body.move),
                           draining=True)
        stopped = stop_jobs_on(controller.state, registry.planes, name) if body.move else []
        controller.state.wake.set()
        return PlaneDrained(name=name, stopped=stopped, running=by_plane().get(name, []))

    @r.delete("/v1/planes/{name}", dependencies=needs(Access.ADMIN),
                responses=errors(400, 401, 403, 404, 409))
    def remove_plane(name: str, request: Request,
                     force: bool = Query(default=False)) -> PlaneView:
        """Unregister the plane; refused while jobs run there unless ``force``. With it,
        those jobs are requeued and start elsewhere once the plane's fence has surely
        stopped their pods (its worker loses its key now, and may never hear the stop)."""
        shown = get_plane(name)
        running = by_plane().get(name, [])
        remote = registry.check_removable(name, running=running, force=force)
        if running:
            stop_jobs_on(controller.state, registry.planes, name,
                         removed_for=remote.fence_needs or remote.lost_after)
        registry.remove(name, audit_entry(request, "plane-remove", name, force=force))
        for key in auth.identity.list_keys():
            if key.scope == plane_scope(name) and key.revoked_at is None:
                auth.identity.revoke_key(key.id, audit_entry(request, "key-revoke", key.id))
                auth.revoked(key.id)
        controller.state.wake.set()
        return shown

    return r


__all__ = ["check_plane_key", "check_plane_name", "router"]
