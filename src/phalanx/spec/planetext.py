"""Compute planes (clusters) in words, the same wherever they are shown: a plane's state,
what a silent plane holds, the ``Plane:`` line of a job, and when jobs need a plane column.
``phalanx describe``/``status``/``plane`` (``cli/planeinfo.py``) and the dashboard both say
them from here."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from phalanx.spec.quantity import format_amount, format_duration

if TYPE_CHECKING:
    from phalanx.spec.detailrows import DetailRow
    from phalanx.spec.planes import PlaneView
    from phalanx.spec.rows import JobRow
    from phalanx.spec.status import JobRecord

NONE = "-"
# Phases in which a plane's worker is not heard: what the plane holds is worth saying.
UNHEARD = ("silent", "waiting", "lost")


def several_planes(records: Iterable[JobRecord | JobRow],
                   planes: Callable[[], Sequence[object]]) -> bool:
    """Whether jobs need a plane column: some are placed and there are two planes or more
    (``planes`` is asked only then; from a server that lists none, two among the jobs)."""
    records = list(records)
    if not any(r.plane for r in records):
        return False  # a column of dashes: not worth asking
    listed = planes()
    if listed:
        return len(listed) > 1
    return len({r.plane for r in records if r.plane}) > 1


def seconds_text(value: float | None) -> str:
    return format_duration(max(0.0, round(value or 0.0)))


def state_text(plane: PlaneView) -> str:
    """``connected``, ``silent 2m``, ``lost``, ``waiting``..., with cordoned/draining."""
    words: str = plane.phase
    if plane.phase in UNHEARD and plane.silent_for is not None:
        words += f" {seconds_text(plane.silent_for)}"
    flag = "draining" if plane.draining else "cordoned" if plane.cordoned else ""
    return words + (f", {flag}" if flag else "")


def amounts_text(amounts: Mapping[str, int]) -> str:
    """Milli-unit amounts (Quantity fields) as "cpu=12 nvidia.com/gpu=8"."""
    return " ".join(f"{res}={format_amount(amounts[res], res)}"
                    for res in sorted(amounts)) or NONE


def used_of(plane: PlaneView, resource: str) -> str:
    """``12/32``: what the plane's jobs use of what its nodes have; ``-`` if none have it."""
    if resource not in plane.allocatable:
        return NONE
    used = format_amount(plane.used.get(resource, 0), resource)
    return f"{used}/{format_amount(plane.allocatable[resource], resource)}"


def holds_text(plane: PlaneView) -> str:
    """What a plane holds: its jobs and the quota they keep (or use)."""
    if not plane.jobs:
        return "no jobs"
    count = f"{len(plane.jobs)} job{'s' if len(plane.jobs) != 1 else ''}"
    used = amounts_text(plane.used)
    kept = plane.quota_kept_for
    if kept is not None:
        return (f"{count} keeping their quota ({used}) for {seconds_text(kept)} more, until "
                f"the plane is lost after {seconds_text(plane.lost_after)} of silence")
    if plane.phase == "lost":
        return f"{count} being requeued (the plane is lost; their quota is released)"
    return f"{count} using {used}"


def plane_line(job: JobRecord | DetailRow, planes: Iterable[PlaneView]) -> str | None:
    """The ``Plane:`` line of ``phalanx describe``; None for a job placed nowhere."""
    if job.plane is None:
        return None
    found = next((p for p in planes if p.name == job.plane), None)
    if found is None or not found.remote:
        return job.plane
    if found.phase in ("silent", "waiting") and not job.status.terminal:
        kept = found.quota_kept_for
        return (f"{job.plane} (worker silent for {seconds_text(found.silent_for)}; the job "
                f"keeps its quota until {seconds_text(found.lost_after)} of silence, "
                f"{seconds_text(kept)} from now)")
    if found.phase == "lost" and not job.status.terminal:
        return (f"{job.plane} (lost: worker silent for {seconds_text(found.silent_for)}; the "
                "job is requeued)")
    if found.draining or found.cordoned:
        return f"{job.plane} ({'draining' if found.draining else 'cordoned'})"
    return job.plane
