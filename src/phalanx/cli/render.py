"""Turning API results into rich tables and plain words for people."""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from phalanx.errors import SpecError
from phalanx.spec import format_amount, format_duration, parse_quantity, tables
from phalanx.spec.jobstatus import JobStatus
from phalanx.spec.names import LOCAL_PLANE, PLANE_LABEL

if TYPE_CHECKING:
    # A table of jobs draws records or rows alike (spec/rows.py): `phalanx jobs` builds no
    # model of a job, so this module imports none.
    from phalanx.spec.api import AppliedObject, NodeView, PoolView, QueuesOverview, ServerStatus
    from phalanx.spec.detailrows import DetailRow, RowAdmission, RowEvent
    from phalanx.spec.rows import JobRow
    from phalanx.spec.status import JobAdmission, JobDetail, JobEvent, JobRecord

STATUS_STYLES = {
    JobStatus.QUEUED: "yellow",
    JobStatus.ADMITTED: "cyan",
    JobStatus.STARTING: "cyan",
    JobStatus.RUNNING: "blue",
    JobStatus.SUCCEEDED: "green",
    JobStatus.FAILED: "red",
    JobStatus.CANCELLED: "magenta",
}
NONE = "-"


# --------------------------------------------------------------------------- small pieces
def ago(then: float | None, now: float | None = None) -> str:
    """A point in time as a human age: "just now", "42s ago", "3m ago", "5h ago", "2d ago"."""
    if then is None:
        return NONE
    seconds = max(0.0, (time.time() if now is None else now) - then)
    if seconds < 1:
        return "just now"
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{int(seconds // size)}{unit} ago"
    return f"{int(seconds)}s ago"


def elapsed(start: float | None, end: float | None, now: float | None = None) -> str:
    """How long something ran (until ``end``, or until now while it still runs)."""
    if start is None:
        return NONE
    stop = end if end is not None else (time.time() if now is None else now)
    return format_duration(max(0.0, stop - start))


def starts_text(record: JobRecord | JobRow, now: float | None = None) -> str:
    """A queued job's estimated start, humanised ("~12m"), from now by default."""
    return tables.starts_text(record, time.time() if now is None else now)


def estimate_text(record: JobRecord | DetailRow, now: float | None = None) -> str:
    """Position and estimated start in one line: "#2 in team-a, starts ~12m"."""
    return tables.estimate_text(record, time.time() if now is None else now)


def show_quantity(value: str | int | float, resource: str = "") -> str:
    """A quantity from the API (string or number) in its resource-aware short form."""
    try:
        return format_amount(parse_quantity(value), resource)
    except SpecError:
        return str(value)


def resources_text(resources: Mapping[str, int]) -> str:
    """Per-pod requests held as milli-units, e.g. "cpu=1 memory=2Gi"."""
    if not resources:
        return NONE
    return " ".join(f"{res}={format_amount(amount, res)}" for res, amount in resources.items())


def status_text(status: JobStatus) -> Text:
    return Text(status.value, style=STATUS_STYLES.get(status, ""))


def priority_text(record: JobRecord | JobRow | DetailRow) -> str:
    named = record.spec.priority
    if isinstance(named, str) and named != str(record.priority):
        return f"{named} ({record.priority})"
    return str(record.priority)


def pods_text(record: JobRecord | JobRow) -> str:
    """Pods placed out of pods asked for ("3/4" under partial admission), else the count."""
    wanted = record.spec.pod_count
    if record.admission:
        placed = record.admission.pod_count
        if placed != wanted:
            return f"{placed}/{wanted}"
    return str(wanted)


def reason_text(record: JobRecord | JobRow) -> str:
    """Why a queued job waits, in plain words; otherwise the job's last message."""
    if record.status is JobStatus.QUEUED and record.pending_message:
        return record.pending_message
    return record.message or ""


def _table(*columns: str) -> Table:
    """A borderless table with bold headers, like kubectl's."""
    table = Table(box=None, pad_edge=False, header_style="bold")
    for column in columns:
        table.add_column(column, no_wrap=column not in ("REASON/MESSAGE", "MESSAGE", "COMMAND"))
    return table


def _section(title: str, body: RenderableType) -> Group:
    return Group(Text(""), Text(title, style="bold underline"), body)


# --------------------------------------------------------------------------- jobs
def jobs_table(records: Iterable[JobRecord | JobRow], now: float | None = None, *,
               planes: bool = False) -> Table:
    """``planes``: a PLANE column (the control plane has two compute planes or more)."""
    table = _table(
        "NAME", "QUEUE", "USER", "STATUS", *(["PLANE"] if planes else []), "PRIORITY", "PODS",
        "AGE", "DURATION", "STARTS", "REASON/MESSAGE",
    )
    for r in records:
        table.add_row(
            r.name,
            r.queue,
            r.user,
            status_text(r.status),
            *([r.plane or NONE] if planes else []),
            priority_text(r),
            pods_text(r),
            ago(r.submitted_at, now),
            elapsed(r.started_at, r.finished_at, now),
            starts_text(r, now),
            reason_text(r),
        )
    return table


def _field_grid(rows: Iterable[tuple[str, RenderableType | str]]) -> Table:
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold", no_wrap=True)
    grid.add_column()
    for label, value in rows:
        grid.add_row(label, value)
    return grid


def describe_job(job: JobDetail | DetailRow, now: float | None = None, *,
                 plane: str | None = None) -> Group:
    """Spec summary, status, why it waits, placement, pods and events of one job (its
    record, or its rows read from the API's JSON: ``spec/detailrows.py``).
    ``plane``: the ``Plane:`` line (``planeinfo.plane_line``), else the job's plane."""
    spec = job.spec
    policy = spec.restart
    summary: list[tuple[str, RenderableType | str]] = [
        ("Name", job.name),
        ("Queue", f"{job.queue} (ClusterQueue {job.cluster_queue})"),
        ("Priority", priority_text(job)),
        ("Kind", spec.kind.value),
        ("Status", status_text(job.status)),
        *([("Plane", plane or job.plane or NONE)] if plane or job.plane else []),
        ("Attempt", str(job.attempt)),
        (
            "Restarts",
            f"user errors {job.user_restarts}/{policy.max_restarts}, "
            f"system failures {job.system_restarts}/{policy.max_system_restarts}",
        ),
        ("Submitted", ago(job.submitted_at, now)),
    ]
    if job.admitted_at is not None:
        summary.append(("Admitted", ago(job.admitted_at, now)))
    if job.started_at is not None:
        summary.append(("Started", ago(job.started_at, now)))
    if job.finished_at is not None:
        summary.append(("Finished", ago(job.finished_at, now)))
    if job.started_at is not None:
        summary.append(("Duration", elapsed(job.started_at, job.finished_at, now)))
    if spec.max_runtime is not None:
        summary.append(("Max runtime", format_duration(spec.max_runtime)))
    if spec.topology is not None and (spec.topology.required or spec.topology.preferred):
        level = spec.topology.required or spec.topology.preferred
        how = "required" if spec.topology.required else "preferred"
        summary.append(("Topology", f"one {level} ({how})"))
    if spec.workdir is not None and not isinstance(spec.workdir, str):  # a packed one
        summary.append(("Code", f"workdir {spec.workdir.sha256[:12]} "
                                f"({format_amount(spec.workdir.size * 1000, 'memory')})"))
    elif spec.git is not None:
        commit = (spec.git.commit or "unresolved")[:12]
        summary.append(("Code", f"git {spec.git.repo} at {commit} ({spec.git.ref})"))
    if spec.depends_on:
        summary.append(("Depends on", ", ".join(f"{d.job} ({d.condition})"
                                                for d in spec.depends_on)))
    if job.exit_code is not None:
        summary.append(("Exit code", str(job.exit_code)))
    if job.preemptions:
        summary.append(("Preemptions", str(job.preemptions)))
    if job.status is JobStatus.QUEUED:
        why = job.pending_message or "waiting for the next scheduling cycle"
        why = why.removeprefix("waiting for ")  # the label says it already
        if job.pending_code:
            why += f" [{job.pending_code}]"
        summary.append(("Waiting for", why))
        if job.estimate is not None:
            summary.append(("Position", estimate_text(job, now)))
            summary.append(("Estimate", f"{job.estimate.basis.value}: {job.estimate.message}"))
    if job.message:
        summary.append(("Message", job.message))
    for name, address in sorted(job.endpoints.items()):
        summary.append((name.capitalize(), address))
    if spec.ray is not None and spec.ray.entrypoint:
        summary.append(("Entrypoint", spec.ray.entrypoint))

    parts: list[RenderableType] = [_field_grid(summary)]
    parts.append(pod_sets_table(job))
    if job.admission:
        parts.append(placement_table(job.admission))
    if job.pods:
        parts.append(pods_table(job, now))
    if job.manifest is not None:
        parts.append(manifest_section(job))
    parts.append(events_table(job.events, now))
    return Group(*parts)


def manifest_section(job: JobDetail | DetailRow) -> Group:
    """The Kubernetes manifest the job was submitted as, and what Phalanx made of it."""
    manifest = job.manifest or {}
    lines = [f"- {note}" for note in job.manifest_notes]
    images = sorted({ps.image for ps in job.spec.pod_sets if ps.image})
    policies = sorted({ps.image_pull_policy for ps in job.spec.pod_sets if ps.image_pull_policy})
    if images and job.plane == LOCAL_PLANE:
        lines.append(f"- image {', '.join(images)}: recorded, not used; on the local plane "
                     "the commands run on this machine")
    if policies and job.plane == LOCAL_PLANE:
        lines.append(f"- imagePullPolicy {', '.join(policies)}: recorded, not used; on the "
                     "local plane no image is pulled")
    import yaml  # only a job submitted as a manifest shows one

    text = yaml.safe_dump(manifest, sort_keys=False).rstrip()
    title = (f"Manifest ({manifest.get('apiVersion')} {manifest.get('kind')}, as submitted; "
             f"the pod sets above are what Phalanx made of it)")
    return _section(title, Group(*(Text(line) for line in lines), Text(text)))


def pod_sets_table(job: JobRecord | DetailRow) -> Group:
    table = _table("POD SET", "REPLICAS", "RESOURCES (PER POD)", "COMMAND")
    for ps in job.spec.pod_sets:
        replicas = str(ps.replicas)
        if ps.min_replicas is not None:
            replicas += f" (min {ps.min_replicas})"
        resources = resources_text(ps.resources)
        if ps.cpu_pinning == "exclusive":
            resources += " (CPUs pinned)"
        table.add_row(ps.name, replicas, resources, " ".join(ps.command))
    return _section("Pod sets", table)


def placement_table(admission: JobAdmission | RowAdmission) -> Group:
    borrowing = " (borrowing from the cohort)" if admission.borrowing else ""
    title = f"Placement on ClusterQueue {admission.cluster_queue}{borrowing}"
    table = _table("POD SET", "PODS", "FLAVORS", "NODES")
    for ps in admission.pod_sets:
        flavors = ", ".join(f"{res}: {flavor}" for res, flavor in ps.flavors.items())
        counts: dict[str, int] = {}
        for node in ps.nodes:
            counts[node] = counts.get(node, 0) + 1
        on = ", ".join(f"{node} x{n}" if n > 1 else node for node, n in counts.items())
        table.add_row(ps.name, str(ps.count), flavors or NONE, on or NONE)
    return _section(title, table)


def pods_table(job: JobDetail | DetailRow, now: float | None = None) -> Group:
    pinned = any(pod.cpus for pod in job.pods)  # a CPUs column only for pinned pods
    columns = ["POD", "RANK", "NODE", *(["CPUS"] if pinned else []), "PHASE", "PID", "EXIT",
               "STARTED", "REASON"]
    table = _table(*columns)
    for pod in job.pods:
        if pod.exit_code is not None:
            code = str(pod.exit_code)
        elif pod.signal is not None:
            code = f"signal {pod.signal}"
        else:
            code = NONE
        cpus = [",".join(str(c) for c in pod.cpus) or NONE] if pinned else []
        table.add_row(
            pod.name, str(pod.rank), pod.node, *cpus, pod.phase,
            str(pod.pid) if pod.pid is not None else NONE, code,
            ago(pod.started_at, now), pod.reason or NONE,
        )
    return _section("Pods", table)


def events_table(events: Iterable[JobEvent | RowEvent], now: float | None = None) -> Group:
    table = _table("AGE", "TYPE", "REASON", "MESSAGE")
    for event in events:
        style = "yellow" if event.type == "Warning" else ""
        table.add_row(ago(event.time, now), Text(event.type, style=style), event.reason,
                      event.message)
    return _section("Events", table)


# --------------------------------------------------------------------------- queues & nodes
def queues_view(data: QueuesOverview) -> Group:
    cqs = _table("CLUSTERQUEUE", "COHORT", "PENDING", "ADMITTED", "FLAVOR", "RESOURCE",
                 "NOMINAL", "USED", "BORROWED", "WITHHELD")
    for cq in data.cluster_queues:
        name = cq.name + (" (stopped)" if cq.stopped else "")
        head = [name, cq.cohort or NONE, str(cq.pending), str(cq.admitted)]
        if not cq.usage:
            cqs.add_row(*head, *[NONE] * 6)
        for i, u in enumerate(cq.usage):
            amounts = (u.nominal, u.used, u.borrowed, u.withheld)
            cells = [u.flavor, u.resource, *(format_amount(a, u.resource) for a in amounts)]
            cqs.add_row(*(head if i == 0 else [""] * len(head)), *cells)
    lqs = _table("LOCALQUEUE", "CLUSTERQUEUE", "PENDING", "ADMITTED")
    for lq in data.local_queues:
        lqs.add_row(lq.name, lq.cluster_queue, str(lq.pending), str(lq.admitted))
    return Group(cqs, Text(""), lqs)


def pools_table(pools: Iterable[PoolView]) -> Table:
    table = _table("POOL", "JOB", "FLAVOR", "PROVIDER", "STATE", "NODES", "PER HOUR", "MESSAGE")
    for pool in pools:
        state = pool.state + (f" ({pool.error})" if pool.error else "")
        table.add_row(pool.name, pool.job, pool.flavor, pool.provider, state,
                      str(pool.node_count), f"{pool.node_count * pool.price_per_node_hour:g}",
                      pool.message)
    return table


def nodes_table(nodes: Iterable[NodeView]) -> Table:
    nodes = list(nodes)
    resources: list[str] = []
    for node in nodes:
        for res in node.allocatable:
            if res not in resources:
                resources.append(res)
    # The compute plane is a column of its own once there are two (the label is not
    # repeated among the labels).
    planes = {n.labels.get(PLANE_LABEL) for n in nodes}
    several = len(planes) > 1
    table = _table("NODE", *(["PLANE"] if several else []), "HEALTH",
                   *(f"{r.upper()} USED/ALLOC" for r in resources), "LABELS")
    for node in nodes:
        health = node.health.value
        if node.unschedulable:
            health += ", cordoned"
        failing = [c.name for c in node.checks if c.status.value in ("WARN", "ERR")]
        if failing:  # the checks' names; `phalanx node NAME` has what each found
            health += f" ({', '.join(failing)})"
        elif node.health_reasons:
            health += f" ({'; '.join(node.health_reasons)})"
        style = {"healthy": "green", "degraded": "yellow"}.get(node.health.value, "red")
        alloc, used = node.allocatable, node.used
        cells = [
            f"{format_amount(used.get(r, 0), r)}/{format_amount(alloc[r], r)}" if r in alloc
            else NONE
            for r in resources
        ]
        labels = ", ".join(f"{k}={v}" for k, v in node.labels.items()
                           if k != PLANE_LABEL) or NONE
        plane = [node.labels.get(PLANE_LABEL) or NONE] if several else []
        table.add_row(node.name, *plane, Text(health, style=style), *cells, labels)
    return table


CHECK_STYLES = {"PASS": "green", "WARN": "yellow", "ERR": "bold red", "N/A": "dim"}


def node_view(node: NodeView) -> Group:
    """One node: health, cordon, capacity, and every check's last answer."""
    style = {"healthy": "green", "degraded": "yellow"}.get(node.health.value, "red")
    rows: list[tuple[str, RenderableType | str]] = [
        ("Node", node.name),
        ("Health", Text(node.health.value + (" (lost)" if node.lost else ""), style=style)),
        ("Schedulable", "no (cordoned)" if node.unschedulable else "yes"),
        ("Allocatable", ", ".join(f"{r}={format_amount(v, r)}"
                                  for r, v in node.allocatable.items()) or NONE),
    ]
    for reason in node.health_reasons:
        rows.append(("Reason", reason))
    parts: list[RenderableType] = [_field_grid(rows)]
    if node.checks:
        table = _table("CHECK", "STATUS", "MESSAGE")
        for check in node.checks:
            table.add_row(check.name, Text(check.status.value,
                                           style=CHECK_STYLES[check.status.value]),
                          check.message)
        parts.append(table)
    else:
        parts.append(Text("No health checks reported for this node.", style="dim"))
    return Group(*parts)


def status_view(status: ServerStatus, url: str, now: float | None = None) -> Table:
    counts = ", ".join(f"{n} {s}" for s, n in status.jobs.items() if n) or "none"
    rows: list[tuple[str, RenderableType | str]] = [
        ("Control plane", Text(f"running at {url}", style="green")),
        ("Version", status.version),
        ("Started", ago(status.started_at, now)),
        ("Compute", status.compute),
        ("Store", status.db),
        ("Nodes", str(status.nodes)),
        ("Jobs", counts),
    ]
    return _field_grid(rows)


def applied_lines(applied: Iterable[AppliedObject]) -> list[str]:
    """kubectl-style: "clusterqueue/team-a created"."""
    return [f"{a.kind.lower()}/{a.name} {a.action}" for a in applied]
