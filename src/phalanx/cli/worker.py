"""``phalanx worker``: run next to a compute plane and dial out to the control plane.

It builds the plane exactly as ``phalanx up`` does (``compute/factory.py``: ``--compute``,
``--nodes``, ``--kubeconfig``, ``--namespace``, ...), keeps its bookkeeping in
``--state-dir`` (one per plane and control plane), and runs ``phalanx.worker.agent``.
On the local plane the lease is a file in the state directory that each pod's supervisor
reads; on Kubernetes it is a Lease in the runs namespace that the fence around each rank
reads: the pods stop at the fence even if this process is killed with ``kill -9``.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from phalanx.cli.output import reports_errors
from phalanx.cli.planeoptions import with_plane_options
from phalanx.cli.settings import settings_of
from phalanx.defaults import make_private_dir
from phalanx.errors import ConnectionFailed, ServerError, SpecError
from phalanx.spec import parse_duration
from phalanx.spec.computeplanes import PlaneOptions
from phalanx.spec.planes import PlaneHello, check_plane_name
from phalanx.version import __version__

if TYPE_CHECKING:
    from phalanx.compute.lease import PlaneLease
    from phalanx.worker.client import PlaneClient


def control_plane_identity(client: PlaneClient, compute: str, fence_after: float) -> str:
    """The control plane's identity, asked for before a Kubernetes plane is built: it labels
    every object with it and acts on no other. Retries while the control plane cannot be
    reached; a refused key or fence stops the worker as the agent would."""
    from phalanx.compute.lease import fence_step

    delay = 0.2
    while True:
        try:
            welcome = client.hello(PlaneHello(worker="starting", compute=compute,
                                              fence_after=fence_after, version=__version__))
            return welcome.control_plane
        except (ConnectionFailed, ServerError) as exc:
            logging.getLogger(__name__).warning("%s; retrying in %.1fs", exc, delay)
            time.sleep(delay)
            delay = min(delay * 2, fence_step(fence_after))


def check_fence(fence_after: float, report_interval: float) -> None:
    if fence_after <= 0:
        raise SpecError("must be more than 0", field="--fence-after", fix="write e.g. 10m")
    if report_interval <= 0 or report_interval * 3 > fence_after:
        raise SpecError(
            f"--report-interval ({report_interval:g}s) must be more than 0 and at most a "
            f"third of --fence-after ({fence_after:g}s)", field="--report-interval",
            fix="report more often, or fence later")


@reports_errors
@with_plane_options("worker")
def worker(
    ctx: typer.Context,
    control_plane: Annotated[str, typer.Option(help="The control plane's URL")],
    plane: Annotated[str, typer.Option(help="This compute plane's name (phalanx plane add)")],
    api_key_file: Annotated[Path, typer.Option(help="File holding the plane's API key; "
                                               "read again at every token refresh")],
    compute: Annotated[str, typer.Option(help="Compute plane")] = "local",
    state_dir: Annotated[Path | None, typer.Option(help="The worker's own state (default: "
                                                   "$PHALANX_HOME/worker-PLANE)")] = None,
    fence_after: Annotated[str, typer.Option(help="Stop this plane's pods after this long "
                                             "without the control plane")] = "10m",
    report_interval: Annotated[str, typer.Option(help="How often to report the plane")] = "1s",
    plane_options: PlaneOptions | None = None,
) -> None:
    """Run a compute plane for a remote control plane: it dials out, nothing dials in."""
    # Loaded here, not with the module: every other verb of the CLI would pay for them.
    from phalanx.compute.factory import (
        check_plane_options,
        compute_plane,
        make_plane,
        plane_lease,
    )
    from phalanx.compute.lease import LEASE_FILE
    from phalanx.store.logs import LogStore
    from phalanx.worker.agent import Worker, WorkerOptions
    from phalanx.worker.client import PlaneClient, read_key

    check_plane_name(plane, "--plane")
    fence = parse_duration(fence_after, field="--fence-after")
    interval = parse_duration(report_interval, field="--report-interval")
    check_fence(fence, interval)
    info = compute_plane(compute)
    options = dict(plane_options or {})
    check_plane_options(info, options)  # before anything starts
    read_key(api_key_file)  # a missing or empty key file is refused before anything starts
    home = make_private_dir(state_dir or settings_of(ctx).state_dir / f"worker-{plane}")
    logging.basicConfig(level=logging.INFO,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)  # not a line per report
    client = PlaneClient(control_plane, plane, api_key_file)
    # A plane fenced by a file gets its path (each pod's supervisor reads it); a labelled
    # plane (Kubernetes: a Lease named after the plane) labels its objects with the plane's
    # and the control plane's identity, asked for first.
    lease_path = home / LEASE_FILE if info.worker_fence == "file" else None
    built = make_plane(
        compute, home, options, lease=lease_path, plane_name=plane if info.labelled else None,
        control_plane=control_plane_identity(client, compute, fence) if info.labelled
        else None, fence_after=fence)
    lease: PlaneLease | None = None
    if info.worker_fence is not None:
        lease = plane_lease(built, home / LEASE_FILE, holder=plane, fence_after=fence)
    agent = Worker(built, client, home,
                   WorkerOptions(fence_after=fence, report_interval=interval,
                                 compute=compute),
                   lease=lease, logs=LogStore.for_home(home))
    stop = threading.Event()

    def stopping(*_: object) -> None:
        agent.stop.set()
        stop.set()

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, stopping)
    try:
        agent.run()
    finally:
        client.close()
        agent.pools.close()
        built.close()
    if agent.superseded is not None:
        raise agent.superseded  # (exit 1, saying which worker drives the plane now)
