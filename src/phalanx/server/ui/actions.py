"""What the dashboard changes (POST, each with the session's CSRF token): cancel and
resubmit a job, cordon and uncordon a node, and an admin's preview of another role."""

from __future__ import annotations

from functools import partial

from anyio import to_thread
from fastapi import APIRouter, Request
from starlette.responses import RedirectResponse

from phalanx.errors import Conflict, NotFound, SpecError
from phalanx.server.ui.context import Dashboard, Forbidden, safe_next
from phalanx.server.ui.session import ROLES, Session
from phalanx.spec.status import JobRecord

RESUBMIT_TRIES = 100


def _back(form: dict[str, object], default: str) -> RedirectResponse:
    back = form.get("back")
    return RedirectResponse(safe_next(back if isinstance(back, str) and back else default),
                            status_code=303)


def _seen(d: Dashboard, session: Session, name: str) -> JobRecord:
    """The job, if the session sees it; the same NotFound whether it exists or not, so a
    refusal never tells whether another team has a job of that name."""
    try:
        record: JobRecord | None = d.service.get(name)
    except NotFound:
        record = None
    if record is None or not session.sees(record):
        raise NotFound(f"no job {name!r} you may see", field="job",
                       fix="pick a job of your teams from the Jobs page")
    return record


def _changeable(d: Dashboard, session: Session, name: str) -> JobRecord:
    record = _seen(d, session, name)
    if not session.may_change(record):
        raise Forbidden(f"a {session.role} may not change job {name}", field="role",
                        fix="ask a member of the job's team or an admin")
    return record


def router(d: Dashboard) -> APIRouter:
    r = APIRouter()

    @r.post("/jobs/{name}/cancel")
    async def cancel(request: Request, name: str) -> RedirectResponse:
        session, form = await d.acting(request)
        await to_thread.run_sync(_changeable, d, session, name)
        await to_thread.run_sync(d.service.cancel, name)
        return _back(form, f"/ui/jobs/{name}")

    @r.post("/jobs/{name}/resubmit")
    async def resubmit(request: Request, name: str) -> RedirectResponse:
        """Submit the job's spec again under the first free name ``NAME-2``, ``NAME-3``...
        (the store's unique names decide, so two resubmits never take the same one)."""
        session, _ = await d.acting(request)
        record = await to_thread.run_sync(_changeable_or_finished, d, session, name)
        base = name.rsplit("-", 1)[0] if name.rsplit("-", 1)[-1].isdigit() else name
        for n in range(2, 2 + RESUBMIT_TRIES):
            again = record.spec.model_copy(update={"name": f"{base}-{n}"})
            try:
                await to_thread.run_sync(partial(d.service.submit, again, user=session.name,
                                                 sees=session.sees))
            except Conflict:  # the name is taken: the next one
                continue
            return RedirectResponse(f"/ui/jobs/{base}-{n}", status_code=303)
        raise SpecError(f"{base}-2 to {base}-{1 + RESUBMIT_TRIES} are all taken", field="name",
                        fix="delete old resubmissions or submit with a new name")

    @r.post("/nodes/{name}:cordon")
    async def cordon(request: Request, name: str) -> RedirectResponse:
        return await _cordon(request, name, True)

    @r.post("/nodes/{name}:uncordon")
    async def uncordon(request: Request, name: str) -> RedirectResponse:
        return await _cordon(request, name, False)

    async def _cordon(request: Request, name: str, unschedulable: bool) -> RedirectResponse:
        session, form = await d.acting(request)
        if not session.is_admin:
            raise Forbidden(f"cordoning a node needs role admin; you are a {session.role}",
                            field="role", fix="ask an admin")
        await to_thread.run_sync(d.service.cordon, name, unschedulable)
        return _back(form, "/ui/nodes")

    @r.post("/view-as")
    async def view_as(request: Request) -> RedirectResponse:
        """An admin sees the dashboard as a member or viewer of some LocalQueues would (a
        preview of what a team sees); signing in again ends it."""
        session, form = await d.acting(request)
        if not session.is_admin:
            raise Forbidden("only an admin may preview another role", field="role",
                            fix="sign in with an admin's key")
        role = str(form.get("role", ""))
        if role not in ROLES:
            raise SpecError(f"{role!r} is not a role", field="role",
                            fix=f"choose one of {', '.join(ROLES)}")
        queues = frozenset(q.strip() for q in str(form.get("queues", "")).split(",")
                           if q.strip())
        response = _back(form, "/ui/")
        d.sessions.set_cookie(response, request, session.viewing_as(role, queues))
        return response

    return r


def _changeable_or_finished(d: Dashboard, session: Session, name: str) -> JobRecord:
    """A job the session may resubmit: one it may change, finished or not."""
    record = _seen(d, session, name)
    if not session.writes:
        raise Forbidden(f"a {session.role} may not resubmit job {name}", field="role",
                        fix="ask a member of the job's team or an admin")
    return record
