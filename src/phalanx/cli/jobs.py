"""The verbs about jobs: submit, wait, jobs, describe, logs, cancel, delete."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Group, RenderableType
from rich.live import Live
from rich.text import Text

from phalanx.cli import planeinfo, render
from phalanx.cli.output import (
    EXIT_FAILED,
    err,
    input_dir,
    note,
    out,
    print_json,
    read_input,
    reports_errors,
    write_line,
)
from phalanx.cli.settings import settings_of
from phalanx.errors import ServerError, SpecError
from phalanx.sdk.client import Client
from phalanx.spec.jobstatus import JobStatus
from phalanx.spec.labels import merge_selectors
from phalanx.spec.rows import JobRows

if TYPE_CHECKING:
    from phalanx.spec import JobSpec
    from phalanx.spec.status import JobDetail, JobList, JobRecord


WATCH_SECONDS = 1.0
# `phalanx jobs` shows this many unless told otherwise, like `gh run list`: drawing every row
# of 20,000 jobs takes longer than anyone waits for a table.
DEFAULT_LIST_LIMIT = 50

_INTEGER = re.compile(r"^-?\d+$")


def _with_overrides(
    spec: JobSpec, name: str | None, queue: str | None, priority: str | None,
    workdir: str | None = None,
) -> JobSpec:
    from phalanx.spec import JobSpec, validate

    overrides: dict[str, Any] = {}
    if workdir is not None:
        overrides["workdir"] = workdir
    if name is not None:
        overrides["name"] = name
    if queue is not None:
        overrides["queue"] = queue
    if priority is not None:
        overrides["priority"] = int(priority) if _INTEGER.match(priority) else priority
    if not overrides:
        return spec
    return validate(JobSpec, {**spec.to_dict(), **overrides})


def _finish(client: Client, name: str, timeout: float | None = None) -> None:
    """Wait for the job with a spinner; exit 0 only if it succeeded. Past ``timeout``
    seconds a ServerError says what it still is (exit 1)."""
    with err.status(f"{name}: waiting") as spinner:

        def show(job: JobDetail) -> None:
            reason = render.reason_text(job)
            where = render.estimate_text(job)
            spinner.update(f"{name}: {job.status.value}" + (f" ({where})" if where else "")
                           + (f" - {reason}" if reason else ""))

        try:
            record = client.wait(name, timeout=timeout, on_update=show)
        except TimeoutError as exc:
            raise ServerError(str(exc), fix="wait longer (--timeout), or look at it with "
                              f"`phalanx describe {name}`") from None
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


@reports_errors
def submit(
    ctx: typer.Context,
    file: Annotated[
        Path, typer.Option("--file", "-f", help="YAML file of one job, or several as documents "
                           "('-': standard input)")
    ],
    wait: Annotated[
        bool, typer.Option("--wait", help="Wait for the jobs; exit 0 only if all succeeded")
    ] = False,
    follow: Annotated[
        bool, typer.Option("--follow", help="Stream the job's logs, then behave like --wait")
    ] = False,
    name: Annotated[str | None, typer.Option(help="Override the job's name")] = None,
    queue: Annotated[str | None, typer.Option(help="Override the LocalQueue")] = None,
    priority: Annotated[
        str | None, typer.Option(help="Override the priority (class name or integer)")
    ] = None,
    env: Annotated[list[str] | None, typer.Option(
        "--env", "-e", help="Set K=V in every pod set's environment (repeatable)")] = None,
    sets: Annotated[list[str] | None, typer.Option(
        "--set", help="Override a field: PATH=VALUE, e.g. podSets[0].replicas=4 (repeatable)",
    )] = None,
    unique: Annotated[bool, typer.Option(
        "--unique", help="If the name is taken, add 5 random characters to it")] = False,
    workdir: Annotated[str | None, typer.Option(
        "--workdir", help="Run in a copy of this directory (relative to the current one): "
        "the jobs' workdir, a manifest's phalanx.dev/workdir annotation")] = None,
) -> None:
    """Submit jobs (several documents: all or none); prints each name on its own line.

    ``-f -`` reads the jobs from standard input. A relative ``workdir`` is relative to the
    file's directory (standard input: the current directory); ``--workdir`` is relative
    to the current directory."""
    from phalanx.spec import JobSpec
    from phalanx.spec.manifests import Translation, load_submissions
    from phalanx.spec.overrides import apply_overrides

    if workdir is not None:
        if not workdir.strip():
            raise SpecError("is empty", field="--workdir",
                            fix="name a directory, e.g. --workdir .")
        workdir = str(Path(workdir).expanduser().resolve())
    # Checked here, every document: bad input sends nothing.
    text, source = read_input(file)
    items = load_submissions(text, source=source)  # Phalanx jobs and Kubernetes manifests
    if len(items) > 1:
        for option, value in (("--name", name), ("--follow", follow or None)):
            if value is not None:
                raise SpecError(f"takes one job; {source} holds {len(items)}", field=option,
                                fix="put that job in a file of its own")
    if any(isinstance(item, Translation) for item in items):
        for option, given in (("--set", sets), ("--env", env), ("--unique", unique)):
            if given:
                raise SpecError(f"{source} holds a Kubernetes manifest, which is submitted "
                                "as written", field=option, fix="change the manifest "
                                "itself, or submit Phalanx jobs to use " + option)
    # --name first: --unique makes the final name the prefix of a generated one.
    items = [item.overridden(name=name, queue=queue, priority=priority, workdir=workdir)
             if isinstance(item, Translation) else
             apply_overrides(_with_overrides(item, name, queue, priority, workdir),
                             sets=sets or (), env=env or (), unique=unique)
             for item in items]
    specs = [item for item in items if isinstance(item, JobSpec)]
    base = input_dir(file)
    with settings_of(ctx).client() as client:
        if len(specs) < len(items):  # manifests go as written, kept with their jobs
            records = client.submit_manifests(items, base=base)
        # One job keeps its own route (a taken name is "name", not "items[0].name").
        elif len(specs) == 1:
            records = [client.submit(specs[0], base=base)]
        else:
            records = client.submit_many(specs, base=base)
        for record in records:
            write_line(record.name)
        if len(records) == 1:
            note(f"job {records[0].name} submitted to queue {records[0].queue} "
                 f"({records[0].status.value})")
        else:
            note(f"{len(records)} jobs submitted")
        if follow:
            for line in client.logs(records[0].name, follow=True):
                write_line(line)
        if wait or follow:
            _wait_all(client, [r.name for r in records])


def _finished_well(client: Client, name: str, timeout: float | None = None) -> bool:
    try:
        _finish(client, name, timeout)
    except typer.Exit:
        return False
    return True


def _wait_all(client: Client, names: list[str], timeout: float | None = None) -> None:
    """Wait for every job in turn (``timeout``: for all of them together); exit 1 if any
    did not succeed, as ``submit --wait`` does."""
    deadline = None if timeout is None else time.monotonic() + timeout
    failed = [name for name in names if not _finished_well(
        client, name, None if deadline is None else max(0.0, deadline - time.monotonic()))]
    if failed:
        raise typer.Exit(EXIT_FAILED)


@reports_errors
def wait_for(
    ctx: typer.Context,
    names: Annotated[list[str], typer.Argument(help="Job names", metavar="JOB...")],
    timeout: Annotated[
        float | None, typer.Option(help="Give up after this many seconds (exit 1)", min=0)
    ] = None,
) -> None:
    """Wait until the jobs end; exit 0 only if all succeeded (as `submit --wait`)."""
    with settings_of(ctx).client() as client:
        for name in names:  # an unknown name is refused before any waiting (exit 2)
            client.get(name)
        _wait_all(client, names, timeout)


def _job_view(page: JobRows, limit: int | None, planes: bool) -> RenderableType:
    parts: list[RenderableType] = []
    parts.append(render.jobs_table(page.items, time.time(), planes=planes) if page.items
                 else Text("No jobs."))
    if page.remaining_item_count:
        parts.append(Text(
            f"... and {page.remaining_item_count:,} more; use --all or --limit "
            f"(showing the newest {limit:,})", style="dim"))
    return Group(*parts)


@reports_errors
def jobs(
    ctx: typer.Context,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON")] = False,
    limit: Annotated[
        int, typer.Option("--limit", "-n", min=1, help="Show the newest N jobs")
    ] = DEFAULT_LIST_LIMIT,
    show_all: Annotated[
        bool, typer.Option("--all", "-a", help="Every job that matches, not only the newest")
    ] = False,
    status: Annotated[
        list[str] | None,
        typer.Option("--status", "-s", help="Only jobs with this status (repeatable)"),
    ] = None,
    queue: Annotated[str | None, typer.Option("--queue", "-q", help="Only this LocalQueue")] = None,
    user: Annotated[str | None, typer.Option("--user", "-u", help="Only jobs of this user")] = None,
    mine: Annotated[bool, typer.Option("--mine", help="Only the jobs you submitted")] = False,
    selector: Annotated[
        list[str] | None,
        typer.Option("--selector", "-l", help="Only jobs with these labels: key=value[,...]"),
    ] = None,
    watch: Annotated[
        bool, typer.Option("--watch", "-w", help="Keep the table up to date until Ctrl-C")
    ] = False,
) -> None:
    """List jobs, newest first: the newest 50 unless --limit or --all says otherwise."""
    labels = merge_selectors(selector, field="--selector")
    shown = None if show_all else limit

    def records(client: Client) -> JobList:
        if shown is None:
            from phalanx.spec.status import JobList

            items = client.list(status=status or None, queue=queue, user=user, labels=labels)
            return JobList(items=items)
        return client.list_page(status=status or None, queue=queue, limit=shown, user=user,
                                labels=labels)

    def fetch(client: Client) -> JobRows:  # a table needs rows, not each job's whole record
        return client.list_rows(status=status or None, queue=queue, limit=shown, user=user,
                                labels=labels)

    with settings_of(ctx).client() as client:
        if mine:
            user = client.whoami().user
        if as_json:
            listed = records(client)
            print_json([r.to_dict() for r in listed.items])
            if listed.remaining_item_count:
                note(f"{listed.remaining_item_count:,} more; use --all or --limit", style="dim")
            return
        page = fetch(client)
        view = _job_view(page, shown, planeinfo.several_planes(client, page.items))
        if not watch:
            out().print(view)
            return
        with Live(view, console=out(), auto_refresh=False) as live:
            while True:
                time.sleep(WATCH_SECONDS)
                page = fetch(client)
                several = planeinfo.several_planes(client, page.items)
                live.update(_job_view(page, shown, several), refresh=True)


@reports_errors
def describe(
    ctx: typer.Context,
    job: Annotated[str, typer.Argument(help="Job name")],
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON")] = False,
) -> None:
    """A job's spec, status, placement, pods, events and why it is pending."""
    with settings_of(ctx).client() as client:
        if as_json:
            print_json(client.get(job).to_dict())
            return
        # The page is drawn from rows read from the JSON: no model of the job is built.
        row = client.get_row(job)
        plane = planeinfo.job_plane_line(client, row)
    out().print(render.describe_job(row, plane=plane))


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
    tail: Annotated[
        int | None, typer.Option("--tail", min=0, help="Only the last N lines of each pod")
    ] = None,
    since: Annotated[
        str | None,
        typer.Option("--since", help='Only lines written since then: "10m", "1h30m" or a time '
                     '("2025-01-31T12:00:00Z"); exact to the second'),
    ] = None,
) -> None:
    """Print a job's logs (all pods, each line prefixed by its pod, or one pod)."""
    with settings_of(ctx).client() as client:
        for line in client.logs(job, pod=pod, follow=follow, tail=tail, since=since):
            write_line(line)


