"""The client's calls about compute planes (``phalanx plane``)."""

from __future__ import annotations

import builtins
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import quote

from phalanx.errors import ServerError

if TYPE_CHECKING:
    import httpx
    from pydantic import BaseModel

    from phalanx.spec.planes import PlaneDrained, PlaneKey, PlaneView

M = TypeVar("M", bound="BaseModel")


def _path(name: str, tail: str = "") -> str:
    return f"/v1/planes/{quote(name, safe='')}" + (f"/{tail}" if tail else "")


class PlaneCalls:
    """Mixed into ``Client``, which provides ``_request``. Each call imports the planes'
    models itself: a client that never asks about planes does not load them."""

    def _request(self, model: type[M], method: str, path: str, **kwargs: Any) -> M:
        raise NotImplementedError

    def _answer(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        raise NotImplementedError

    def plane_names(self) -> builtins.list[str]:
        """The compute planes' names, read without the planes' models."""
        response = self._answer("GET", "/v1/planes")
        try:
            return [str(plane["name"]) for plane in response.json()["planes"]]
        except (ValueError, TypeError, KeyError) as exc:
            raise ServerError(f"the answer of GET /v1/planes is not a PlaneList: {exc!r}",
                              fix="check that the client and the control plane have the "
                                  "same version") from None

    def planes(self) -> builtins.list[PlaneView]:
        """Every compute plane: its state, nodes and the jobs it holds."""
        from phalanx.spec.planes import PlaneList

        return self._request(PlaneList, "GET", "/v1/planes").planes

    def plane(self, name: str) -> PlaneView:
        from phalanx.spec.planes import PlaneView

        return self._request(PlaneView, "GET", _path(name))

    def add_plane(self, name: str, description: str = "") -> PlaneKey:
        """Register a compute plane; the answer holds its key, shown this once."""
        from phalanx.spec.planes import PlaneCreate, PlaneKey

        return self._request(PlaneKey, "POST", "/v1/planes",
                             json=PlaneCreate(name=name, description=description).to_dict())

    def rotate_plane_key(self, name: str) -> PlaneKey:
        """Another key for the plane; the old one works until revoked (`phalanx keys revoke`)."""
        from phalanx.spec.planes import PlaneKey

        return self._request(PlaneKey, "POST", _path(name, "keys"))

    def cordon_plane(self, name: str, cordoned: bool = True) -> PlaneView:
        from phalanx.spec.planes import PlaneFlags, PlaneView

        return self._request(PlaneView, "POST", _path(name, "cordon"),
                             json=PlaneFlags(cordoned=cordoned).to_dict())

    def drain_plane(self, name: str, move: bool = False) -> PlaneDrained:
        from phalanx.spec.planes import PlaneDrain, PlaneDrained

        return self._request(PlaneDrained, "POST", _path(name, "drain"),
                             json=PlaneDrain(move=move).to_dict())

    def remove_plane(self, name: str, force: bool = False) -> PlaneView:
        from phalanx.spec.planes import PlaneView

        return self._request(PlaneView, "DELETE", _path(name),
                             params={"force": "true" if force else "false"})
