"""The identity routes: token exchange, whoami, users, API keys, teams and the audit log."""

from __future__ import annotations

import time
from typing import Any

from fastapi import FastAPI, Query, Request, Response
from fastapi.concurrency import run_in_threadpool

from phalanx.errors import NotFound, SpecError
from phalanx.server.access import Access, audit_entry, client_of, needs, principal_of
from phalanx.server.auth import Authenticator
from phalanx.server.keys import new_key
from phalanx.spec.auth import (
    TEAM_NAME,
    USER_NAME,
    AuditList,
    AuditView,
    KeyCreated,
    KeyList,
    KeyRequest,
    KeyView,
    SigningKeyRotated,
    TeamList,
    TeamSpec,
    TeamView,
    TokenIssued,
    TokenRequest,
    UserChange,
    UserList,
    UserSpec,
    UserView,
    WhoAmI,
)
from phalanx.store import StoredKey, Team, User


def _key_view(key: StoredKey) -> KeyView:
    return KeyView(id=key.id, user=key.user, scope=key.scope,
                   description=key.description, created_at=key.created_at,
                   expires_at=key.expires_at, revoked_at=key.revoked_at)


def _user_view(user: User) -> UserView:
    return UserView(name=user.name, role=user.role, teams=list(user.teams),
                    disabled=user.disabled, created_at=user.created_at)


