"""Which compute plane (cluster) things are on, for people: a plane's state in a few words,
the ``Plane:`` line of ``phalanx describe``, the planes table of ``phalanx status`` and what a
silent plane holds (``phalanx plane list``/``describe``)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from rich.table import Table
from rich.text import Text

from phalanx.errors import Forbidden, NotFound
from phalanx.sdk.client import Client
from phalanx.spec import format_duration, format_quantity
from phalanx.spec.planes import LOCAL_PLANE, PlaneView
from phalanx.spec.resources import GPU
from phalanx.spec.status import JobRecord

NONE = "-"
PHASE_STYLES = {"in-process": "green", "connected": "green", "waiting": "yellow",
                "silent": "red", "lost": "bold red"}


def planes_of(client: Client) -> list[PlaneView]:
    """The control plane's compute planes; none from a server without plane routes, or for
    a caller that may not list them."""
    try:
        return client.planes()
    except (NotFound, Forbidden):
        return []


def several_planes(client: Client, records: Iterable[JobRecord] = ()) -> bool:
    """Whether jobs need a PLANE column: some are placed and there are two planes or more,
    as ``phalanx nodes`` has it (or, from a server that lists none, two among the jobs)."""
    records = list(records)
    if not any(r.plane for r in records):
        return False  # a column of dashes: not worth a request
    planes = planes_of(client)
    if planes:
        return len(planes) > 1
    return len({r.plane for r in records if r.plane}) > 1


def _seconds(value: float | None) -> str:
    return format_duration(max(0.0, round(value or 0.0)))


def state_text(plane: PlaneView) -> str:
    """``connected``, ``silent 2m``, ``lost``, ``waiting``..., with cordoned/draining."""
    words: str = plane.phase
    if plane.phase in ("silent", "lost", "waiting") and plane.silent_for is not None:
        words += f" {_seconds(plane.silent_for)}"
    flag = "draining" if plane.draining else "cordoned" if plane.cordoned else ""
    return words + (f", {flag}" if flag else "")


def amounts_text(amounts: Mapping[str, int]) -> str:
    """Milli-unit amounts (Quantity fields) as "cpu=12 nvidia.com/gpu=8"."""
    return " ".join(f"{res}={format_quantity(amounts[res], res)}"
                    for res in sorted(amounts)) or NONE


def holds_text(plane: PlaneView) -> str:
    """What a plane holds: its jobs and the quota they keep (or use)."""
    if not plane.jobs:
        return "no jobs"
    count = f"{len(plane.jobs)} job{'s' if len(plane.jobs) != 1 else ''}"
    used = amounts_text(plane.used)
    kept = plane.quota_kept_for
    if kept is not None:
        return (f"{count} keeping their quota ({used}) for {_seconds(kept)} more, until the "
                f"plane is lost after {_seconds(plane.lost_after)} of silence")
    if plane.phase == "lost":
        return f"{count} being requeued (the plane is lost; their quota is released)"
    return f"{count} using {used}"


def plane_line(job: JobRecord, planes: Iterable[PlaneView]) -> str | None:
    """The ``Plane:`` line of ``phalanx describe``; None for a job placed nowhere."""
    if job.plane is None:
        return None
    found = next((p for p in planes if p.name == job.plane), None)
    if found is None or not found.remote:
        return job.plane
    if found.phase in ("silent", "waiting") and not job.status.terminal:
        kept = found.quota_kept_for
        return (f"{job.plane} (worker silent for {_seconds(found.silent_for)}; the job keeps "
                f"its quota until {_seconds(found.lost_after)} of silence, "
                f"{_seconds(kept)} from now)")
    if found.phase == "lost" and not job.status.terminal:
        return (f"{job.plane} (lost: worker silent for {_seconds(found.silent_for)}; the job "
                "is requeued)")
    if found.draining or found.cordoned:
        return f"{job.plane} ({'draining' if found.draining else 'cordoned'})"
    return job.plane


def job_plane_line(client: Client, job: JobRecord) -> str | None:
    """The ``Plane:`` line, asking the control plane for the state of the job's plane."""
    if job.plane is None:
        return None
    return plane_line(job, planes_of(client) if job.plane != LOCAL_PLANE else ())


def _used_of(plane: PlaneView, resource: str) -> str:
    if resource not in plane.allocatable:
        return NONE
    used = format_quantity(plane.used.get(resource, 0), resource)
    return f"{used}/{format_quantity(plane.allocatable[resource], resource)}"


def planes_table(planes: Iterable[PlaneView]) -> Table:
    """``phalanx status``: each plane's state, nodes, jobs and CPUs/GPUs in use."""
    planes = list(planes)
    gpus = any(GPU in p.allocatable for p in planes)
    table = Table(box=None, pad_edge=False, header_style="bold")
    for column in ("PLANE", "STATE", "NODES", "JOBS", "CPU USED/ALLOC",
                   *(["GPU USED/ALLOC"] if gpus else []), "HOLDS"):
        table.add_column(column, no_wrap=column != "HOLDS")
    for p in planes:
        state = Text(state_text(p), style=PHASE_STYLES.get(p.phase, ""))
        table.add_row(p.name, state, str(p.nodes), str(len(p.jobs)), _used_of(p, "cpu"),
                      *([_used_of(p, GPU)] if gpus else []),
                      holds_text(p) if p.phase in ("silent", "waiting", "lost") else NONE)
    return table
