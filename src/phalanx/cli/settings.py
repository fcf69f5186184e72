"""The global options every verb shares (``--url``, ``--token``, ``--home``, ``--as``) and
the client they make."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

import typer

from phalanx.defaults import phalanx_home
from phalanx.sdk.client import Client
from phalanx.sdk.credentials import TokenFile


class Compute(StrEnum):
    """The compute planes `phalanx up` and `phalanx worker` can drive."""

    LOCAL = "local"
    SIMULATED = "simulated"
    KUBERNETES = "kubernetes"


@dataclass(frozen=True, slots=True)
class Settings:
    url: str | None = None
    token: str | None = None
    home: Path | None = None
    act_as: str | None = None  # an admin acting as this user (`--as`)

    def client(self, timeout: float = 30.0) -> Client:
        """A client whose tokens outlive the command (``credentials.TokenFile``)."""
        client = Client(self.url, self.token, home=self.home, timeout=timeout,
                        act_as=self.act_as)
        if client.auth is not None:
            client.auth.store = TokenFile(client.url)
        return client

    @property
    def state_dir(self) -> Path:
        return phalanx_home(self.home)


def settings_of(ctx: typer.Context) -> Settings:
    return ctx.obj if isinstance(ctx.obj, Settings) else Settings()
