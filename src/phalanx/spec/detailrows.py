"""One job's detail read from the API's JSON as plain rows, without the spec's models.

``phalanx describe`` draws a page of nearly every field of a job; building its whole
record (``JobDetail``, its ``JobSpec`` and the models they hold: pod sets, volumes,
secrets' references, sources, Ray, provisioning) would cost the CLI more than all the rest
of its answer. A ``DetailRow`` has the attributes of a ``JobDetail`` that the page and its
``Plane:`` line read, with the same names, types and defaults (quantities as milli-units,
durations as seconds), so one page (``cli/render.py``) serves both, as ``spec/rows.py``
does for the table of jobs. The client reads them (``Client.get_row``). Named tuples, not
dataclasses: the CLI makes these classes on every run, and a named tuple is made several
times faster.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from phalanx.spec.jobstatus import JobStatus
from phalanx.spec.quantity import parse_duration, parse_quantity


class Word(NamedTuple):
    """A value the models hold as an enum (a job's kind, an estimate's basis): its
    ``value`` is the word the API sends."""

    value: str


class RowRestart(NamedTuple):
    max_restarts: int
    max_system_restarts: int


class RowTopology(NamedTuple):
    required: str | None
    preferred: str | None


class RowArchive(NamedTuple):
    """A packed working directory (``WorkdirArchive``); a path is kept as its string."""

    sha256: str
    size: int


class RowGit(NamedTuple):
    repo: str
    ref: str
    commit: str | None


class RowDependency(NamedTuple):
    job: str
    condition: str


class RowRay(NamedTuple):
    entrypoint: str | None


class RowPodSet(NamedTuple):
    name: str
    replicas: int
    min_replicas: int | None
    resources: dict[str, int]  # milli-units, as PodSet.resources
    cpu_pinning: str
    command: list[str]
    image: str | None
    image_pull_policy: str | None


class RowJobSpec(NamedTuple):
    priority: str | int
    kind: Word
    restart: RowRestart
    max_runtime: float | None  # seconds, as JobSpec.max_runtime
    topology: RowTopology | None
    workdir: str | RowArchive | None
    git: RowGit | None
    depends_on: list[RowDependency]
    ray: RowRay | None
    pod_sets: list[RowPodSet]

    @property
    def pod_count(self) -> int:
        return sum(ps.replicas for ps in self.pod_sets)


@dataclass(frozen=True, slots=True)
class RowPlacement:  # a dataclass: a named tuple has a count() of its own
    name: str
    count: int
    flavors: dict[str, str]
    nodes: list[str]


class RowAdmission(NamedTuple):
    cluster_queue: str
    borrowing: bool
    pod_sets: list[RowPlacement]

    @property
    def pod_count(self) -> int:
        return sum(ps.count for ps in self.pod_sets)


class RowEstimate(NamedTuple):
    position: int
    cohort_position: int | None
    starts_at: float | None
    guess: bool
    basis: Word
    message: str


class RowPod(NamedTuple):
    name: str
    rank: int
    node: str
    phase: str
    exit_code: int | None
    signal: int | None
    reason: str
    pid: int | None
    started_at: float | None
    cpus: list[int]


class RowEvent(NamedTuple):
    time: float
    type: str
    reason: str
    message: str


class DetailRow(NamedTuple):
    name: str
    spec: RowJobSpec
    status: JobStatus
    queue: str
    cluster_queue: str
    priority: int
    plane: str | None
    attempt: int
    user_restarts: int
    system_restarts: int
    submitted_at: float
    admitted_at: float | None
    started_at: float | None
    finished_at: float | None
    exit_code: int | None
    preemptions: int
    pending_message: str | None
    pending_code: str | None
    estimate: RowEstimate | None
    message: str
    endpoints: dict[str, str]
    admission: RowAdmission | None
    pods: list[RowPod]
    events: list[RowEvent]
    manifest: dict[str, Any] | None
    manifest_notes: list[str]

    @classmethod
    def of(cls, job: Mapping[str, Any]) -> DetailRow:
        """``GET /v1/jobs/{name}``'s answer (camelCase, as the API serves it)."""
        admission, estimate = job.get("admission"), job.get("estimate")
        return cls(
            name=job["name"], spec=_spec(job["spec"]),
            status=JobStatus(job.get("status", "Queued")), queue=job["queue"],
            cluster_queue=job["clusterQueue"], priority=job.get("priority", 0),
            plane=job.get("plane"), attempt=job.get("attempt", 0),
            user_restarts=job.get("userRestarts", 0),
            system_restarts=job.get("systemRestarts", 0),
            submitted_at=job["submittedAt"], admitted_at=job.get("admittedAt"),
            started_at=job.get("startedAt"), finished_at=job.get("finishedAt"),
            exit_code=job.get("exitCode"), preemptions=job.get("preemptions", 0),
            pending_message=job.get("pendingMessage"), pending_code=job.get("pendingCode"),
            estimate=None if estimate is None else RowEstimate(
                position=estimate["position"], cohort_position=estimate.get("cohortPosition"),
                starts_at=estimate.get("startsAt"), guess=estimate.get("guess", False),
                basis=Word(estimate["basis"]), message=estimate.get("message", "")),
            message=job.get("message", ""), endpoints=dict(job.get("endpoints") or {}),
            admission=None if admission is None else RowAdmission(
                cluster_queue=admission["clusterQueue"],
                borrowing=admission.get("borrowing", False),
                pod_sets=[RowPlacement(name=p["name"], count=p["count"],
                                       flavors=dict(p.get("flavors") or {}),
                                       nodes=list(p.get("nodes") or []))
                          for p in admission["podSets"]]),
            pods=[RowPod(name=p["name"], rank=p["rank"], node=p["node"], phase=p["phase"],
                         exit_code=p.get("exitCode"), signal=p.get("signal"),
                         reason=p.get("reason", ""), pid=p.get("pid"),
                         started_at=p.get("startedAt"), cpus=list(p.get("cpus") or []))
                  for p in job.get("pods") or []],
            events=[RowEvent(time=e["time"], type=e.get("type", "Normal"), reason=e["reason"],
                             message=e.get("message", "")) for e in job.get("events") or []],
            manifest=job.get("manifest"), manifest_notes=list(job.get("manifestNotes") or []),
        )


