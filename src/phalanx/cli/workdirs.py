"""``phalanx workdirs``: the uploaded working directories the control plane keeps."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from phalanx.cli.output import note, out, print_json, reports_errors
from phalanx.cli.settings import settings_of

app = typer.Typer(help="Uploaded working directories (workdir): prune those no job needs.",
                  no_args_is_help=True)


def _size(count: int) -> str:
    return f"{count / 2**20:.1f} MiB" if count >= 2**20 else f"{count} B"


@app.command("prune")
@reports_errors
def prune(
    ctx: typer.Context,
    older_than: Annotated[str | None, typer.Option(
        "--older-than", help="Remove archives unused this long, e.g. 12h, 7d (default: the "
        "control plane's --workdir-retention, else 7d)")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Only say what would go")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON")] = False,
) -> None:
    """(Admin) Remove the uploaded workdirs that no job still queued or running names and
    that no one uploaded or submitted for a while; the control plane also does it hourly."""
    with settings_of(ctx).client() as client:
        result = client.prune_workdirs(older_than, dry_run=dry_run)
    if as_json:
        print_json(result.to_dict())
        return
    if result.removed:
        table = Table(box=None, header_style="bold", pad_edge=False)
        for column in ("SHA256", "SIZE", "UNUSED FOR"):
            table.add_column(column)
        for archive in result.removed:
            table.add_row(archive.sha256[:12], _size(archive.size),
                          f"{archive.idle_seconds / 86400:.1f}d")
        out().print(table)
    verb = "would remove" if result.dry_run else "removed"
    note(f"{verb} {len(result.removed)} archive(s), {_size(result.removed_bytes)}; kept "
         f"{result.kept_in_use} named by live jobs and {result.kept_recent} used within "
         f"{result.older_than / 86400:g}d")
