"""Starting and stopping the control plane: ``phalanx up`` and ``phalanx down``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from phalanx.cli import daemon
from phalanx.cli.output import err, note, reports_errors
from phalanx.cli.planeoptions import plane_args, with_plane_options
from phalanx.cli.settings import Settings, settings_of
from phalanx.defaults import (
    DEFAULT_HOST,
    DEFAULT_LEASE_SECONDS,
    DEFAULT_PORT,
    DEFAULT_WEBHOOK_PORT,
)
from phalanx.errors import AuthError, ConnectionFailed, ServerError, SpecError
from phalanx.spec import parse_duration
from phalanx.spec.base import check_api_url
from phalanx.spec.computeplanes import PlaneOptions
from phalanx.spec.status import JobRecord, JobStatus

# How long `down --stop-jobs` waits for each cancelled job's pods to be gone.
STOP_JOBS_SECONDS = 120.0
# Finished jobs and their logs are deleted a week after they finish unless `up` says
# otherwise: long enough to look at last week's runs, short enough that the store and the
# log directory stop growing with every job ever run.
DEFAULT_FINISHED_TTL = "7d"

_settings = settings_of


def _finished_ttl(text: str) -> float | None:
    try:
        seconds = parse_duration(text)
    except SpecError as exc:
        raise SpecError(exc.message, field="--finished-ttl",
                        fix="write e.g. 12h, 7d or 0") from None
    return seconds or None


@reports_errors
@with_plane_options("up")
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
    compute: Annotated[str, typer.Option(help="Compute plane")] = "local",
    secret_env: Annotated[
        list[str] | None,
        typer.Option(help="Env name or glob pattern whose values API answers redact, besides "
                     "*TOKEN*, *SECRET*, *PASSWORD*, *KEY*... words (repeatable)"),
    ] = None,
    max_body_bytes: Annotated[
        int, typer.Option(help="Largest request body the API takes, in bytes (16 MiB)", min=1)
    ] = 16 * 2**20,
    finished_ttl: Annotated[
        str, typer.Option(help="Delete finished jobs and their logs this long after they "
                          "finish, e.g. 12h, 7d (0: keep them for ever)")
    ] = DEFAULT_FINISHED_TTL,
    workdir_retention: Annotated[
        str, typer.Option(help="Remove an uploaded workdir no queued or running job names "
                          "this long after it was last uploaded or submitted, e.g. 12h, 7d "
                          "(0: only `phalanx workdirs prune` removes them)")
    ] = "7d",
    token_ttl: Annotated[
        str, typer.Option(help="How long a token exchanged for an API key lives, e.g. 5m")
    ] = "5m",
    timeout: Annotated[
        float, typer.Option(help="With -d: seconds to wait for the server to answer")
    ] = 30.0,
    interactive: Annotated[
        bool, typer.Option(help="Let phalanx exec run commands in running pods")
    ] = True,
    pod_api_url: Annotated[
        str | None, typer.Option(help="The API's URL as job pods reach it, for their "
                                 "per-attempt credential (default: the address listened on)")
    ] = None,
    local_plane: Annotated[bool, typer.Option(help="Run the in-process compute plane 'local'; "
                                              "--no-local-plane: only workers")] = True,
    worker_grace: Annotated[str, typer.Option(help="A plane whose worker is silent this long "
                                              "takes no new placements")] = "60s",
    worker_lost_after: Annotated[str, typer.Option(help="After this long silent, a plane's "
                                                   "jobs are requeued elsewhere; longer than "
                                                   "its workers' --fence-after")] = "15m",
    ha: Annotated[bool, typer.Option("--ha", help="Run as one of several replicas on one "
                                     "PostgreSQL store: one leads by lease, the others "
                                     "answer reads from the store, redirect the rest to it "
                                     "and take over if it is lost")] = False,
    lease: Annotated[str | None, typer.Option(help="With --ha: how long a silent leader keeps the "
                                       "lease; a follower leads about this long after the "
                                       "leader's loss; default 7s")] = None,
    advertise_url: Annotated[str | None, typer.Option(help="With --ha: this replica's URL as "
                                                      "clients and the other replicas reach it "
                                                      "(default: the address listened on)")]
    = None,
    leader_lease: Annotated[str | None, typer.Option(
        help="With --ha: where the leader's lease is kept: store (default: a row in the "
        "PostgreSQL store), or kubernetes[:NAMESPACE/NAME] (a coordination.k8s.io Lease, "
        "default phalanx-control-plane in the credentials' namespace)")] = None,
    webhook_cert_dir: Annotated[
        Path | None, typer.Option(help="Serve the admission webhook of --manage-namespaces "
                                  "over TLS with tls.crt and tls.key of this directory (a "
                                  "kubernetes.io/tls Secret's mount)")] = None,
    webhook_port: Annotated[int, typer.Option(help="With --webhook-cert-dir: the port it "
                                              "listens on (0: any free port)")]
    = DEFAULT_WEBHOOK_PORT,
    plane_options: PlaneOptions | None = None,
) -> None:
    """Start the embedded control plane (foreground, or in the background with -d)."""
    home = _settings(ctx).state_dir
    options = dict(plane_options or {})
    ttl = _finished_ttl(finished_ttl)
    token_life = parse_duration(token_ttl, field="--token-ttl")
    keep_workdirs = parse_duration(workdir_retention, field="--workdir-retention")
    if pod_api_url is not None:
        check_api_url(pod_api_url, "--pod-api-url")
    for given, flag in ((lease, "--lease"), (advertise_url, "--advertise-url"),
                        (leader_lease, "--leader-lease")):
        if given is not None and not ha:  # a replica's setting does nothing on a lone server
            raise SpecError("is a replica's setting", field=flag,
                            fix=f"add --ha (replicas on one PostgreSQL store), or drop {flag}")
    lease_seconds = (DEFAULT_LEASE_SECONDS if lease is None
                     else parse_duration(lease, field="--lease"))
    if ha and detach:
        raise SpecError("--ha replicas run in the foreground", field="--detach",
                        fix="run each replica under a supervisor (systemd, Kubernetes) that "
                        "restarts it, as a follower, if it loses the lead")
    if token_life <= 0:
        raise SpecError("must be more than 0", field="--token-ttl", fix="write e.g. 5m")
    if not detach:
        from phalanx.server import serve  # the server's dependencies load only when serving

        serve(
            home=home, host=host, port=port, db=db, compute=compute,
            secret_env=secret_env or (), max_body_bytes=max_body_bytes,
            finished_ttl=ttl, token_ttl=token_life, interactive=interactive,
            pod_api_url=pod_api_url,
            local_plane=local_plane,
            worker_grace=parse_duration(worker_grace, field="--worker-grace"),
            worker_lost_after=parse_duration(worker_lost_after, field="--worker-lost-after"),
            ha=ha, lease_seconds=lease_seconds, advertise_url=advertise_url,
            leader_lease=leader_lease or "store",
            workdir_retention=keep_workdirs or None,
            plane_options=options,
            webhook_cert_dir=webhook_cert_dir, webhook_port=webhook_port,
        )
        return
    running = daemon.server_info(home)
    if running is not None and daemon.healthz(running.url):
        note(f"A Phalanx control plane is already running at {running.url} (pid {running.pid}).")
        return
    args = ["--host", host, "--port", str(port), "--compute", compute, *plane_args(options)]
    if db:
        args += ["--db", db]
    args += ["--workdir-retention", workdir_retention]
    for pattern in secret_env or ():
        args += ["--secret-env", pattern]
    args += ["--max-body-bytes", str(max_body_bytes)]
    args += ["--finished-ttl", finished_ttl, "--token-ttl", token_ttl]
    if not interactive:
        args += ["--no-interactive"]
    if pod_api_url is not None:
        args += ["--pod-api-url", pod_api_url]
    if not local_plane:
        args += ["--no-local-plane"]
    args += ["--worker-grace", worker_grace, "--worker-lost-after", worker_lost_after]
    if webhook_cert_dir is not None:
        args += ["--webhook-cert-dir", str(webhook_cert_dir.resolve()),
                 "--webhook-port", str(webhook_port)]
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


@reports_errors
def down(
    ctx: typer.Context,
    timeout: Annotated[
        float, typer.Option(help="Seconds to wait after SIGTERM before SIGKILL")
    ] = 30.0,
    stop_jobs: Annotated[
        bool, typer.Option("--stop-jobs", help="Cancel the running jobs first and wait until "
                           "their pods are gone (otherwise they keep running)")
    ] = False,
) -> None:
    """Stop the control plane running on this state directory.

    Running jobs' pods keep running, and the next `phalanx up` adopts them; --stop-jobs
    cancels them first.
    """
    settings = _settings(ctx)
    home = settings.state_dir
    running: list[JobRecord] = []
    if daemon.server_info(home) is not None:
        running = _running_jobs(settings, stop_jobs)
    result = daemon.stop_server(home, timeout)
    if result is daemon.StopResult.NOT_RUNNING:
        note(f"No Phalanx control plane is running on {home}.")
        return
    if result is daemon.StopResult.KILLED:
        note(f"The control plane did not stop within {timeout:g}s and was killed.", style="yellow")
    else:
        note("Phalanx control plane stopped.", style="green")
    if running:
        note(f"{len(running)} job(s) keep running; the next `phalanx up` adopts them: "
             f"{_jobs_and_pods(running)}. `phalanx down --stop-jobs` cancels them first.",
             style="yellow")


def _jobs_and_pods(records: list[JobRecord]) -> str:
    def pods(r: JobRecord) -> int:
        return r.admission.pod_count if r.admission else r.spec.pod_count

    return ", ".join(f"{r.name} ({pods(r)} pod{'s' if pods(r) != 1 else ''})" for r in records)


def _running_jobs(settings: Settings, stop: bool) -> list[JobRecord]:
    """The jobs whose pods outlive the control plane; with ``stop``, cancelled and waited for
    first (then none)."""
    active = [JobStatus.ADMITTED, JobStatus.STARTING, JobStatus.RUNNING]
    try:
        with settings.client(timeout=10.0) as client:
            running = client.list(status=active)
            if not stop or not running:
                return running
            with err.status(f"Cancelling {len(running)} job(s)...") as spinner:
                for record in running:
                    client.cancel(record.name)
                for record in running:
                    spinner.update(f"waiting for {record.name} to stop")
                    client.wait(record.name, timeout=STOP_JOBS_SECONDS)
            note(f"{len(running)} job(s) cancelled and stopped: {_jobs_and_pods(running)}")
            return []
    except TimeoutError as exc:
        raise ServerError(f"{exc}; the control plane was left running",
                          fix="wait and run `phalanx down --stop-jobs` again") from None
    except (ConnectionFailed, AuthError) as exc:
        if stop:
            raise
        note(f"Could not ask the control plane which jobs run ({exc.message}); their pods, "
             "if any, keep running.", style="yellow")
        return []
