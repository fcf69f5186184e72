"""Verbs about the control plane, the cluster's configuration and its nodes: status,
version, apply, config, queues, nodes, cordon, uncordon, drain."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer
import yaml

from phalanx.cli import planeinfo, render
from phalanx.cli.output import note, out, print_json, read_input, reports_errors, write_line
from phalanx.cli.settings import settings_of
from phalanx.errors import AuthError, ConnectionFailed
from phalanx.spec import load_config_yaml, parse_duration
from phalanx.version import __version__


@reports_errors
def status(
    ctx: typer.Context,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON")] = False,
) -> None:
    """Whether the control plane runs, where, how many jobs it holds, and each compute
    plane: its state, nodes, running jobs and the CPUs and GPUs they use."""
    with settings_of(ctx).client() as client:
        info = client.status()
        if as_json:
            print_json({"url": client.url, **info.to_dict()})
        else:
            out().print(render.status_view(info, client.url))
            if info.planes:
                out().print()
                out().print(planeinfo.planes_table(info.planes))


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
    from phalanx.scheduler import COMPILED  # only here: the core is heavy for other verbs

    core = "compiled" if COMPILED else "python"
    if as_json:
        print_json({"client": __version__, "server": server, "url": client.url,
                    "schedulerCore": core})
        return
    out().print(f"client {__version__} (scheduler core: {core})")
    out().print(f"server {server} at {client.url}" if server else f"server: {problem}")


# --------------------------------------------------------------------------- config
@reports_errors
def apply(
    ctx: typer.Context,
    file: Annotated[Path, typer.Option("--file", "-f", help="YAML file of config documents "
                                       "('-': standard input)")],
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON")] = False,
) -> None:
    """Create or update flavors, cohorts, queues and priority classes (all or nothing);
    Kueue's own objects (kueue.x-k8s.io) are read too."""
    text, source = read_input(file)
    notes: list[str] = []
    # Checked here first: bad input sends nothing.
    documents = [obj.to_dict() for obj in load_config_yaml(text, source=source, notes=notes)]
    for said in notes:
        note(said)
    with settings_of(ctx).client() as client:
        applied = client.apply(documents)
    if as_json:
        print_json([a.to_dict() for a in applied])
        return
    for line in render.applied_lines(applied):
        out().print(line, markup=False)


@reports_errors
def config(ctx: typer.Context) -> None:
    """Print the current queue configuration as YAML documents."""
    with settings_of(ctx).client() as client:
        documents = client.config()
    sys.stdout.write(yaml.safe_dump_all([d.to_dict() for d in documents], sort_keys=False))


@reports_errors
def queues(
    ctx: typer.Context,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON")] = False,
) -> None:
    """ClusterQueues with quota and usage per flavor and resource, and LocalQueues."""
    with settings_of(ctx).client() as client:
        data = client.queues()
    if as_json:
        print_json(data.to_dict())
    else:
        out().print(render.queues_view(data))


@reports_errors
def nodes(
    ctx: typer.Context,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON")] = False,
) -> None:
    """Nodes with allocatable and used resources, labels and health."""
    with settings_of(ctx).client() as client:
        items = client.nodes()
    if as_json:
        print_json([n.to_dict() for n in items])
    else:
        out().print(render.nodes_table(items))


@reports_errors
def pools(
    ctx: typer.Context,
    job: Annotated[str | None, typer.Option("--job", help="Every attempt of this job")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON")] = False,
) -> None:
    """Node pools bought for pending gangs (with --job: every attempt, and why each failed)."""
    with settings_of(ctx).client() as client:
        items = client.pools(job)
    if as_json:
        print_json([p.to_dict() for p in items])
    else:
        out().print(render.pools_table(items))


@reports_errors
def node(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="Node name")],
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON")] = False,
) -> None:
    """A node's health, cordon and the last answer of each of its health checks."""
    with settings_of(ctx).client() as client:
        found = client.node(name)
    if as_json:
        print_json(found.to_dict())
    else:
        out().print(render.node_view(found))


@reports_errors
def cordon(ctx: typer.Context, name: Annotated[str, typer.Argument(help="Node name")]) -> None:
    """Place no new pods on a node; what runs there keeps running."""
    with settings_of(ctx).client() as client:
        client.cordon(name)
    note(f"node {name} cordoned")


@reports_errors
def uncordon(ctx: typer.Context, name: Annotated[str, typer.Argument(help="Node name")]) -> None:
    """Let the scheduler place pods on a cordoned node again."""
    with settings_of(ctx).client() as client:
        client.uncordon(name)
    note(f"node {name} uncordoned")


@reports_errors
def drain(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="Node name")],
    grace: Annotated[str | None, typer.Option(
        help="Time the gangs on the node get to stop, e.g. 5m (default: the control "
        "plane's grace)")] = None,
) -> None:
    """Cordon a node and stop the gangs on it; they requeue onto other nodes (system failures)."""
    seconds = parse_duration(grace, field="--grace") if grace is not None else None
    with settings_of(ctx).client() as client:
        drained = client.drain(name, seconds)
    for job in drained.stopped:
        write_line(job)
    note(f"node {name} cordoned; {len(drained.stopped)} job(s) stopping to be requeued")


def register(app: typer.Typer) -> None:
    for verb in (status, version, apply, config, queues, nodes, pools, node, cordon, uncordon,
                 drain):
        app.command()(verb)
