"""Building the compute plane ``phalanx up`` and ``phalanx worker`` drive, from its
declaration (``spec/computeplanes/``) and the options given."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import cast

from phalanx.compute.base import ComputePlane
from phalanx.compute.lease import FileLease, PlaneLease, fence_grace
from phalanx.errors import SpecError
from phalanx.lazy import imported
from phalanx.spec.computeplanes import (
    PlaneInfo,
    PlaneOptions,
    PlaneRequest,
    plane_info,
    plane_options,
    planes,
    planes_taking,
)

PlaneBuilder = Callable[[PlaneRequest], ComputePlane]


def compute_plane(compute: str) -> PlaneInfo:
    """The declaration of plane ``compute``, or a SpecError naming those there are."""
    info = plane_info(compute)
    if info is None:
        names = " or ".join(repr(p.name) for p in planes())
        raise SpecError(f"unknown compute plane {compute!r}", field="--compute",
                        fix=f"use {names}")
    return info


def check_plane_options(info: PlaneInfo, options: PlaneOptions) -> None:
    """Refuse an option the plane does not take, naming the flag and the planes it is for."""
    known = {o.param: o for o in plane_options()}
    for param, value in options.items():
        option = known.get(param)
        if option is None:
            raise SpecError(f"no compute plane takes an option {param!r}", field=param,
                            fix="use the options of `phalanx up --help`")
        if value is None or info.takes(param):
            continue
        takers = " or ".join(f"--compute {name}" for name in planes_taking(param))
        fix = f"use {option.flag} with {takers} only"
        raise SpecError(option.refusal.format(plane=info.name, flag=option.flag),
                        field=option.flag,
                        fix=f"{fix} {option.fix_note}" if option.fix_note else fix)


def make_plane(
    compute: str,
    home: Path,
    options: PlaneOptions | None = None,
    *,
    lease: Path | None = None,
    plane_name: str | None = None,
    control_plane: str | None = None,
    fence_after: float | None = None,
    term: int | None = None,
    **more: object,
) -> ComputePlane:
    """Build the compute plane ``serve`` or a worker drives; only its own modules load.

    ``options`` and ``more``: the plane's options by ``PlaneOption.param`` (``nodes_file=``,
    ``max_pods=``, ...; None: not given); one the plane does not take is refused. The rest
    describe how it runs (``PlaneRequest``): ``lease``, the lease file whose lapse stops the
    local plane's pods (a worker's, ``compute/lease.py``); ``plane_name`` and
    ``control_plane``, a worker's plane and the control plane's identity; ``fence_after``,
    the worker's, to which a Kubernetes plane scales the fence around its pods; ``term``, the
    leading replica's (``compute/terms.py``).
    """
    info = compute_plane(compute)
    options = {**(options or {}), **more}
    check_plane_options(info, options)
    builder = cast(PlaneBuilder, imported(info.build))
    given = {k: v for k, v in options.items() if v is not None}
    return builder(PlaneRequest(home=home, options=given, lease=lease, plane_name=plane_name,
                                control_plane=control_plane, fence_after=fence_after,
                                term=term))


def plane_lease(plane: ComputePlane, lease_file: Path, holder: str,
                fence_after: float) -> PlaneLease:
    """The lease a worker renews for ``plane``: the Kubernetes plane's Lease object when it
    has one (built with ``plane_name``), else a file the local plane's pods watch."""
    if plane.plane_lease is not None:
        return plane.plane_lease
    return FileLease(lease_file, holder, grace=fence_grace(fence_after))
