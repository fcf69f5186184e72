"""The client's calls about secrets: create, list (never values), delete."""

from __future__ import annotations

import base64
import builtins
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import quote

if TYPE_CHECKING:
    from pydantic import BaseModel

    from phalanx.spec.secrets import SecretView


M = TypeVar("M", bound="BaseModel")


class SecretCalls:
    """Mixed into ``Client``, which provides ``_request``."""

    def _request(self, model: type[M], method: str, path: str, **kwargs: Any) -> M:
        raise NotImplementedError

    def create_secret(self, name: str, data: dict[str, str | bytes], *, type: str = "env",
                      team: str | None = None) -> SecretView:
        """Store a secret, encrypted, for yourself or one of your teams (``team``). Its
        values are never shown back; jobs name it (``envFrom``, ``secretEnv``, volumes,
        ``imagePullSecrets``)."""
        from phalanx.spec.secrets import SecretView

        body: dict[str, Any] = {
            "name": name, "type": type,
            "data": {k: base64.b64encode(v.encode() if isinstance(v, str) else v).decode()
                     for k, v in data.items()}}
        if team is not None:
            body["team"] = team
        return self._request(SecretView, "POST", "/v1/secrets", json=body)

    def secrets(self) -> builtins.list[SecretView]:
        """Your own and your teams' secrets: names, types and keys' names."""
        from phalanx.spec.secrets import SecretList

        return self._request(SecretList, "GET", "/v1/secrets").items

    def delete_secret(self, name: str, *, team: str | None = None) -> SecretView:
        from phalanx.spec.secrets import SecretView

        params = {"team": team} if team is not None else {}
        return self._request(SecretView, "DELETE", f"/v1/secrets/{quote(name, safe='')}",
                             params=params)
