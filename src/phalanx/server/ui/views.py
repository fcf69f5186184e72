"""The dashboard's pages as fragments of HTML: a page renders them once, and its live
stream renders them again whenever they change. One function per page, so what a page
shows first and what it shows later can never differ."""

from __future__ import annotations

import heapq
import time
from collections.abc import Mapping
from dataclasses import dataclass

import yaml

from phalanx.control.planes import with_plane
from phalanx.control.service import LocalQueueCounts, NodeOverview
from phalanx.errors import NotFound, SpecError
from phalanx.server.logstream import pod_names
from phalanx.server.ui import charts
from phalanx.server.ui.context import Dashboard
from phalanx.server.ui.history import admission_rates, utilisation
from phalanx.server.ui.session import Session
from phalanx.spec.labels import merge_selectors
from phalanx.spec.planes import LOCAL_PLANE, PLANE_LABEL, PlaneView
from phalanx.spec.planetext import (
    NONE,
    UNHEARD,
    holds_text,
    plane_line,
    several_planes,
    state_text,
    used_of,
)
from phalanx.spec.quantity import format_quantity
from phalanx.spec.resources import GPU, JobKind, NodeHealth
from phalanx.spec.status import JobRecord, JobStatus
from phalanx.store import JobFilter

Fragments = dict[str, str]
PAGE_SIZE = 50
MAX_PAGE_SIZE = 500
WAITERS = 10
# A kind filter is not in the store's index: pages are read until one is full, up to this
# many jobs, so a rare kind among 100,000 jobs cannot make a page slow.
KIND_SCAN = 5000
RUNNING = (JobStatus.ADMITTED, JobStatus.STARTING, JobStatus.RUNNING)
# Events that stop an attempt, and the requeue that follows (its message says why and when).
RESTART_REASONS = frozenset({"Requeued", "Preempted", "PodsLost", "NodeUnhealthy", "Drained",
                             "DeadlineExceeded"})


# ------------------------------------------------------------------ overview
def overview(d: Dashboard, session: Session) -> Fragments:
    service = d.service
    counts = service.store.count_jobs_by_status()
    share, resource = utilisation(service)
    samples = d.history.recent()
    chart = charts.line_chart(
        [(s.time, 100 * s.utilisation) for s in samples],
        label=f"{'GPU' if resource != 'cpu' else 'CPU'} utilisation", unit="%", top=100)
    nodes = [n for n in service.nodes()
             if n.node.unschedulable or n.node.lost or n.node.health is not NodeHealth.HEALTHY]
    return {
        "counts": d.fragment(
            "_counts.html", session, share=share, resource=resource,
            running=sum(counts.get(s.value, 0) for s in RUNNING),
            pending=counts.get(JobStatus.QUEUED.value, 0),
            failed=counts.get(JobStatus.FAILED.value, 0),
            succeeded=counts.get(JobStatus.SUCCEEDED.value, 0)),
        "chart": chart,
        "waiters": d.fragment("_waiters.html", session, rows=_longest_waiters(d, session)),
        "bad-nodes": d.fragment("_bad_nodes.html", session, nodes=nodes),
        "clusters": clusters(d, session),
    }


def _longest_waiters(d: Dashboard, session: Session) -> list[object]:
    state = d.service.state
    with state.lock:
        oldest = heapq.nsmallest(
            WAITERS, (r for r in state.jobs.values() if r.status is JobStatus.QUEUED),
            key=lambda r: r.queued_at)
        names = [r.name for r in oldest]
    live = d.service.live(names)
    now = time.time()
    return [d.visibility.row(live[n], session, now) for n in names if n in live]


