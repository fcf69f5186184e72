"""The global options every verb shares (``--url``, ``--token``, ``--home``, ``--as``) and
the client they make."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from phalanx.defaults import phalanx_home
from phalanx.sdk.credentials import TokenFile

if TYPE_CHECKING:
    from phalanx.sdk.client import Client


@dataclass(frozen=True, slots=True)
class Settings:
    url: str | None = None
    token: str | None = None
    home: Path | None = None
    act_as: str | None = None  # an admin acting as this user (`--as`)

    def client(self, timeout: float = 30.0) -> Client:
        """A client whose tokens outlive the command (``credentials.TokenFile``)."""
        # Imported here: verbs that never call the server (sim, doctor, k8s, --help) should
        # not load the HTTP client and the API's models.
        from phalanx.sdk.client import Client

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