def _spec(spec: Mapping[str, Any]) -> RowJobSpec:
    restart = spec.get("restart") or {}
    topology, workdir, git, ray = (spec.get(k) for k in ("topology", "workdir", "git", "ray"))
    runtime = spec.get("maxRuntime")
    return RowJobSpec(
        priority=spec.get("priority", "default"), kind=Word(spec.get("kind", "generic")),
        restart=RowRestart(max_restarts=restart.get("maxRestarts", 0),
                           max_system_restarts=restart.get("maxSystemRestarts", 10)),
        max_runtime=None if runtime is None else parse_duration(runtime, "maxRuntime"),
        topology=None if topology is None else RowTopology(
            required=topology.get("required"), preferred=topology.get("preferred")),
        workdir=workdir if workdir is None or isinstance(workdir, str) else RowArchive(
            sha256=workdir["sha256"], size=workdir.get("size", 0)),
        git=None if git is None else RowGit(repo=git["repo"], ref=git.get("ref", "HEAD"),
                                            commit=git.get("commit")),
        depends_on=[RowDependency(job=d["job"], condition=d.get("condition", "Succeeded"))
                    for d in spec.get("dependsOn") or []],
        ray=None if ray is None else RowRay(entrypoint=ray.get("entrypoint")),
        pod_sets=[RowPodSet(
            name=p.get("name", "worker"), replicas=p.get("replicas", 1),
            min_replicas=p.get("minReplicas"),
            resources={res: parse_quantity(amount, f"resources.{res}")
                       for res, amount in (p.get("resources") or {}).items()},
            cpu_pinning=p.get("cpuPinning", "none"), command=list(p.get("command") or []),
            image=p.get("image"), image_pull_policy=p.get("imagePullPolicy"))
            for p in spec["podSets"]],
    )