@reports_errors
def cancel(
    ctx: typer.Context,
    job: Annotated[str | None, typer.Argument(help="Job name (or select jobs below)")] = None,
    queue: Annotated[
        str | None, typer.Option("--queue", "-q", help="Every live job of this LocalQueue")
    ] = None,
    selector: Annotated[
        list[str] | None,
        typer.Option("--selector", "-l", help="Every live job with these labels: key=value"),
    ] = None,
    user: Annotated[
        str | None, typer.Option("--user", "-u", help="Every live job of this user")
    ] = None,
    wait: Annotated[bool, typer.Option("--wait", help="Wait until their pods are gone")] = False,
) -> None:
    """Cancel a job, or every live job a queue, labels or a user select: pods get SIGTERM,
    then SIGKILL after a grace period."""
    labels = merge_selectors(selector, field="--selector")
    selecting = queue is not None or user is not None or bool(labels)
    if (job is None) == (not selecting):
        raise SpecError(
            "names a job and selects jobs" if job else "names no job",
            field="JOB" if job else "--queue/--selector/--user",
            fix="give a job name, or select jobs with --queue, --selector or --user",
        )
    with settings_of(ctx).client() as client:
        if job is None:
            records = client.cancel_matching(queue=queue, labels=labels, user=user)
            if wait:
                records = [client.wait(r.name) for r in records]
            names = ", ".join(r.name for r in records[:10])
            more = f" and {len(records) - 10} more" if len(records) > 10 else ""
            verb = "cancelled" if wait else "cancelling"
            note(f"{len(records)} job(s) {verb}" + (f": {names}{more}" if records else ""))
            return
        record = client.cancel(job)
        if record.status.terminal and record.status is not JobStatus.CANCELLED:
            note(f"job {job} already {record.status.value}; nothing to cancel")
            return
        if wait and not record.status.terminal:
            record = client.wait(job)
    note(f"job {job} {'cancelled' if record.status.terminal else 'cancelling'}")


