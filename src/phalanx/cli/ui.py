"""``phalanx ui``: open the control plane's web dashboard in the user's browser.

It prints where the dashboard is and where the API key to sign in with is kept; the
key never goes into the URL (browsers keep URLs in their history).
"""

from __future__ import annotations

import webbrowser
from typing import Annotated

import typer

from phalanx.cli.output import note, out, reports_errors
from phalanx.defaults import TOKEN_FILE, phalanx_home
from phalanx.sdk.client import Client

DASHBOARD_PATH = "/ui/"


@reports_errors
def ui(
    ctx: typer.Context,
    open_browser: Annotated[
        bool, typer.Option("--open/--no-open", help="Open it in the default browser")
    ] = True,
) -> None:
    """Open the web dashboard (sign in with the API key it names)."""
    settings = ctx.obj
    home = getattr(settings, "home", None)
    client: Client = settings.client(timeout=5.0) if settings is not None else Client()
    with client:
        client.version()  # reachable, with this token, or a clear error
        url = client.url.rstrip("/") + DASHBOARD_PATH
    out().print(url)
    note(f"sign in with the API key in {phalanx_home(home) / TOKEN_FILE} "
         "(or $PHALANX_TOKEN)")
    if open_browser and not webbrowser.open(url):
        note("no browser to open here: open the address above")
