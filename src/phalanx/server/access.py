"""What each route requires of its caller, declared on the route and checked before it runs.

Every ``/v1`` route declares one ``Access`` (``dependencies=needs(...)``); ``create_app``
refuses to build an app with a route that declares none, so no route goes unchecked.
Finer rules (which queues a member may submit to, which jobs it sees) are the routes'
own, through ``Principal``.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from fastapi import Depends, Request
from fastapi.params import Depends as DependsParam
from fastapi.routing import APIRoute

from phalanx.errors import AuthError, Forbidden, InternalError
from phalanx.server.principal import Principal
from phalanx.spec.planes import PLANE_SCOPE_PREFIX
from phalanx.store import AuditEntry

PRINCIPAL = "phalanx.principal"


class Access(StrEnum):
    PUBLIC = "public"  # no token: exchanging a key for one
    READ = "read"  # any authenticated caller
    SELF = "self"  # any role, with a key of scope all, not a job's: its own keys
    WRITE = "write"  # member or admin, scope all; the route checks teams
    ADMIN_READ = "admin-read"
    ADMIN = "admin"  # admin, scope all
    PLANE = "plane"  # a plane key of the plane the path names (a compute-plane worker)


def principal_of(request: Request) -> Principal:
    """The caller the guard authenticated."""
    principal = request.scope.get("state", {}).get(PRINCIPAL)
    if not isinstance(principal, Principal):
        raise AuthError("no token", field="Authorization",
                        fix="send 'Authorization: Bearer <token>'")
    return principal


def caller_of(request: Request) -> Principal:
    """The principal as whom the request acts: the authenticated one, or the user an admin
    acts as (``X-Phalanx-Act-As``, resolved and audited by the guard,
    ``Authenticator.act_as``). No other header names anyone."""
    return principal_of(request)


def client_of(request: Request) -> str:
    return request.client.host if request.client is not None else "unknown"


def audit_entry(request: Request, action: str, target: str, **detail: Any) -> AuditEntry:
    principal = caller_of(request)
    if principal.key:
        detail["key"] = principal.key
    if principal.acted_by is not None:
        detail["actedBy"] = principal.acted_by
    return AuditEntry(principal.name, client_of(request), action, target, detail)


def _checker(access: Access) -> Any:
    async def check(request: Request) -> None:
        if access is Access.PUBLIC:
            return
        principal = principal_of(request)
        if access is Access.PLANE:
            plane = request.path_params.get("name", "")
            if principal.scope != f"{PLANE_SCOPE_PREFIX}{plane}":
                raise Forbidden(f"this needs the key of compute plane {plane}; "
                                f"{principal.name}'s is not",
                                field="Authorization",
                                fix=f"use the key `phalanx plane add {plane}` wrote")
            return
        if access in (Access.ADMIN_READ, Access.ADMIN):
            principal.check_admin()
        if access is Access.SELF:
            # A pod minting a key for its owner would keep acting after its attempt ends.
            principal.check_person()
        # SELF: a read-only key must not mint a key that may write.
        if access in (Access.WRITE, Access.ADMIN) or (
                access is Access.SELF and principal.scope != "all"):
            principal.check_writes()

    check.access = access  # type: ignore[attr-defined]
    return check


_CHECKERS = {access: _checker(access) for access in Access}


def needs(access: Access) -> list[DependsParam]:
    """The route's dependency that checks ``access``."""
    return [Depends(_CHECKERS[access])]


def route_access(route: APIRoute) -> Access | None:
    for dependency in route.dependencies:
        found = getattr(dependency.dependency, "access", None)
        if isinstance(found, Access):
            return found
    return None


def check_every_route(routes: list[Any]) -> None:
    """InternalError naming a ``/v1`` route that declares no access."""
    for route in routes:
        if isinstance(route, APIRoute) and route.path.startswith("/v1/") \
                and route_access(route) is None:
            raise InternalError(f"route {route.path} declares no access",
                                fix="add dependencies=needs(Access...) to it")