# ------------------------------------------------------------------ queues
def queues(d: Dashboard, session: Session) -> Fragments:
    overview = d.service.queues()
    samples = d.history.recent()
    by_cohort: dict[str | None, list[object]] = {}
    for cq in overview.cluster_queues:
        by_cohort.setdefault(cq.cohort, []).append(cq)
    children: dict[str | None, list[str]] = {}
    for cohort in overview.config.cohorts.values():
        children.setdefault(cohort.parent, []).append(cohort.name)
    # Cohorts named only by queues (not declared) are roots too.
    declared = set(overview.config.cohorts)
    for name in by_cohort:
        if name is not None and name not in declared:
            children.setdefault(None, []).append(name)
    rates = {cq.name: charts.line_chart(admission_rates(samples, cq.name),
                                        label=f"{cq.name} admissions", unit="per min",
                                        css="line small")
             for cq in overview.cluster_queues}
    local: dict[str, list[LocalQueueCounts]] = {}
    for lq in overview.local_queues:
        local.setdefault(lq.cluster_queue, []).append(lq)
    return {"queues": d.fragment(
        "_queues.html", session, by_cohort=by_cohort, children=children, rates=rates,
        local=local)}


# ------------------------------------------------------------------ jobs
@dataclass(frozen=True, slots=True)
class JobsQuery:
    queue: str | None = None
    status: JobStatus | None = None
    user: str | None = None
    team: str | None = None
    kind: JobKind | None = None
    limit: int = PAGE_SIZE
    after: str | None = None

    @classmethod
    def parse(cls, params: Mapping[str, str]) -> JobsQuery:
        def given(key: str) -> str | None:
            value = params.get(key, "").strip()
            return value or None

        status_text, kind_text = given("status"), given("kind")
        try:
            status = JobStatus(status_text) if status_text else None
        except ValueError:
            raise SpecError(f"{params['status']!r} is not a job status", field="status",
                            fix=f"choose one of {', '.join(s.value for s in JobStatus)}") from None
        try:
            kind = JobKind(kind_text) if kind_text else None
        except ValueError:
            raise SpecError(f"{params['kind']!r} is not a job kind", field="kind",
                            fix=f"choose one of {', '.join(k.value for k in JobKind)}") from None
        raw_limit = given("limit") or str(PAGE_SIZE)
        if not raw_limit.isdigit() or not 1 <= int(raw_limit) <= MAX_PAGE_SIZE:
            raise SpecError(f"{raw_limit!r} is not a page size", field="limit",
                            fix=f"give a number from 1 to {MAX_PAGE_SIZE}")
        return cls(queue=given("queue"), status=status, user=given("user"), team=given("team"),
                   kind=kind, limit=int(raw_limit), after=given("continue"))

    def filter(self) -> JobFilter:
        labels = merge_selectors([f"team={self.team}"]) if self.team else {}
        return JobFilter(statuses=[self.status] if self.status else None, queue=self.queue,
                         user=self.user, labels=labels)

    def link(self, after: str | None) -> str:
        """The query string of this list from ``after`` on (the first page: None)."""
        from urllib.parse import urlencode

        values = {"queue": self.queue, "status": self.status.value if self.status else None,
                  "user": self.user, "team": self.team,
                  "kind": self.kind.value if self.kind else None,
                  "limit": str(self.limit) if self.limit != PAGE_SIZE else None,
                  "continue": after}
        return urlencode({k: v for k, v in values.items() if v})


def jobs(d: Dashboard, session: Session, query: JobsQuery) -> Fragments:
    records, after, remaining = _page(d, query)
    records = [with_plane(r, d.service.plane) for r in records]
    now = time.time()
    rows = [d.visibility.row(r, session, now) for r in records]
    return {"jobs": d.fragment("_jobs.html", session, rows=rows, query=query,
                               next_link=query.link(after) if after else None,
                               remaining=remaining,
                               show_plane=several_planes(records, d.plane_views))}


def _page(d: Dashboard, query: JobsQuery) -> tuple[list[JobRecord], str | None, int]:
    """A page of the store's order (newest first). With a kind, whole store pages are read
    until ``limit`` jobs of that kind are found (a page may show a few more), the store is
    done, or ``KIND_SCAN`` jobs were read; the next page goes on from there."""
    where = query.filter()
    found: list[JobRecord] = []
    after, scanned = query.after, 0
    while True:
        page = d.service.page_jobs(where, limit=query.limit, after=after)
        scanned += len(page.items)
        found += [r for r in page.items if query.kind is None or r.spec.kind is query.kind]
        after = page.next
        if query.kind is None or len(found) >= query.limit or after is None \
                or scanned >= KIND_SCAN:
            return found, after, page.remaining


