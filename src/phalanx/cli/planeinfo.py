"""Which compute plane (cluster) things are on, for people: the ``Plane:`` line of
``phalanx describe`` and the planes table of ``phalanx status``, asking the control plane
for its planes. The words themselves (a plane's state, what a silent plane holds) are
``spec/planetext.py``'s, which the dashboard says too."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from rich.table import Table
from rich.text import Text

from phalanx.errors import Forbidden, NotFound
from phalanx.sdk.client import Client
from phalanx.spec.names import LOCAL_PLANE
from phalanx.spec.planetext import (
    NONE,
    UNHEARD,
    amounts_text,
    holds_text,
    plane_line,
    state_text,
    used_of,
)
from phalanx.spec.planetext import several_planes as _several_planes

if TYPE_CHECKING:
    from phalanx.spec.detailrows import DetailRow
    from phalanx.spec.planes import PlaneView
    from phalanx.spec.rows import JobRow
    from phalanx.spec.status import JobRecord

__all__ = ["NONE", "amounts_text", "holds_text", "job_plane_line", "plane_line", "planes_of",
           "planes_table", "several_planes", "state_text"]
PHASE_STYLES = {"in-process": "green", "connected": "green", "waiting": "yellow",
                "silent": "red", "lost": "bold red"}


def planes_of(client: Client) -> list[PlaneView]:
    """The control plane's compute planes; none from a server without plane routes, or for
    a caller that may not list them."""
    try:
        return client.planes()
    except (NotFound, Forbidden):
        return []


def several_planes(client: Client, records: Iterable[JobRecord | JobRow] = ()) -> bool:
    """Whether jobs need a PLANE column: some are placed and there are two planes or more,
    as ``phalanx nodes`` has it (or, from a server that lists none, two among the jobs)."""

    def names() -> list[str]:
        try:
            return client.plane_names()  # only their number counts: no models needed
        except (NotFound, Forbidden):
            return []

    return _several_planes(records, names)


def job_plane_line(client: Client, job: JobRecord | DetailRow) -> str | None:
    """The ``Plane:`` line, asking the control plane for the state of the job's plane."""
    if job.plane is None:
        return None
    return plane_line(job, planes_of(client) if job.plane != LOCAL_PLANE else ())


def planes_table(planes: Iterable[PlaneView]) -> Table:
    """``phalanx status``: each plane's state, nodes, jobs and CPUs/GPUs in use."""
    from phalanx.spec.resources import GPU

    planes = list(planes)
    gpus = any(GPU in p.allocatable for p in planes)
    table = Table(box=None, pad_edge=False, header_style="bold")
    for column in ("PLANE", "STATE", "NODES", "JOBS", "CPU USED/ALLOC",
                   *(["GPU USED/ALLOC"] if gpus else []), "HOLDS"):
        table.add_column(column, no_wrap=column != "HOLDS")
    for p in planes:
        state = Text(state_text(p), style=PHASE_STYLES.get(p.phase, ""))
        table.add_row(p.name, state, str(p.nodes), str(len(p.jobs)), used_of(p, "cpu"),
                      *([used_of(p, GPU)] if gpus else []),
                      holds_text(p) if p.phase in UNHEARD else NONE)
    return table
