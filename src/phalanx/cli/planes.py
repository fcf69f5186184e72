"""``phalanx plane``: the compute planes behind this control plane (clusters whose worker
dials in): add, list, describe, cordon, uncordon, drain, remove, rotate-key."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from phalanx.cli.output import note, out, print_json, reports_errors
from phalanx.cli.planeinfo import holds_text
from phalanx.cli.settings import settings_of
from phalanx.errors import Conflict
from phalanx.spec import format_amount
from phalanx.spec.planes import PlaneKey, PlaneView

app = typer.Typer(help="Compute planes that dial in: add, list, describe, cordon, drain, "
                       "remove.", no_args_is_help=True, add_completion=False)
WAIT_POLL = 1.0


def _write_key(path: Path, key: PlaneKey) -> None:
    """The key, owner-only (0600), into a new file: it is shown this once."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        raise Conflict(f"{path} exists", field="--key-file",
                       fix="name a new file (the key is written once)") from None
    with os.fdopen(fd, "w") as handle:
        handle.write(key.key + "\n")


def _age(when: float | None) -> str:
    return "-" if when is None else f"{max(0.0, time.time() - when):.0f}s ago"


def _resources(plane: PlaneView) -> str:
    return " ".join(f"{res}={format_amount(plane.used.get(res, 0), res)}/"
                    f"{format_amount(amount, res)}"
                    for res, amount in sorted(plane.allocatable.items())) or "-"


def _table(planes: list[PlaneView]) -> Table:
    table = Table(box=None)
    for column in ("NAME", "STATE", "NODES", "JOBS", "HOLDS", "LAST SEEN", "FLAGS"):
        table.add_column(column)
    for p in planes:
        flags = ",".join(f for f, on in (("cordoned", p.cordoned), ("draining", p.draining))
                         if on) or "-"
        jobs = ", ".join(p.jobs[:4]) + (f" +{len(p.jobs) - 4}" if len(p.jobs) > 4 else "")
        table.add_row(p.name, p.state, str(p.nodes), jobs or "-", holds_text(p),
                      _age(p.last_seen), flags)
    return table


@app.command()
@reports_errors
def add(
    ctx: typer.Context, name: Annotated[str, typer.Argument(help="The plane's name")],
    key_file: Annotated[Path, typer.Option(help="Where to write its API key (mode 0600)")],
    rotate: Annotated[bool, typer.Option(help="The plane exists: write another key of it (the "
                                         "old one works until revoked)")] = False,
) -> None:
    """Register a compute plane and write its key to KEY_FILE, shown once."""
    with settings_of(ctx).client() as client:
        key = client.rotate_plane_key(name) if rotate else client.add_plane(name)
    _write_key(key_file, key)
    note(f"compute plane {name}: key {key.key_id} written to {key_file}; run "
         f"`phalanx worker --control-plane URL --plane {name} --api-key-file {key_file}`")


@app.command("list")
@reports_errors
def list_planes(ctx: typer.Context,
                as_json: Annotated[bool, typer.Option("--json", help="Print JSON")] = False
                ) -> None:
    """Every compute plane, its state and what it holds (a silent plane keeps its jobs'
    quota until it is lost)."""
    with settings_of(ctx).client() as client:
        planes = client.planes()
    if as_json:
        print_json([p.to_dict() for p in planes])
    else:
        out().print(_table(planes))


@app.command()
@reports_errors
def describe(ctx: typer.Context, name: str,
             as_json: Annotated[bool, typer.Option("--json", help="Print JSON")] = False) -> None:
    """One compute plane: state, worker, fence, nodes and the jobs it holds."""
    with settings_of(ctx).client() as client:
        plane = client.plane(name)
    if as_json:
        print_json(plane.to_dict())
        return
    lines = [f"Name: {plane.name}", f"State: {plane.state}", f"Nodes: {plane.nodes}",
             f"Worker: {plane.worker or '-'} (fence after "
             f"{'-' if plane.fence_after is None else f'{plane.fence_after:g}s'})",
             f"Last seen: {_age(plane.last_seen)}",
             f"Cordoned: {plane.cordoned}  Draining: {plane.draining}",
             f"Resources (used/allocatable): {_resources(plane)}",
             f"Holds: {holds_text(plane)}",
             f"Jobs ({len(plane.jobs)}; they keep their quota while the plane is silent): "
             + (", ".join(plane.jobs) or "-")]
    out().print("\n".join(lines), markup=False)


@app.command()
@reports_errors
def cordon(ctx: typer.Context, name: str) -> None:
    """Take no new placements on the plane."""
    with settings_of(ctx).client() as client:
        client.cordon_plane(name, True)
    note(f"compute plane {name} cordoned")


@app.command()
@reports_errors
def uncordon(ctx: typer.Context, name: str) -> None:
    with settings_of(ctx).client() as client:
        client.cordon_plane(name, False)
    note(f"compute plane {name} takes placements again")


@app.command()
@reports_errors
def drain(
    ctx: typer.Context, name: str,
    move: Annotated[bool, typer.Option("--move", help="Stop its jobs now; they requeue and "
                                       "may run on another plane")] = False,
    wait: Annotated[bool, typer.Option("--wait", help="Return once no job runs there")] = False,
) -> None:
    """Stop new work on the plane, and move its jobs (--move) or wait for them (--wait)."""
    with settings_of(ctx).client() as client:
        drained = client.drain_plane(name, move=move)
        if drained.stopped:
            note(f"stopped {len(drained.stopped)} job(s): {', '.join(drained.stopped)}")
        while wait and client.plane(name).jobs:
            time.sleep(WAIT_POLL)
        running = client.plane(name).jobs
    note(f"compute plane {name} is draining; "
         + (f"{len(running)} job(s) still there" if running else "no job runs there"))


@app.command()
@reports_errors
def remove(
    ctx: typer.Context, name: str,
    force: Annotated[bool, typer.Option(
        help="Even while jobs run there: they are requeued, and start elsewhere once the "
             "plane's fence has surely stopped their pods")] = False,
) -> None:
    """Unregister the plane and revoke its keys; refused while jobs run there."""
    with settings_of(ctx).client() as client:
        running = client.plane(name).jobs if force else []
        client.remove_plane(name, force=force)
    note(f"compute plane {name} removed; its keys are revoked")
    if running:
        note(f"{len(running)} job(s) requeued, held until its fence has surely stopped "
             f"their pods there: {', '.join(running)}", style="yellow")
