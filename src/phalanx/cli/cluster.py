"""``phalanx cluster``: Ray clusters from the command line, in the shape of ``ray`` and the
CodeFlare SDK (``phalanx.ray``, which these commands use).

``up -f ray.yaml`` submits a ``kind: ray`` job (queued and admitted like any job);
``--wait`` returns once every Ray node is alive and prints the dashboard's URL.
``down NAME`` cancels it: its pods are stopped and the job ends Cancelled.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from phalanx.cli.output import EXIT_FAILED, note, out, print_json, reports_errors
from phalanx.errors import SpecError
from phalanx.ray import Cluster, ClusterStatus, RayCluster, get_cluster, list_clusters
from phalanx.sdk.client import Client
from phalanx.sdk.documents import read_text
from phalanx.spec import load_jobs_yaml
from phalanx.spec.resources import JobKind

app = typer.Typer(
    help="Ray clusters: up, list, status, dashboard, down.",
    no_args_is_help=True,
    add_completion=False,
)


def _client(ctx: typer.Context) -> Client:
    """The client the root command's options (--url, --token, --home) describe."""
    settings: Any = ctx.obj
    return settings.client() if settings is not None else Client()


@app.command()
@reports_errors
def up(
    ctx: typer.Context,
    file: Annotated[Path, typer.Option("--file", "-f", help="YAML file of one kind: ray job")],
    wait: Annotated[
        bool, typer.Option("--wait", help="Return once every Ray node is alive")
    ] = False,
    timeout: Annotated[
        float | None, typer.Option(help="With --wait: give up after this many seconds")
    ] = None,
) -> None:
    """Bring a Ray cluster up (a kind: ray job); prints its name."""
    specs = load_jobs_yaml(read_text(file), source=str(file))
    if len(specs) != 1:
        raise SpecError(f"holds {len(specs)} jobs", field=str(file),
                        fix="put one Ray cluster in the file")
    spec = specs[0]
    if spec.kind is not JobKind.RAY:
        raise SpecError(f"is a {spec.kind.value} job, not a Ray cluster", field="kind",
                        fix="set kind: ray (or submit it with `phalanx submit`)")
    with _client(ctx) as client:
        record = client.submit(spec)
        out().print(record.name, markup=False)
        note(f"cluster {record.name} submitted to queue {record.queue} "
             f"({record.status.value})")
        if not wait:
            return
        cluster = get_cluster(record.name, client)
        cluster.wait_ready(timeout=timeout)
        note(f"cluster {record.name} ready; dashboard {cluster.dashboard_uri()}")


def _table(clusters: list[RayCluster]) -> Table:
    table = Table(box=None, pad_edge=False, header_style="bold")
    for column in ("NAME", "STATUS", "QUEUE", "WORKERS", "WORKER CPU", "WORKER MEMORY",
                   "DASHBOARD"):
        table.add_column(column)
    for c in clusters:
        table.add_row(c.name, c.status.value, c.queue, str(c.num_workers), c.worker_cpu or "-",
                      c.worker_memory or "-", c.dashboard or "-")
    return table


@app.command("list")
@reports_errors
def list_(
    ctx: typer.Context,
    queue: Annotated[str | None, typer.Option("--queue", "-q", help="Only this queue")] = None,
    show_all: Annotated[
        bool, typer.Option("--all", "-a", help="Clusters that are down too")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON")] = False,
) -> None:
    """The Ray clusters that are up (queued, starting or ready), newest first."""
    with _client(ctx) as client:
        clusters = list_clusters(queue, all=show_all, client=client)
    if as_json:
        print_json([c.__dict__ for c in clusters])
    elif clusters:
        out().print(_table(clusters))
    else:
        note("No Ray clusters.")


@app.command()
@reports_errors
def status(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="Cluster name")],
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON")] = False,
) -> None:
    """Where a cluster is: queued, starting, ready, failed or down, with its addresses."""
    with _client(ctx) as client:
        details = get_cluster(name, client).details()
    if as_json:
        print_json(details.__dict__)
        return
    out().print(_table([details]))
    if details.message:
        note(details.message)


@app.command()
@reports_errors
def dashboard(
    ctx: typer.Context, name: Annotated[str, typer.Argument(help="Cluster name")],
    headers: Annotated[bool, typer.Option(
        "--headers", help="Print the headers Ray's clients send with it instead (JSON, for "
        "`ray job submit --headers`): your bearer token, short-lived")] = False,
) -> None:
    """Print the address of a cluster's Ray dashboard, proxied by the control plane
    behind your sign-in (Ray's job API is there too)."""
    with _client(ctx) as client:
        uri = get_cluster(name, client).dashboard_uri()
        if not headers:
            out().print(uri, markup=False)
            return
        token = client.bearer()
        print_json({"Authorization": f"Bearer {token}"} if token else {})


@app.command()
@reports_errors
def down(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="Cluster name")],
    wait: Annotated[bool, typer.Option("--wait", help="Wait until its pods are gone")] = False,
) -> None:
    """Take a cluster down: its pods are stopped and its job ends Cancelled."""
    with _client(ctx) as client:
        cluster: Cluster = get_cluster(name, client)
        cluster.down(wait=wait)
        state, _ = cluster.status()
    note(f"cluster {name} {'down' if state is ClusterStatus.DOWN else 'going down'}")
    if state is ClusterStatus.FAILED:
        raise typer.Exit(EXIT_FAILED)
