"""The secrets routes (``/v1/secrets``): create, list (names, types and keys' names only)
and delete. No route ever answers a value; see ``server/secrets.py``."""

from __future__ import annotations

import base64
import binascii
from typing import Any

from fastapi import FastAPI, Query, Request

from phalanx.errors import SpecError
from phalanx.server.access import Access, audit_entry, caller_of, needs
from phalanx.server.auth import Authenticator
from phalanx.server.secrets import check_team
from phalanx.spec.secrets import SecretCreate, SecretList, SecretView, check_secret_data
from phalanx.store.secrets import TEAM_OWNER, StoredSecret


def secret_view(secret: StoredSecret) -> SecretView:
    kind, owner = secret.owner.split(":", 1)
    team = owner if f"{kind}:" == TEAM_OWNER else None
    return SecretView(name=secret.name, type=secret.type,
                      keys=list(secret.keys), team=team, user=None if team else owner,
                      created_at=secret.created_at, created_by=secret.created_by)


def _decoded(data: dict[str, str]) -> dict[str, bytes]:
    decoded: dict[str, bytes] = {}
    for key, value in data.items():
        try:
            decoded[key] = base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            raise SpecError(f"the value of {key[:80]!r} is not base64", field=f"data.{key[:80]}",
                            fix="encode each value with base64 (the CLI does)") from None
    return decoded


def add_secret_routes(app: FastAPI, auth: Authenticator, errors_for: Any) -> None:
    """The routes, over ``auth.secrets`` (looked up when called)."""
    @app.get("/v1/secrets", dependencies=needs(Access.READ), responses=errors_for(401))
    def list_secrets(request: Request) -> SecretList:
        """The secrets the caller may use (their own and their teams'): names, types and
        keys' names, never values."""
        p = caller_of(request)
        return SecretList(items=[secret_view(s) for s in auth.secrets.visible(p.name, p.teams)])

    @app.post("/v1/secrets", status_code=201, dependencies=needs(Access.WRITE),
              responses=errors_for(400, 401, 403, 409))
    def create_secret(body: SecretCreate, request: Request) -> SecretView:
        """Store a secret, encrypted, for the caller or one of their teams. Its values are
        never shown back."""
        p = caller_of(request)
        p.check_person()  # a pod's script is not trusted with its owner's secrets
        check_team(body.team, p.teams)
        data = _decoded(body.data)
        try:
            check_secret_data(body.type, data)
        except ValueError as exc:
            raise SpecError(str(exc).split("; ")[0], field="data",
                            fix=str(exc).split("; ", 1)[-1]) from None
        target = f"{body.team}/{body.name}" if body.team else body.name
        stored = auth.secrets.create(
            name=body.name, kind=body.type, data=data, user=p.name, team=body.team,
            audit=audit_entry(request, "secret-create", target, type=body.type,
                              keys=sorted(data)))
        return secret_view(stored)

    @app.delete("/v1/secrets/{name}", dependencies=needs(Access.WRITE),
                responses=errors_for(400, 401, 403, 404))
    def delete_secret(name: str, request: Request,
                      team: str | None = Query(None, description="The owning team"),
                      ) -> SecretView:
        """Delete a secret of the caller's or of one of their teams. Jobs already running
        keep what their attempt was given; later attempts of jobs naming it fail to start."""
        p = caller_of(request)
        p.check_person()
        ref = f"{team}/{name}" if team else name
        found = auth.secrets.delete(ref, p.name, p.teams,
                                    audit_entry(request, "secret-delete", ref))
        return secret_view(found)
