"""Building the local plane from its declaration's options (``spec/computeplanes/local.py``)."""

from __future__ import annotations

from pathlib import Path
from typing import cast

from phalanx.compute.local.inventory import DEFAULT_MAX_PODS
from phalanx.compute.local.plane import LocalPlane
from phalanx.compute.local.uids import check_uid_range, parse_uid_range
from phalanx.compute.local.users import pod_user_for
from phalanx.errors import SpecError
from phalanx.spec.computeplanes import PlaneRequest


def build(request: PlaneRequest) -> LocalPlane:
    """``health_interval`` (seconds, 0 or absent: never) is how often the plane runs the node
    doctor; ``pod_uids`` (``FIRST-LAST``): each attempt runs as a uid of its own from this
    range, its directories outside the state directory keyed by the control plane."""
    run_as_user = cast(str | None, request.option("run_as_user"))
    pod_uids = cast(str | None, request.option("pod_uids"))
    max_pods = cast(int | None, request.option("max_pods"))
    uids = None
    if pod_uids is not None:
        if run_as_user is not None:
            raise SpecError("--run-as-user and --pod-uids both say whom pods run as",
                            field="--pod-uids", fix="pass one of them: --pod-uids gives "
                            "each attempt a uid of its own, --run-as-user one user for "
                            "every pod")
        uids = parse_uid_range(pod_uids)
        check_uid_range(uids)
    local = LocalPlane(request.home,
                       run_as=None if uids is not None else pod_user_for(run_as_user),
                       max_pods=DEFAULT_MAX_PODS if max_pods is None else max_pods,
                       lease=request.lease, pod_uids=uids,
                       control_plane=request.control_plane, term=request.term)
    interval = cast(float, request.option("health_interval") or 0.0)
    if interval > 0:
        local.start_doctor(interval, site_dir=cast(Path | None, request.option("site_checks")))
    return local