@reports_errors
def delete(
    ctx: typer.Context,
    kind: Annotated[
        str | None,
        typer.Argument(help="job, clusterqueue, localqueue, cohort, resourceflavor or "
                       "priorityclass"),
    ] = None,
    name: Annotated[str | None, typer.Argument(help="Its name")] = None,
    file: Annotated[
        Path | None,
        typer.Option("--file", "-f", help="Delete the config objects of this YAML file "
                     "('-': standard input)"),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON")] = False,
) -> None:
    """Delete a finished job, or queue configuration (all or nothing; refused while in use)."""
    from phalanx.spec import load_config_yaml
    from phalanx.spec.config import config_kind

    if (file is None) == (kind is None) or (kind is not None and name is None):
        raise SpecError(
            "needs KIND NAME or -f FILE", field="KIND NAME" if file is None else "--file",
            fix="e.g. `phalanx delete job train-1`, `phalanx delete clusterqueue team-a` "
            "or `phalanx delete -f queues.yaml`",
        )
    with settings_of(ctx).client() as client:
        if file is not None:
            text, source = read_input(file)
            deleted = client.delete([o.to_dict() for o in load_config_yaml(text, source=source)])
        elif kind is not None and kind.lower() in ("job", "jobs"):
            assert name is not None
            record = client.delete_job(name)
            if as_json:
                print_json(record.to_dict())
            else:
                out().print(f"job/{record.name} deleted", markup=False)
            return
        else:
            assert kind is not None and name is not None
            deleted = client.delete_object(config_kind(kind, field="KIND"), name)
    if as_json:
        print_json([d.to_dict() for d in deleted])
        return
    for d in deleted:
        out().print(f"{d.kind.lower()}/{d.name} deleted", markup=False)
