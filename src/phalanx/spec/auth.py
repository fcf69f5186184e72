"""The bodies of the API's identity routes: tokens, users, keys, teams and the audit log."""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import Field, StringConstraints

from phalanx.spec.base import Model, Name, StrictNumber

Role = Literal["admin", "member", "viewer"]
Scope = Literal["all", "read"]
USER_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._@+-]{0,252}$")
TEAM_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
# The longest a key may live when it expires at all (a later time cannot be written down).
MAX_KEY_SECONDS = 100 * 365 * 86400
UserName = Annotated[str, StringConstraints(pattern=USER_NAME.pattern)]
TeamName = Annotated[str, StringConstraints(pattern=TEAM_NAME.pattern)]


class TokenRequest(Model):
    key: str = Field(min_length=1, max_length=1024, description="An API key")


class TokenIssued(Model):
    """A short-lived token for ``Authorization: Bearer``; exchange the key again before
    ``expiresAt``."""

    token: str
    token_type: Literal["Bearer"] = "Bearer"
    expires_at: float = Field(description="Epoch seconds")
    expires_in: float = Field(description="Seconds the token lives")
    user: str
    role: Role


class WhoAmI(Model):
    user: str
    role: Role
    teams: list[str]
    queues: list[str] = Field(description="The LocalQueues the user's teams may submit to")
    scope: Scope
    key: str = Field(description="The id of the API key the token came from")
    expires_at: float | None = Field(default=None, description="When the token expires")


class UserSpec(Model):
    """A user to create (``POST /v1/users`` refuses an existing name)."""

    name: UserName
    role: Role = "member"
    teams: list[TeamName] = Field(default_factory=list)


class UserChange(Model):
    """An existing user's new role and teams (``PUT /v1/users/{name}`` creates it too)."""

    role: Role = "member"
    teams: list[TeamName] = Field(default_factory=list)


class UserView(UserSpec):
    disabled: bool = False
    created_at: float


class UserList(Model):
    items: list[UserView]


class KeyRequest(Model):
    user: UserName | None = Field(default=None, description="Whose key (admins only; "
                                  "default: the caller)")
    scope: Scope = "all"
    expires_in: StrictNumber | None = Field(
        default=None, gt=0, le=MAX_KEY_SECONDS, allow_inf_nan=False,
        description="Seconds until it expires (default: never; at most 100 years)")
    description: str = Field(default="", max_length=255)


class KeyView(Model):
    id: str = Field(description="The key's visible prefix; it names the key, it is not it")
    user: str
    scope: str = Field(description="all, read, or plane:<name> (a compute plane's key)")
    description: str = ""
    created_at: float
    expires_at: float | None = None
    revoked_at: float | None = None


class KeyCreated(KeyView):
    key: str = Field(description="The key itself, shown this once")


class KeyList(Model):
    items: list[KeyView]


class TeamSpec(Model):
    queues: list[Name] = Field(description="LocalQueues the team's members may submit to")


class TeamView(TeamSpec):
    name: str


class TeamList(Model):
    items: list[TeamView]


class AuditView(Model):
    id: int
    time: float
    user: str
    client: str = Field(description="The client's address")
    action: str
    target: str
    detail: dict[str, object] = Field(default_factory=dict)


class AuditList(Model):
    items: list[AuditView]


class SigningKeyRotated(Model):
    kid: str = Field(description="The id of the new signing key")
