"""``phalanx login``, ``logout`` and ``whoami``: one stored API key per control plane.

The key is read from a prompt that does not echo it, or from stdin when stdin is not a
terminal (``phalanx login < key.txt``); never from the command line, where other users
see it in the process list and it stays in the shell's history.
"""

from __future__ import annotations

import getpass
import sys
from typing import Annotated

import typer

from phalanx.cli.output import note, out, print_json, reports_errors
from phalanx.cli.settings import settings_of
from phalanx.errors import SpecError
from phalanx.sdk.client import Client
from phalanx.sdk.credentials import TokenFile, remove_context, save_context


def _read_key() -> str:
    # A terminal gets a prompt that does not echo; a pipe gives its first line.
    key = (getpass.getpass("API key: ") if sys.stdin.isatty() else sys.stdin.readline()).strip()
    if not key:
        raise SpecError("no API key was given", field="key",
                        fix="paste the key at the prompt, or pipe it: `phalanx login < key.txt`")
    return key


@reports_errors
def login(
    ctx: typer.Context,
    url: Annotated[str | None, typer.Option(
        "--url", help="The control plane (default: the global --url, $PHALANX_URL or the "
        "local one)")] = None,
) -> None:
    """Store an API key for a control plane (read from a prompt or stdin) and use it from
    now on."""
    settings = settings_of(ctx)
    key = _read_key()
    with Client(url or settings.url, key, home=settings.home) as client:
        me = client.whoami()  # exchanging the key proves it before it is stored
        server = client.url
    path = save_context(server, key, me.user)
    note(f"logged in to {server} as {me.user} ({me.role}); key stored in {path}",
         style="green")


@reports_errors
def logout(
    ctx: typer.Context,
    url: Annotated[str | None, typer.Option("--url", help="The control plane")] = None,
) -> None:
    """Forget the stored key of a control plane (the current one by default)."""
    settings = settings_of(ctx)
    with Client(url or settings.url, "", home=settings.home) as client:
        server = client.url
    TokenFile(server).forget()
    if remove_context(server):
        note(f"logged out of {server}")
    else:
        note(f"no stored key for {server}")


@reports_errors
def whoami(
    ctx: typer.Context,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON")] = False,
) -> None:
    """Who the control plane takes you for: user, role, teams and their queues."""
    with settings_of(ctx).client() as client:
        me = client.whoami()
        server = client.url
    if as_json:
        print_json(me.to_dict())
        return
    out().print(f"{me.user} ({me.role}) at {server}", markup=False)
    out().print(f"teams: {', '.join(me.teams) or '-'}; queues: {', '.join(me.queues) or '-'}; "
                f"key {me.key} (scope {me.scope})", markup=False)


def register(app: typer.Typer) -> None:
    app.command("login")(login)
    app.command("logout")(logout)
    app.command("whoami")(whoami)