def add_identity_routes(app: FastAPI, auth: Authenticator,
                        errors: dict[int | str, dict[str, Any]],
                        errors_for: Any) -> None:
    identity = auth.identity

    @app.post("/v1/auth/token", dependencies=needs(Access.PUBLIC),
              responses=errors_for(400, 401, 429))
    def token(body: TokenRequest, request: Request) -> TokenIssued:
        """Exchange an API key for a short-lived token (failed exchanges are limited per
        client address: 429 beyond)."""
        issued = auth.exchange(body.key, client_of(request))
        return TokenIssued(token=issued.token, expires_at=issued.expires_at,
                           expires_in=issued.lifetime, user=issued.principal.name,
                           role=issued.principal.role)

    @app.get("/v1/auth/whoami", dependencies=needs(Access.READ), responses=errors)
    async def whoami(request: Request) -> WhoAmI:
        p = principal_of(request)
        return WhoAmI(user=p.name, role=p.role, teams=list(p.teams),
                      queues=sorted(p.queues), scope=p.scope, key=p.key,
                      expires_at=p.expires_at or None)

    @app.post("/v1/auth/signing-key:rotate", dependencies=needs(Access.ADMIN),
              responses=errors)
    def rotate(request: Request) -> SigningKeyRotated:
        """Sign new tokens with a new key; tokens signed by the previous one stay valid
        until they expire. The secrets' encryption key rotates too: every secret is
        re-encrypted under a new one."""
        key = auth.signing.rotate()
        reencrypted = auth.secrets.rotate()
        identity.append([audit_entry(request, "signing-key-rotate", key.kid,
                                     secrets=reencrypted)])
        return SigningKeyRotated(kid=key.kid)

    # ------------------------------------------------------------------ users
    @app.get("/v1/users", dependencies=needs(Access.ADMIN_READ), responses=errors)
    def users() -> UserList:
        return UserList(items=[_user_view(u) for u in identity.list_users()])

    @app.post("/v1/users", status_code=201, dependencies=needs(Access.ADMIN),
              responses=errors_for(400, 401, 403, 409))
    def create_user(body: UserSpec, request: Request) -> UserView:
        """Create a user; 409 if the name is taken (``PUT /v1/users/{name}`` changes one)."""
        identity.put_user(
            User(body.name, body.role, tuple(body.teams)),
            audit_entry(request, "user-create", body.name, role=body.role, teams=body.teams),
            create_only=True)
        auth.user_changed(body.name)
        return _user_view(identity.get_user(body.name))

    @app.put("/v1/users/{name}", dependencies=needs(Access.ADMIN), responses={
        201: {"model": UserView, "description": "The user was created"},
        **errors_for(400, 401, 403, 409)})
    def put_user(name: str, body: UserChange, request: Request,
                 response: Response) -> UserView:
        """Set a user's role and teams, creating it if need be (201 then); 409 if it would
        demote the last enabled admin."""
        if not USER_NAME.fullmatch(name):
            raise SpecError(f"{name[:80]!r} is not a user name", field="name",
                            fix="use at most 253 letters, digits, '.', '_', '@', '+' or '-'")
        created = identity.put_user(
            User(name, body.role, tuple(body.teams)),
            audit_entry(request, "user-set", name, role=body.role, teams=body.teams))
        auth.user_changed(name)
        response.status_code = 201 if created else 200
        return _user_view(identity.get_user(name))

    def set_disabled(name: str, request: Request, disabled: bool) -> UserView:
        identity.set_disabled(name, disabled, audit_entry(
            request, "user-disable" if disabled else "user-enable", name))
        auth.user_changed(name, disabled=disabled)
        return _user_view(identity.get_user(name))

    @app.post("/v1/users/{name}:disable", dependencies=needs(Access.ADMIN),
              responses=errors_for(401, 403, 404))
    def disable(name: str, request: Request) -> UserView:
        """Refuse the user's keys and tokens at once (the user and its jobs stay); 409 for
        the last enabled admin."""
        return set_disabled(name, request, True)

    @app.post("/v1/users/{name}:enable", dependencies=needs(Access.ADMIN),
              responses=errors_for(401, 403, 404))
    def enable(name: str, request: Request) -> UserView:
        return set_disabled(name, request, False)

    # ------------------------------------------------------------------ keys
    @app.get("/v1/keys", dependencies=needs(Access.READ), responses=errors_for(400, 401, 403))
    def keys(request: Request,
             user: str | None = Query(None, description="Whose keys (admins: default all)"),
             revoked: bool = Query(False, description="Include revoked keys"),
             ) -> KeyList:
        """API keys (never the keys themselves): the caller's own, or for an admin anyone's;
        revoked ones only when asked for."""
        p = principal_of(request)
        p.check_person()
        if not p.acts_as_admin:
            user = p.name
        return KeyList(items=[_key_view(k) for k in identity.list_keys(user)
                              if revoked or k.revoked_at is None])

    @app.post("/v1/keys", status_code=201, dependencies=needs(Access.SELF),
              responses=errors_for(400, 401, 403, 404))
    def create_key(body: KeyRequest, request: Request) -> KeyCreated:
        """A new API key, shown this once; admins may create one for any user."""
        p = principal_of(request)
        user = body.user or p.name
        if user != p.name:
            p.check_admin()
        key, key_id = new_key()
        now = time.time()
        stored = StoredKey(key_id, user, auth.hasher.hash(key), body.scope, body.description,
                           now, now + body.expires_in if body.expires_in else None)
        identity.create_key(stored, audit_entry(request, "key-create", key_id, user=user,
                                                scope=body.scope))
        return KeyCreated(**_key_view(stored).model_dump(), key=key)

    @app.delete("/v1/keys/{key_id}", dependencies=needs(Access.SELF),
                responses=errors_for(401, 403, 404))
    def revoke_key(key_id: str, request: Request) -> KeyView:
        """Revoke a key at once: it exchanges no more, its tokens are refused."""
        p = principal_of(request)
        revoked = identity.revoke_key(key_id, audit_entry(request, "key-revoke", key_id),
                                      user=None if p.acts_as_admin else p.name)
        auth.revoked(key_id)
        return _key_view(identity.get_key(key_id) or revoked)

    # ------------------------------------------------------------------ teams
    @app.get("/v1/teams", dependencies=needs(Access.READ), responses=errors)
    def teams() -> TeamList:
        return TeamList(items=[TeamView(name=t.name, queues=list(t.queues))
                               for t in identity.list_teams()])

    @app.put("/v1/teams/{name}", dependencies=needs(Access.ADMIN),
             responses=errors_for(400, 401, 403))
    def put_team(name: str, body: TeamSpec, request: Request) -> TeamView:
        """Create a team or set the LocalQueues its members may submit to."""
        if not TEAM_NAME.fullmatch(name):
            raise SpecError(f"{name[:80]!r} is not a team name", field="name",
                            fix="use at most 63 lower-case letters, digits and '-', starting "
                                "and ending with a letter or digit")
        team = TeamView(name=name, queues=body.queues)
        identity.put_team(Team(name, tuple(body.queues)),
                          audit_entry(request, "team-set", name, queues=body.queues))
        for user in identity.list_users():
            if name in user.teams:
                auth.user_changed(user.name)
        return team

    @app.delete("/v1/teams/{name}", dependencies=needs(Access.ADMIN),
                responses=errors_for(401, 403, 404, 409))
    def delete_team(name: str, request: Request) -> TeamView:
        found = [t for t in identity.list_teams() if t.name == name]
        if not found:
            raise NotFound(f"no team {name!r}", field="team",
                           fix="name a team `phalanx teams list` shows")
        identity.delete_team(name, audit_entry(request, "team-delete", name))
        return TeamView(name=name, queues=list(found[0].queues))

    # ------------------------------------------------------------------ audit
    @app.get("/v1/audit", dependencies=needs(Access.ADMIN_READ),
             responses=errors_for(400, 401, 403))
    async def audit(
        since: float | None = Query(None, description="Epoch seconds"),
        user: str | None = None,
        limit: int = Query(1000, ge=1, le=100_000),
    ) -> AuditList:
        """Changes, oldest first (the newest ``limit`` of those that match)."""
        entries = await run_in_threadpool(identity.audit, since=since, user=user, limit=limit)
        return AuditList(items=[
            AuditView(id=e.id or 0, time=e.time, user=e.user, client=e.client,
                      action=e.action, target=e.target, detail=e.detail) for e in entries])


