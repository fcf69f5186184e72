"""Query results as tables (``phalanx.display.Table``): one job's fields, a list of jobs,
the queues' usage.

``JobRecord``'s and ``QueuesOverview``'s ``_repr_html_`` / ``__rich__`` and the SDK's job
lists draw these; quantities
are shown as people write them (``format_amount``: "4Gi", "500m").
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from phalanx.display import Table, fields_table, when
from phalanx.spec.jobstatus import JobStatus
from phalanx.spec.quantity import format_amount

if TYPE_CHECKING:
    from phalanx.spec.api import QueuesOverview
    from phalanx.spec.detailrows import DetailRow
    from phalanx.spec.resources import JobSpec, PodSet
    from phalanx.spec.rows import JobRow
    from phalanx.spec.status import JobRecord

JOB_COLUMNS = ("name", "status", "queue", "user", "pods", "resources", "submitted",
               "why / message")


def amounts(resources: dict[str, int], times: int = 1) -> str:
    """``cpu 1, memory 2Gi`` for a resource map (each amount ``times`` over)."""
    return ", ".join(f"{name} {format_amount(millis * times, name)}"
                     for name, millis in sorted(resources.items())) or "-"


def pod_set_line(pod_set: PodSet) -> str:
    replicas = (f"{pod_set.min_replicas}-{pod_set.replicas}" if pod_set.min_replicas
                else str(pod_set.replicas))
    return f"{pod_set.name} x{replicas}: {amounts(pod_set.resources)}"


def total_resources(spec: JobSpec) -> dict[str, int]:
    total: dict[str, int] = {}
    for pod_set in spec.pod_sets:
        for name, millis in pod_set.resources.items():
            total[name] = total.get(name, 0) + millis * pod_set.replicas
    return total


def why(record: JobRecord) -> str:
    """What a job waits for (when pending) or what it last said."""
    return record.pending_message or record.message or ""


def starts_text(record: JobRecord | JobRow | DetailRow, now: float) -> str:
    """A queued job's estimated start from ``now`` (epoch seconds), humanised: "~12m",
    "~3h", "?" when unknown; a trailing "*" marks a guess (a run it waits for has no
    maxRuntime and no history). The caller reads the clock: the scheduler's layer has none."""
    estimate = record.estimate
    if record.status is not JobStatus.QUEUED:
        return "-"
    if estimate is None or estimate.starts_at is None:
        return "?"
    seconds = estimate.starts_at - now
    mark = "*" if estimate.guess else ""
    if seconds < 60:
        return "<1m" + mark
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"~{round(seconds / size)}{unit}{mark}"
    return "?"  # (not reached)


def estimate_text(record: JobRecord | DetailRow, now: float) -> str:
    """Position and estimated start in one line: "#2 in team-a, starts ~12m"."""
    estimate = record.estimate
    if record.status is not JobStatus.QUEUED or estimate is None:
        return ""
    return f"{position_text(record)}, starts {starts_text(record, now)}"


def position_text(record: JobRecord | DetailRow) -> str:
    """A queued job's place: "#2 in team-a (#3 in its cohort)"; "" when it has none."""
    estimate = record.estimate
    if record.status is not JobStatus.QUEUED or estimate is None:
        return ""
    where = f"#{estimate.position} in {record.cluster_queue}"
    if estimate.cohort_position is not None:
        where += f" (#{estimate.cohort_position} in its cohort)"
    return where


def spec_fields(spec: JobSpec) -> list[tuple[str, str]]:
    fields = [("name", spec.name), ("queue", spec.queue), ("priority", str(spec.priority)),
              ("kind", spec.kind.value)]
    fields += [(f"pod set {p.name}", pod_set_line(p)) for p in spec.pod_sets]
    fields += [(f"command ({p.name})", " ".join(p.command)) for p in spec.pod_sets
               if p.command]
    return fields


def job_table(record: JobRecord) -> Table:
    """One job: its status, why it waits, its pod sets and times (and pods, if detailed)."""
    fields = [("status", record.status.value)]
    if why(record):
        fields.append(("why pending" if record.pending_message else "message", why(record)))
    fields += [("queue", f"{record.queue} -> {record.cluster_queue}"), ("user", record.user)]
    fields += [f for f in spec_fields(record.spec) if f[0] not in ("name", "queue")]
    fields += [("submitted", when(record.submitted_at)), ("started", when(record.started_at)),
               ("finished", when(record.finished_at))]
    if record.exit_code is not None:
        fields.append(("exit code", str(record.exit_code)))
    fields += [(f"endpoint {k}", v) for k, v in sorted(record.endpoints.items())]
    for pod in getattr(record, "pods", []):
        fields.append((f"pod {pod.name}", f"{pod.phase} on {pod.node}"
                       + (f" ({pod.reason})" if pod.reason else "")))
    return fields_table(f"job {record.name}", fields)


def job_row(record: JobRecord) -> list[str]:
    return [record.name, record.status.value, record.queue, record.user,
            str(record.spec.pod_count), amounts(total_resources(record.spec)),
            when(record.submitted_at), why(record)]


def jobs_table(records: Iterable[JobRecord], title: str = "jobs") -> Table:
    return Table(title, JOB_COLUMNS, [job_row(r) for r in records], empty="no jobs")


QUEUE_COLUMNS = ("cluster queue", "cohort", "pending", "admitted", "flavor", "resource",
                 "nominal", "used", "borrowed", "lendable")


def queues_table(overview: QueuesOverview) -> Table:
    """ClusterQueues with their usage, one row per flavor and resource."""
    rows: list[Sequence[str]] = []
    for cq in overview.cluster_queues:
        head = [cq.name + (" (stopped)" if cq.stopped else ""), cq.cohort or "-",
                str(cq.pending), str(cq.admitted)]
        if not cq.usage:
            rows.append([*head, "-", "-", "-", "-", "-", "-"])
        for usage in cq.usage:
            shown = [format_amount(m, usage.resource) for m in
                     (usage.nominal, usage.used, usage.borrowed, usage.lendable)]
            rows.append([*head, usage.flavor, usage.resource, *shown])
    return Table("cluster queues", QUEUE_COLUMNS, rows, empty="no cluster queues")
