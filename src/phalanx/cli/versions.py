"""`phalanx version`: the client's version and build, and the server's."""

from __future__ import annotations

from importlib.machinery import PathFinder
from importlib.util import find_spec
from typing import Annotated

import typer

from phalanx.cli.output import escape_controls, print_json, reports_errors, write_line
from phalanx.cli.settings import settings_of
from phalanx.errors import AuthError, ConnectionFailed
from phalanx.version import __version__


def scheduler_core() -> str:
    """``compiled`` or ``python``: the build of the scheduler core an import would load
    (``phalanx.scheduler.COMPILED``), found without importing the core, which takes
    several times longer to load than this verb takes to answer."""
    package = find_spec("phalanx.scheduler")  # the spec only: the package is not run
    locations = package.submodule_search_locations if package is not None else None
    # The same finder an import uses, so a compiled module beside its .py source wins as
    # it would there.
    core = PathFinder.find_spec("phalanx.scheduler.core", locations)
    origin = core.origin if core is not None else None
    return "python" if origin is None or origin.endswith(".py") else "compiled"


@reports_errors
def version(
    ctx: typer.Context,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON")] = False,
) -> None:
    """The client's version, and the server's when it is reachable."""
    server: str | None = None
    problem = ""
    with settings_of(ctx).client(timeout=5.0) as client:
        try:
            server = client.version()
        except (ConnectionFailed, AuthError) as exc:
            problem = exc.message
    core = scheduler_core()
    if as_json:
        print_json({"client": __version__, "server": server, "url": client.url,
                    "schedulerCore": core})
        return
    # Two plain lines: no table to draw, so no rich console to load (a server's words are
    # shown, not obeyed, as every console of the CLI shows them).
    write_line(f"client {__version__} (scheduler core: {core})")
    write_line(escape_controls(f"server {server} at {client.url}" if server
                               else f"server: {problem}"))
