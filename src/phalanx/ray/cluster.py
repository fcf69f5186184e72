"""``Cluster``: create, watch and take down a Ray cluster, as the CodeFlare SDK does.

A cluster is a ``kind: ray`` job with no entrypoint, queued and admitted like any
job. ``up()`` submits it, ``wait_ready()`` waits until every pod runs and (where the
control plane reaches the dashboard) every Ray node is alive, ``down()`` cancels it:
its pods get SIGTERM, then SIGKILL after the grace, and the job ends Cancelled.
The dashboard's address is the control plane's proxy of it (``/v1/jobs/{name}/ray``,
``server/routes/ray.py``), behind the user's own token: it works from anywhere the control
plane does, on every plane whose pods the control plane reaches. ``job_client`` is Ray's
own ``JobSubmissionClient`` there, with the token as a header; it is the one place that
imports Ray, so the rest works without ``phalanx[ray]``.

``down()`` waits until the cluster is gone (its job ended, its pods stopped);
``wait_ready()``, ``up(wait=True)`` and ``down()`` show progress (a bar in a notebook or
a terminal, nothing in a script's log). A cluster and a list of them show as tables.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from phalanx.display import Listing, Table, fields_table, progress
from phalanx.errors import NotFound, NotSupported, PhalanxError, SpecError
from phalanx.ray.config import WORKER, ClusterConfiguration
from phalanx.sdk.client import Client
from phalanx.spec.quantity import MILLI, format_amount, format_quantity
from phalanx.spec.ray import HEAD
from phalanx.spec.resources import GPU, JobKind, JobSpec
from phalanx.spec.status import JobDetail, JobRecord, JobStatus

if TYPE_CHECKING:
    from ray.job_submission import JobSubmissionClient

# A dashboard answers within this, or is not ready.
DASHBOARD_TIMEOUT = 5.0
LIVE = (JobStatus.QUEUED, JobStatus.ADMITTED, JobStatus.STARTING, JobStatus.RUNNING)


class ClusterStatus(StrEnum):
    """Where a cluster is (CodeFlare's CodeFlareClusterStatus, plus DOWN once taken down)."""

    QUEUED = "queued"
    STARTING = "starting"
    READY = "ready"
    FAILED = "failed"
    DOWN = "down"
    UNKNOWN = "unknown"


_BY_JOB_STATUS = {
    JobStatus.QUEUED: ClusterStatus.QUEUED,
    JobStatus.ADMITTED: ClusterStatus.STARTING,
    JobStatus.STARTING: ClusterStatus.STARTING,
    JobStatus.RUNNING: ClusterStatus.READY,
    JobStatus.FAILED: ClusterStatus.FAILED,
    JobStatus.SUCCEEDED: ClusterStatus.DOWN,
    JobStatus.CANCELLED: ClusterStatus.DOWN,
}


@dataclass(frozen=True)
class RayCluster:
    """What ``details()`` and ``list_clusters()`` tell about a cluster (CodeFlare's name)."""

    name: str
    status: ClusterStatus
    queue: str
    num_workers: int
    head_cpu: str | None
    head_memory: str | None
    head_gpu: int
    worker_cpu: str | None
    worker_memory: str | None
    worker_gpu: int
    dashboard: str | None
    client_uri: str | None
    message: str = ""

    def table(self) -> Table:
        return fields_table(f"Ray cluster {self.name}", [
            (key, "-" if value is None else str(value)) for key, value in self.__dict__.items()
            if key != "name"])

    def _repr_html_(self) -> str:
        return self.table()._repr_html_()

    def __rich__(self) -> Any:
        return self.table().__rich__()


CLUSTER_COLUMNS = ("name", "status", "queue", "workers", "head", "worker", "dashboard",
                   "message")


def _pod_shape(cpu: str | None, memory: str | None, gpu: int) -> str:
    return ", ".join(part for part in (
        f"cpu {cpu}" if cpu else "", f"memory {memory}" if memory else "",
        f"gpu {gpu}" if gpu else "") if part) or "-"


def clusters_table(clusters: Sequence[RayCluster]) -> Table:
    return Table("Ray clusters", CLUSTER_COLUMNS, [
        [c.name, c.status.value, c.queue, str(c.num_workers),
         _pod_shape(c.head_cpu, c.head_memory, c.head_gpu),
         _pod_shape(c.worker_cpu, c.worker_memory, c.worker_gpu), c.dashboard or "-",
         c.message] for c in clusters], empty="no Ray clusters")


def _amount(resources: dict[str, int], name: str) -> str | None:
    """The exact quantity, as a configuration takes it back."""
    millis = resources.get(name)
    return None if millis is None else format_quantity(millis, name)


def _shown(resources: dict[str, int], name: str) -> str | None:
    """The quantity as people write it ("1G", "4Gi", "500m"), for ``details()``."""
    millis = resources.get(name)
    return None if millis is None else format_amount(millis, name)


def describe(record: JobRecord, client: Client | None = None) -> RayCluster:
    """What ``record`` tells of its cluster; with ``client``, the dashboard is the control
    plane's proxied address (else the address the head recorded)."""
    spec = record.spec
    head = next((p for p in spec.pod_sets if p.name == HEAD), spec.pod_sets[0])
    workers = [p for p in spec.pod_sets if p.name != HEAD]
    worker = workers[0] if workers else None
    live = record.status in (JobStatus.STARTING, JobStatus.RUNNING)
    dashboard = record.endpoints.get("dashboard") if live else None
    if dashboard is not None and client is not None:
        dashboard = client.ray_dashboard(record.name)
    return RayCluster(
        name=record.name, status=_BY_JOB_STATUS[record.status], queue=record.queue,
        num_workers=sum(p.replicas for p in workers),
        head_cpu=_shown(head.resources, "cpu"), head_memory=_shown(head.resources, "memory"),
        head_gpu=head.resources.get(GPU, 0) // MILLI,
        worker_cpu=_shown(worker.resources, "cpu") if worker else None,
        worker_memory=_shown(worker.resources, "memory") if worker else None,
        worker_gpu=worker.resources.get(GPU, 0) // MILLI if worker else 0,
        dashboard=dashboard,
        client_uri=record.endpoints.get("client") if live else None,
        message=record.message,
    )


class Cluster:
    """One Ray cluster, by its configuration (``up()`` creates it) or found by name
    (``get_cluster``)."""

    def __init__(self, config: ClusterConfiguration, client: Client | None = None) -> None:
        self.config = config
        self._client = client
        self._job_client: tuple[tuple[str, str | None], JobSubmissionClient] | None = None

    @property
    def client(self) -> Client:
        if self._client is None:
            self._client = Client()
        return self._client

    @property
    def name(self) -> str:
        return self.config.name

    # ------------------------------------------------------------------ lifecycle
    def up(self, wait: bool = False, timeout: float | None = None,
           show_progress: bool = True) -> JobRecord:
        """Submit the cluster; it waits in its queue like any job until admitted. With
        ``wait``, return once it is ready (``wait_ready``)."""
        record = self.client.submit(self.config.to_job_spec())
        if wait:
            self.wait_ready(timeout=timeout, show_progress=show_progress)
        return record

    def down(self, wait: bool = True, timeout: float | None = None,
             show_progress: bool = True) -> JobRecord:
        """Take the cluster down: its pods are stopped and the job ends Cancelled. Waits
        until then (``status()`` says DOWN), or with ``wait=False`` returns at once.
        TimeoutError after ``timeout`` seconds."""
        record: JobRecord = self.client.cancel(self.name)
        if not wait:
            return record
        with progress(f"taking {self.name} down", show_progress) as report:
            def update(detail: JobDetail) -> None:
                stopped = sum(p.phase != "Running" for p in detail.pods)
                report(detail.status.value, stopped if detail.pods else 0, len(detail.pods))

            return self.client.wait(self.name, timeout=timeout, on_update=update)

    def _record(self) -> JobDetail:
        record = self.client.get(self.name)
        if record.spec.kind is not JobKind.RAY:
            raise SpecError(f"job {self.name!r} is a {record.spec.kind.value} job, not a Ray "
                            "cluster", field="name", fix="name a job of kind ray")
        return record

    def status(self, print_to_console: bool = False) -> tuple[ClusterStatus, bool]:
        """(status, ready): ready once every pod runs and the dashboard answers."""
        try:
            record = self._record()
        except NotFound:
            return ClusterStatus.UNKNOWN, False
        status = _BY_JOB_STATUS[record.status]
        ready = status is ClusterStatus.READY
        if print_to_console:
            print(f"{self.name}: {status.value}" + (f" ({record.message})"
                                                    if record.message else ""))
        return status, ready

    def table(self) -> Table:
        """Its details, or its configuration while it is not up."""
        try:
            return self.details().table()
        except NotFound:
            return fields_table(f"Ray cluster {self.name} (not up)", [
                (key, str(value)) for key, value in vars(self.config).items()
                if value not in (None, {}, []) and key != "name"])

    def _repr_html_(self) -> str:
        return self.table()._repr_html_()

    def __rich__(self) -> Any:
        return self.table().__rich__()

    def details(self, print_to_console: bool = False) -> RayCluster:
        cluster = describe(self._record(), self.client)
        if print_to_console:
            for key, value in cluster.__dict__.items():
                print(f"{key}: {value}")
        return cluster

    def wait_ready(self, timeout: float | None = None, dashboard_check: bool = True,
                   show_progress: bool = True) -> None:
        """Block until the cluster is ready: every pod running and, with ``dashboard_check``,
        every Ray node alive as the dashboard reports. TimeoutError after ``timeout``
        seconds; PhalanxError if the cluster fails or is taken down meanwhile. Progress
        (pods running, then Ray nodes alive, of all) shows in a notebook or terminal."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with progress(f"bringing {self.name} up", show_progress) as report:
            while True:
                record = self._record()
                if record.status.terminal:
                    raise PhalanxError(f"cluster {self.name} is {record.status.value}: "
                                       f"{record.message}", field="name",
                                       fix="bring it up again with up()")
                total = record.spec.pod_count
                running = sum(p.phase == "Running" for p in record.pods)
                alive = _alive_nodes(self.client, self.name) if (
                    record.status is JobStatus.RUNNING and dashboard_check) else None
                if alive is not None:
                    report("Ray nodes alive", alive, total)
                    if alive >= total:
                        return
                else:
                    report(record.pending_message or f"{record.status.value}: pods running",
                           running, total)
                    if record.status is JobStatus.RUNNING:
                        return
                if deadline is not None and time.monotonic() >= deadline:
                    raise TimeoutError(f"cluster {self.name} is not ready after {timeout}s "
                                       f"(job {record.status.value})")
                time.sleep(1.0)

    # ------------------------------------------------------------------ addresses
    def dashboard_uri(self) -> str:
        """The Ray dashboard's address, as the control plane proxies it behind your token
        (NotFound until the cluster's pods are launched). Ray's own clients take it with
        the header ``Authorization: Bearer <token>`` (``job_client`` does so)."""
        uri = self.details().dashboard
        if uri is None:
            raise NotFound(f"cluster {self.name} has no dashboard yet", field="name",
                           fix="bring it up and wait_ready() first")
        return uri

    cluster_dashboard_uri = dashboard_uri  # CodeFlare's name

    def cluster_uri(self) -> str:
        """The Ray client's address (``ray://...``), for ``ray.init(address=...)``."""
        uri = self.details().client_uri
        if uri is None:
            raise NotFound(f"cluster {self.name} has no Ray client address yet", field="name",
                           fix="bring it up and wait_ready() first")
        return uri

    @property
    def job_client(self) -> JobSubmissionClient:
        """Ray's ``JobSubmissionClient`` at this cluster's proxied dashboard, sending your
        token (a new one once the token is refreshed)."""
        uri = self.dashboard_uri()
        token = self.client.bearer()
        if self._job_client is None or self._job_client[0] != (uri, token):
            try:
                from ray.job_submission import JobSubmissionClient
            except ImportError:
                raise PhalanxError("Ray is not installed", field="job_client",
                                   fix="pip install 'phalanx[ray]'") from None
            headers = {"Authorization": f"Bearer {token}"} if token else None
            self._job_client = ((uri, token), JobSubmissionClient(uri, headers=headers))
        return self._job_client[1]

    def list_jobs(self) -> list[Any]:
        return list(self.job_client.list_jobs())

    def job_status(self, job_id: str) -> Any:
        return self.job_client.get_job_status(job_id)

    def job_logs(self, job_id: str) -> str:
        return str(self.job_client.get_job_logs(job_id))


def _alive_nodes(client: Client, name: str) -> int | None:
    """Ray nodes the cluster's dashboard reports alive, asked through the control plane's
    proxy (0 when it does not answer yet); None when the control plane cannot reach it at
    all (a plane behind a worker): running pods are all there is to wait for then."""
    try:
        answer = client.ray_request(name, "GET", "api/v0/nodes", timeout=DASHBOARD_TIMEOUT,
                                    params={"limit": "10000", "filter_keys": "state",
                                            "filter_predicates": "=", "filter_values": "ALIVE"})
        return len(answer.json()["data"]["result"]["result"]) if answer.is_success else 0
    except NotSupported:
        return None
    except (PhalanxError, ValueError, KeyError, TypeError):
        return 0


def _configuration(spec: JobSpec) -> ClusterConfiguration:
    """The configuration a stored cluster's spec says (for ``get_cluster``)."""
    head = next((p for p in spec.pod_sets if p.name == HEAD), spec.pod_sets[0])
    workers = [p for p in spec.pod_sets if p.name == WORKER] or [
        p for p in spec.pod_sets if p.name != HEAD]
    worker = workers[0] if workers else None
    return ClusterConfiguration(
        name=spec.name, local_queue=spec.queue,
        num_workers=sum(p.replicas for p in workers),
        head_cpu=_amount(head.resources, "cpu"), head_memory=_amount(head.resources, "memory"),
        head_gpu=head.resources.get(GPU, 0) // MILLI or None,
        worker_cpu=_amount(worker.resources, "cpu") if worker else None,
        worker_memory=_amount(worker.resources, "memory") if worker else None,
        worker_gpu=(worker.resources.get(GPU, 0) // MILLI or None) if worker else None,
        image=head.image, envs=dict(head.env), labels=dict(spec.labels),
        priority=spec.priority,
    )


def get_cluster(name: str, client: Client | None = None) -> Cluster:
    """The Ray cluster ``name`` (NotFound if there is none; SpecError if that job is no Ray
    cluster)."""
    client = client or Client()
    record = client.get(name)
    if record.spec.kind is not JobKind.RAY:
        raise SpecError(f"job {name!r} is a {record.spec.kind.value} job, not a Ray cluster",
                        field="name", fix="name a job of kind ray")
    return Cluster(_configuration(record.spec), client)


def list_clusters(
    queue: str | None = None, *, all: bool = False, client: Client | None = None,
) -> list[RayCluster]:
    """Ray clusters, newest first: the live ones, or with ``all`` finished ones too."""
    client = client or Client()
    records = client.list(status=None if all else LIVE, queue=queue)
    return Listing((describe(r, client) for r in records if r.spec.kind is JobKind.RAY),
                   clusters_table)


__all__ = ["Cluster", "ClusterStatus", "RayCluster", "clusters_table", "get_cluster",
           "list_clusters"]
