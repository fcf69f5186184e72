"""The client's calls about identity: who am I, users, API keys, teams, the audit log."""

from __future__ import annotations

import builtins
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import quote

if TYPE_CHECKING:
    from pydantic import BaseModel

    from phalanx.spec.auth import (
        AuditView,
        KeyCreated,
        KeyView,
        TeamView,
        UserView,
        WhoAmI,
    )


M = TypeVar("M", bound="BaseModel")


class IdentityCalls:
    """Mixed into ``Client``, which provides ``_request``."""

    def _request(self, model: type[M], method: str, path: str, **kwargs: Any) -> M:
        raise NotImplementedError

    def whoami(self) -> WhoAmI:
        """The caller: user, role, teams and the LocalQueues they may submit to."""
        from phalanx.spec.auth import WhoAmI

        return self._request(WhoAmI, "GET", "/v1/auth/whoami")

    def users(self) -> builtins.list[UserView]:
        from phalanx.spec.auth import UserList

        return self._request(UserList, "GET", "/v1/users").items

    def create_user(self, name: str, role: str = "member",
                    teams: builtins.list[str] | None = None) -> UserView:
        """Create a user (admins only); Conflict if the name is taken."""
        from phalanx.spec.auth import UserView

        body = {"name": name, "role": role, "teams": teams or []}
        return self._request(UserView, "POST", "/v1/users", json=body)

    def put_user(self, name: str, role: str = "member",
                 teams: builtins.list[str] | None = None) -> UserView:
        """Set a user's role and teams, creating it if need be (admins only)."""
        from phalanx.spec.auth import UserView

        body = {"role": role, "teams": teams or []}
        return self._request(UserView, "PUT", f"/v1/users/{quote(name, safe='')}", json=body)

    def set_user_disabled(self, name: str, disabled: bool = True) -> UserView:
        from phalanx.spec.auth import UserView

        verb = "disable" if disabled else "enable"
        return self._request(UserView, "POST", f"/v1/users/{quote(name, safe='')}:{verb}")

    def keys(self, user: str | None = None, *, revoked: bool = False,
             ) -> builtins.list[KeyView]:
        """API keys; revoked ones too with ``revoked``."""
        from phalanx.spec.auth import KeyList

        params: dict[str, str] = {"user": user} if user else {}
        if revoked:
            params["revoked"] = "true"
        return self._request(KeyList, "GET", "/v1/keys", params=params).items

    def create_key(self, user: str | None = None, *, scope: str = "all",
                   expires_in: float | None = None, description: str = "") -> KeyCreated:
        """A new API key; ``.key`` holds it, shown this once."""
        from phalanx.spec.auth import KeyCreated

        body: dict[str, Any] = {"scope": scope, "description": description}
        if user is not None:
            body["user"] = user
        if expires_in is not None:
            body["expiresIn"] = expires_in
        return self._request(KeyCreated, "POST", "/v1/keys", json=body)

    def revoke_key(self, key_id: str) -> KeyView:
        from phalanx.spec.auth import KeyView

        return self._request(KeyView, "DELETE", f"/v1/keys/{quote(key_id, safe='')}")

    def teams(self) -> builtins.list[TeamView]:
        from phalanx.spec.auth import TeamList

        return self._request(TeamList, "GET", "/v1/teams").items

    def put_team(self, name: str, queues: builtins.list[str]) -> TeamView:
        from phalanx.spec.auth import TeamView

        return self._request(TeamView, "PUT", f"/v1/teams/{quote(name, safe='')}",
                             json={"queues": queues})

    def delete_team(self, name: str) -> TeamView:
        from phalanx.spec.auth import TeamView

        return self._request(TeamView, "DELETE", f"/v1/teams/{quote(name, safe='')}")

    def audit(self, *, since: float | None = None, user: str | None = None,
              limit: int = 1000) -> builtins.list[AuditView]:
        """Changes, oldest first (admins only)."""
        from phalanx.spec.auth import AuditList

        params: dict[str, Any] = {"limit": limit}
        if since is not None:
            params["since"] = since
        if user is not None:
            params["user"] = user
        return self._request(AuditList, "GET", "/v1/audit", params=params).items

    def rotate_signing_key(self) -> str:
        """Sign tokens with a new key from now on (admins only); its id."""
        from phalanx.spec.auth import SigningKeyRotated

        return self._request(SigningKeyRotated, "POST", "/v1/auth/signing-key:rotate").kid