# ------------------------------------------------------------------ one job
def job(d: Dashboard, session: Session, name: str) -> Fragments:
    record = with_plane(d.service.get(name), d.service.plane)
    seen = d.visibility.record(record, session)
    if seen is None:
        raise NotFound(f"no job {name!r} you may see", field="job",
                       fix="pick a job of your teams from the Jobs page")
    pods = sorted(d.service.pods_of(name), key=lambda p: p.ref.rank)
    events = d.service.events_of(name)
    restarts = [e for e in events if e.reason in RESTART_REASONS]
    endpoints = {}
    endpoints_of = getattr(d.service.plane, "endpoints", None)
    if endpoints_of is not None and not record.status.terminal:
        try:
            endpoints = dict(endpoints_of(name, record.attempt))
        except Exception:  # a plane that cannot say leaves the links out, not the page
            endpoints = {}
    # The local plane has no worker to go silent: its line is its name, asked of no one.
    planes = d.plane_views() if record.plane not in (None, LOCAL_PLANE) else []
    on = next((p for p in planes if p.name == record.plane), None)
    return {"job": d.fragment(
        "_job.html", session, job=seen, pods=pods, events=events, restarts=restarts,
        endpoints=endpoints, may_change=session.may_change(record)
        and not record.status.terminal, plane=plane_line(record, planes),
        plane_unheard=on is not None and on.phase in UNHEARD and not record.status.terminal)}


def spec_yaml(record: JobRecord) -> str:
    spec = record.spec.to_dict()
    # Each request in its resource's exact Kubernetes spelling (memory as 24684084Ki, not
    # 25276502016): still the spec, as it could be submitted again.
    for document, pod_set in zip(spec.get("podSets", []), record.spec.pod_sets, strict=True):
        if pod_set.resources:
            document["resources"] = {r: format_quantity(v, r) for r, v in pod_set.resources.items()}
    return yaml.safe_dump(spec, sort_keys=False)


def job_pods(record: JobRecord) -> list[str]:
    return pod_names(record)


# ------------------------------------------------------------------ nodes
def nodes(d: Dashboard, session: Session) -> Fragments:
    entries = sorted(d.service.nodes(), key=lambda n: n.node.name)
    return {"nodes": d.fragment("_nodes.html", session, groups=by_plane(entries)),
            "clusters": clusters(d, session)}


def by_plane(entries: list[NodeOverview]) -> list[tuple[str | None, list[NodeOverview]]]:
    """The nodes under their compute plane (cluster), planes by name; one group with no
    name when all are of one plane (or none, as with no node)."""
    groups: dict[str, list[NodeOverview]] = {}
    for entry in entries:
        groups.setdefault(entry.node.labels.get(PLANE_LABEL, LOCAL_PLANE), []).append(entry)
    if len(groups) < 2:
        return [(None, entries)] if entries else []
    return sorted(groups.items())


# ------------------------------------------------------------------ compute planes
@dataclass(frozen=True, slots=True)
class PlaneRow:
    """One compute plane (cluster) as the Clusters panel shows it, in the words of
    ``phalanx status``: counts and amounts only, never the names of its jobs."""

    name: str
    phase: str
    state: str
    nodes: int
    jobs: int
    cpu: str
    gpu: str
    holds: str  # what a plane whose worker is not heard holds; "-" for the others


def plane_row(plane: PlaneView) -> PlaneRow:
    return PlaneRow(name=plane.name, phase=plane.phase, state=state_text(plane),
                    nodes=plane.nodes, jobs=len(plane.jobs), cpu=used_of(plane, "cpu"),
                    gpu=used_of(plane, GPU),
                    holds=holds_text(plane) if plane.phase in UNHEARD else NONE)


def clusters(d: Dashboard, session: Session) -> str:
    """The Clusters panel: each compute plane, or nothing when there is only one."""
    planes = d.plane_views()
    if len(planes) < 2:
        return ""
    rows = [plane_row(p) for p in planes]
    return d.fragment("_planes.html", session, planes=rows,
                      gpus=any(GPU in p.allocatable for p in planes))
