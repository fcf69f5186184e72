"""The ``phalanx`` command line: start the control plane, submit and watch jobs, set queues.

Exit codes scripts can rely on: 0 success, 1 a failed or cancelled job or an
unreachable/broken server, 2 bad input (nothing was sent or changed).
"""

from __future__ import annotations

import re
import sys
import time
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer
import yaml
from rich.console import Group, RenderableType
from rich.live import Live
from rich.text import Text

from phalanx.cli import daemon, k8s, render, sim
from phalanx.cli.output import EXIT_FAILED, err, note, out, print_json, reports_errors
from phalanx.defaults import DEFAULT_HOST, DEFAULT_PORT, phalanx_home
from phalanx.errors import AuthError, ConnectionFailed, SpecError
from phalanx.sdk.client import Client
from phalanx.sdk.documents import to_config_documents, to_job_spec
from phalanx.spec import JobSpec, parse_duration, validate
from phalanx.spec.status import JobDetail, JobRecord, JobStatus
from phalanx.version import __version__

app = typer.Typer(
    name="phalanx",
    help="Queue, gang-schedule and run distributed training jobs.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

WATCH_SECONDS = 1.0
# Finished jobs and their logs are deleted a week after they finish unless `up` says
# otherwise: long enough to look at last week's runs, short enough that the store and the
# log directory stop growing with every job ever run.
DEFAULT_FINISHED_TTL = "7d"



@dataclass(frozen=True, slots=True)
class Settings:
    url: str | None = None
    token: str | None = None
    home: Path | None = None

    def client(self, timeout: float = 30.0) -> Client:
        return Client(self.url, self.token, home=self.home, timeout=timeout)

    @property
    def state_dir(self) -> Path:
        return phalanx_home(self.home)


def _settings(ctx: typer.Context) -> Settings:
    return ctx.obj if isinstance(ctx.obj, Settings) else Settings()


@app.callback()
def main(
    ctx: typer.Context,
    url: Annotated[
        str | None,
        typer.Option(help="Control plane URL (default: $PHALANX_URL, else server.json)"),
    ] = None,
    token: Annotated[
        str | None,
        typer.Option(help="API token (default: $PHALANX_TOKEN, else $PHALANX_HOME/token)"),
    ] = None,
    home: Annotated[
        Path | None,
        typer.Option(help="State directory (default: $PHALANX_HOME, else ~/.phalanx)"),
    ] = None,
) -> None:
    ctx.obj = Settings(url=url, token=token, home=home)


# --------------------------------------------------------------------------- server
def _finished_ttl(text: str) -> float | None:
    try:
        seconds = parse_duration(text)
    except SpecError as exc:
        raise SpecError(exc.message, field="--finished-ttl", fix="write e.g. 12h, 7d or 0")
    return seconds or None


class Compute(StrEnum):
    LOCAL = "local"
    SIMULATED = "simulated"
    KUBERNETES = "kubernetes"


@app.command()
@reports_errors
def up(
    ctx: typer.Context,
    detach: Annotated[
        bool, typer.Option("--detach", "-d", help="Run in the background; return once it answers")
    ] = False,
    host: Annotated[str, typer.Option(help="Address to listen on")] = DEFAULT_HOST,
    port: Annotated[int, typer.Option(help="Port to listen on (0: any free port)")] = DEFAULT_PORT,
    db: Annotated[
        str | None, typer.Option(help="Store URL, e.g. postgresql://... (default: a SQLite file)")
    ] = None,
    compute: Annotated[Compute, typer.Option(help="Compute plane")] = Compute.LOCAL,
    nodes: Annotated[
        Path | None,
        typer.Option(
            help="YAML file of nodes (for --compute simulated)",
            exists=True, dir_okay=False, resolve_path=True,
        ),
    ] = None,
    kubeconfig: Annotated[
        Path | None,
        typer.Option(
            help="Kubeconfig (--compute kubernetes; default: in-cluster, then ~/.kube/config)",
            exists=True, dir_okay=False, resolve_path=True,
        ),
    ] = None,
    namespace: Annotated[
        str | None,
        typer.Option(help="Namespace the job pods run in (for --compute kubernetes)"),
    ] = None,
    default_image: Annotated[
        str | None,
        typer.Option(help="Image of pod sets that name none (for --compute kubernetes; "
                     "without it such jobs are refused)"),
    ] = None,
    finished_ttl: Annotated[
        str, typer.Option(help="Delete finished jobs and their logs this long after they "
                          "finish, e.g. 12h, 7d (0: keep them for ever)")
    ] = DEFAULT_FINISHED_TTL,
    timeout: Annotated[
        float, typer.Option(help="With -d: seconds to wait for the server to answer")
    ] = 30.0,
) -> None:
    """Start the embedded control plane (foreground, or in the background with -d)."""
    home = _settings(ctx).state_dir
    ttl = _finished_ttl(finished_ttl)
    if not detach:
        from phalanx.server import serve  # the server's dependencies load only when serving

        serve(
            home=home, host=host, port=port, db=db, compute=compute.value, nodes_file=nodes,
            kubeconfig=kubeconfig, namespace=namespace, default_image=default_image,
            finished_ttl=ttl,
        )
        return
    running = daemon.server_info(home)
    if running is not None and daemon.healthz(running.url):
        note(f"A Phalanx control plane is already running at {running.url} (pid {running.pid}).")
        return
    args = ["--host", host, "--port", str(port), "--compute", compute.value]
    if db:
        args += ["--db", db]
    if nodes:
        args += ["--nodes", str(nodes)]
    if kubeconfig:
        args += ["--kubeconfig", str(kubeconfig)]
    if namespace:
        args += ["--namespace", namespace]
    if default_image is not None:
        args += ["--default-image", default_image]
    args += ["--finished-ttl", finished_ttl]
    try:
        with err.status("Starting the Phalanx control plane...") as spinner:
            info = daemon.start_detached(
                home, args, timeout, on_progress=lambda msg: spinner.update(msg)
            )
    except daemon.ServerStartFailed as exc:
        if exc.log:
            err.print(exc.log, markup=False, highlight=False)
        raise
    note(f"Phalanx control plane running at {info.url} (pid {info.pid})", style="green")
    note(f"state in {home}, log in {home / 'server.log'}; stop it with `phalanx down`")


@app.command()
@reports_errors
def down(
    ctx: typer.Context,
    timeout: Annotated[
        float, typer.Option(help="Seconds to wait after SIGTERM before SIGKILL")
    ] = 30.0,
) -> None:
    """Stop the control plane running on this state directory."""
    home = _settings(ctx).state_dir
    result = daemon.stop_server(home, timeout)
    if result is daemon.StopResult.NOT_RUNNING:
        note(f"No Phalanx control plane is running on {home}.")
    elif result is daemon.StopResult.KILLED:
        note(f"The control plane did not stop within {timeout:g}s and was killed.", style="yellow")
    else:
        note("Phalanx control plane stopped.", style="green")


@app.command()
@reports_errors
def status(
    ctx: typer.Context,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON")] = False,
) -> None:
    """Whether the control plane runs, where, and how many jobs it holds."""
    with _settings(ctx).client() as client:
        info = client.status()
        if as_json:
            print_json({"url": client.url, **info.to_dict()})
        else:
            out().print(render.status_view(info, client.url))


@app.command()
@reports_errors
def version(
    ctx: typer.Context,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON")] = False,
) -> None:
    """The client's version, and the server's when it is reachable."""
    server: str | None = None
    problem = ""
    with _settings(ctx).client(timeout=5.0) as client:
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
@app.command()
@reports_errors
def apply(
    ctx: typer.Context,
    file: Annotated[Path, typer.Option("--file", "-f", help="YAML file of config documents")],
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON")] = False,
) -> None:
    """Create or update flavors, cohorts, queues and priority classes (all or nothing)."""
    documents = to_config_documents(file)  # checked here first: bad input sends nothing
    with _settings(ctx).client() as client:
        applied = client.apply(documents)
    if as_json:
        print_json([a.to_dict() for a in applied])
        return
    for line in render.applied_lines(applied):
        out().print(line, markup=False)


@app.command()
@reports_errors
def config(ctx: typer.Context) -> None:
    """Print the current queue configuration as YAML documents."""
    with _settings(ctx).client() as client:
        documents = client.config()
    sys.stdout.write(yaml.safe_dump_all([d.to_dict() for d in documents], sort_keys=False))


@app.command()
@reports_errors
def queues(
    ctx: typer.Context,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON")] = False,
) -> None:
    """ClusterQueues with quota and usage per flavor and resource, and LocalQueues."""
    with _settings(ctx).client() as client:
        data = client.queues()
    if as_json:
        print_json(data.to_dict())
    else:
        out().print(render.queues_view(data))


@app.command()
@reports_errors
def nodes(
    ctx: typer.Context,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON")] = False,
) -> None:
    """Nodes with allocatable and used resources, labels and health."""
    with _settings(ctx).client() as client:
        items = client.nodes()
    if as_json:
        print_json([n.to_dict() for n in items])
    else:
        out().print(render.nodes_table(items))


# --------------------------------------------------------------------------- jobs
_INTEGER = re.compile(r"^-?\d+$")


def _with_overrides(
    spec: JobSpec, name: str | None, queue: str | None, priority: str | None
) -> JobSpec:
    overrides: dict[str, Any] = {}
    if name is not None:
        overrides["name"] = name
    if queue is not None:
        overrides["queue"] = queue
    if priority is not None:
        overrides["priority"] = int(priority) if _INTEGER.match(priority) else priority
    if not overrides:
        return spec
    return validate(JobSpec, {**spec.to_dict(), **overrides})


def _write_line(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def _finish(client: Client, name: str) -> None:
    """Wait for the job with a spinner; exit 0 only if it succeeded."""
    with err.status(f"{name}: waiting") as spinner:

        def show(job: JobDetail) -> None:
            reason = render.reason_text(job)
            spinner.update(f"{name}: {job.status.value}" + (f" - {reason}" if reason else ""))

        record = client.wait(name, on_update=show)
    _report_outcome(record)
    if record.status is not JobStatus.SUCCEEDED:
        raise typer.Exit(EXIT_FAILED)


def _report_outcome(record: JobRecord) -> None:
    style = render.STATUS_STYLES.get(record.status, "")
    detail = f": {record.message}" if record.message else ""
    took = ""
    if record.started_at is not None:
        took = f" (ran {render.elapsed(record.started_at, record.finished_at)})"
    note(f"job {record.name} {record.status.value}{detail}{took}", style=style)


@app.command()
@reports_errors
def submit(
    ctx: typer.Context,
    file: Annotated[Path, typer.Option("--file", "-f", help="YAML file of one job")],
    wait: Annotated[
        bool, typer.Option("--wait", help="Wait for the job; exit 0 only if it succeeded")
    ] = False,
    follow: Annotated[
        bool, typer.Option("--follow", help="Stream the job's logs, then behave like --wait")
    ] = False,
    name: Annotated[str | None, typer.Option(help="Override the job's name")] = None,
    queue: Annotated[str | None, typer.Option(help="Override the LocalQueue")] = None,
    priority: Annotated[
        str | None, typer.Option(help="Override the priority (class name or integer)")
    ] = None,
) -> None:
    """Submit a job; prints its name (alone on its line) on stdout."""
    spec = _with_overrides(to_job_spec(file), name, queue, priority)
    with _settings(ctx).client() as client:
        record = client.submit(spec)
        _write_line(record.name)
        note(f"job {record.name} submitted to queue {record.queue} ({record.status.value})")
        if follow:
            for line in client.logs(record.name, follow=True):
                _write_line(line)
        if wait or follow:
            _finish(client, record.name)


def _recent(records: list[JobRecord], now: float) -> list[JobRecord]:
    return [
        r for r in records
        if not r.status.terminal or (r.finished_at or r.submitted_at) >= now - RECENT_SECONDS
    ]


def _job_view(records: list[JobRecord], show_all: bool, filtered: bool) -> RenderableType:
    now = time.time()
    shown = records if show_all or filtered else _recent(records, now)
    parts: list[RenderableType] = []
    if shown:
        parts.append(render.jobs_table(shown, now))
    else:
        parts.append(Text("No jobs." if not records else "No recent jobs."))
    hidden = len(records) - len(shown)
    if hidden:
        parts.append(Text(
            f"{hidden} job(s) finished over an hour ago are hidden; --all shows them.", style="dim"
        ))
    return Group(*parts)


@app.command()
@reports_errors
def jobs(
    ctx: typer.Context,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON")] = False,
    show_all: Annotated[
        bool, typer.Option("--all", "-a", help="Include jobs that finished over an hour ago")
    ] = False,
    status: Annotated[
        list[str] | None,
        typer.Option("--status", "-s", help="Only jobs with this status (repeatable)"),
    ] = None,
    queue: Annotated[str | None, typer.Option("--queue", "-q", help="Only this LocalQueue")] = None,
    watch: Annotated[
        bool, typer.Option("--watch", "-w", help="Keep the table up to date until Ctrl-C")
    ] = False,
) -> None:
    """List jobs: active ones and those finished within the hour (--all for every job)."""
    with _settings(ctx).client() as client:
        records = client.list(status=status or None, queue=queue)
        if as_json:
            now = time.time()
            shown = records if show_all or status else _recent(records, now)
            print_json([r.to_dict() for r in shown])
            return
        view = _job_view(records, show_all, bool(status))
        if not watch:
            out().print(view)
            return
        with Live(view, console=out(), auto_refresh=False) as live:
            while True:
                time.sleep(WATCH_SECONDS)
                records = client.list(status=status or None, queue=queue)
                live.update(_job_view(records, show_all, bool(status)), refresh=True)


@app.command()
@reports_errors
def describe(
    ctx: typer.Context,
    job: Annotated[str, typer.Argument(help="Job name")],
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON")] = False,
) -> None:
    """A job's spec, status, placement, pods, events and why it is pending."""
    with _settings(ctx).client() as client:
        detail = client.get(job)
    if as_json:
        print_json(detail.to_dict())
    else:
        out().print(render.describe_job(detail))


@app.command()
@reports_errors
def logs(
    ctx: typer.Context,
    job: Annotated[str, typer.Argument(help="Job name")],
    pod: Annotated[
        str | None, typer.Option("--pod", "--rank", help="One pod: its rank number or its name")
    ] = None,
    follow: Annotated[
        bool, typer.Option("--follow", "-f", help="Keep streaming until the job finishes")
    ] = False,
) -> None:
    """Print a job's logs (all pods, each line prefixed by its pod, or one pod)."""
    with _settings(ctx).client() as client:
        for line in client.logs(job, pod=pod, follow=follow):
            _write_line(line)


@app.command()
@reports_errors
def cancel(
    ctx: typer.Context,
    job: Annotated[str, typer.Argument(help="Job name")],
    wait: Annotated[bool, typer.Option("--wait", help="Wait until its pods are gone")] = False,
) -> None:
    """Cancel a job: its pods get SIGTERM, then SIGKILL after a grace period."""
    with _settings(ctx).client() as client:
        record = client.cancel(job)
        if record.status.terminal and record.status is not JobStatus.CANCELLED:
            note(f"job {job} already {record.status.value}; nothing to cancel")
            return
        if wait and not record.status.terminal:
            record = client.wait(job)
    note(f"job {job} {'cancelled' if record.status.terminal else 'cancelling'}")


app.command("sim")(sim.sim)
app.add_typer(k8s.app, name="k8s")

if __name__ == "__main__":
    app()
