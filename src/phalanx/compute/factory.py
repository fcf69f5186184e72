"""Building the compute plane ``phalanx up`` and ``phalanx worker`` drive, from their options."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from phalanx.compute.base import ComputePlane
from phalanx.compute.lease import FileLease, PlaneLease, fence_grace
from phalanx.errors import SpecError
from phalanx.store.logs import LogStore


def make_plane(
    compute: str,
    home: Path,
    nodes_file: Path | None = None,
    kubeconfig: Path | None = None,
    namespace: str | None = None,
    default_image: str | None = None,
    run_as_user: str | None = None,
    health_interval: float = 0.0,
    site_checks: Path | None = None,
    node_lost_grace: float | None = None,
    max_pods: int | None = None,
    lease: Path | None = None,
    plane_name: str | None = None,
    control_plane: str | None = None,
    fence_after: float | None = None,
    pod_uids: str | None = None,
    fence_image: str | None = None,
    allowed_service_accounts: Sequence[str] = (),
) -> ComputePlane:
    """Build the compute plane ``serve`` drives; each branch imports only what it needs.

    ``health_interval`` (seconds, 0: never) is how often the local plane runs the node
    doctor; on Kubernetes each node's own doctor reports instead. ``lease``: the lease file
    whose lapse stops the local plane's pods (a worker's, ``compute/lease.py``).
    ``plane_name``: the name of the plane a worker drives; on Kubernetes its pods then run
    under the fence of the Lease ``plane_lease`` returns, and its objects carry the plane's
    and ``control_plane``'s identity (the plane acts on no one else's); the fence is scaled
    to the worker's ``fence_after``, and copied into each pod from ``fence_image`` (default:
    ``$PHALANX_K8S_FENCE_IMAGE``). ``allowed_service_accounts``: the ServiceAccounts a
    pod set may name on Kubernetes (added to ``$PHALANX_K8S_ALLOWED_SERVICE_ACCOUNTS``).
    ``pod_uids`` (``FIRST-LAST``): the local plane runs
    each attempt as a uid of its own from this range; its directories outside the state
    directory are keyed by ``control_plane``.
    """
    if default_image is not None and compute != "kubernetes":
        raise SpecError(
            f"the {compute} compute plane runs commands, not images", field="--default-image",
            fix="use --default-image with --compute kubernetes only",
        )
    if run_as_user is not None and compute != "local":
        raise SpecError(
            f"the {compute} compute plane starts no processes on this machine",
            field="--run-as-user",
            fix="use --run-as-user with --compute local only (on Kubernetes the image "
            "and the pod's securityContext decide)",
        )
    if pod_uids is not None and compute != "local":
        raise SpecError(
            f"the {compute} compute plane starts no processes on this machine",
            field="--pod-uids",
            fix="use --pod-uids with --compute local only (on Kubernetes the image and the "
            "pod's securityContext decide)",
        )
    if allowed_service_accounts and compute != "kubernetes":
        raise SpecError(
            f"the {compute} compute plane runs no pods as ServiceAccounts",
            field="--allow-service-account",
            fix="use --allow-service-account with --compute kubernetes only")
    if max_pods is not None and compute != "local":
        raise SpecError(
            f"the {compute} compute plane's nodes say how many pods they take",
            field="--max-pods", fix="use --max-pods with --compute local only",
        )
    if compute == "local":
        from phalanx.compute.local import LocalPlane
        from phalanx.compute.local.inventory import DEFAULT_MAX_PODS
        from phalanx.compute.local.uids import check_uid_range, parse_uid_range
        from phalanx.compute.local.users import pod_user_for

        uids = None
        if pod_uids is not None:
            if run_as_user is not None:
                raise SpecError("--run-as-user and --pod-uids both say whom pods run as",
                                field="--pod-uids", fix="pass one of them: --pod-uids gives "
                                "each attempt a uid of its own, --run-as-user one user for "
                                "every pod")
            uids = parse_uid_range(pod_uids)
            check_uid_range(uids)
        local = LocalPlane(home, run_as=None if uids is not None else pod_user_for(run_as_user),
                           max_pods=DEFAULT_MAX_PODS if max_pods is None else max_pods,
                           lease=lease, pod_uids=uids, control_plane=control_plane)
        if health_interval > 0:
            local.start_doctor(health_interval, site_dir=site_checks)
        return local
    if compute == "simulated":
        from phalanx.compute.simulated import SimulatedPlane

        if nodes_file is None:
            raise SpecError(
                "the simulated compute plane needs its nodes", field="--nodes",
                fix="pass --nodes FILE (a YAML list of nodes)",
            )
        return SimulatedPlane.from_file(nodes_file, logs_root=LogStore.for_home(home).root)
    if compute == "kubernetes":
        from phalanx.compute.kubernetes import KubernetesPlane

        return KubernetesPlane.connect(home=home, kubeconfig=kubeconfig, namespace=namespace,
                                       default_image=default_image,
                                       node_lost_grace=node_lost_grace, plane=plane_name,
                                       control_plane=control_plane,
                                       fence_after=fence_after, fence_image=fence_image,
                                       allowed_service_accounts=allowed_service_accounts)
    raise SpecError(
        f"unknown compute plane {compute!r}", field="--compute",
        fix="use 'local', 'simulated' or 'kubernetes'",
    )


def plane_lease(plane: ComputePlane, lease_file: Path, holder: str,
                fence_after: float) -> PlaneLease:
    """The lease a worker renews for ``plane``: the Kubernetes plane's Lease object when it
    has one (built with ``plane_name``), else a file the local plane's pods watch."""
    if plane.plane_lease is not None:
        return plane.plane_lease
    return FileLease(lease_file, holder, grace=fence_grace(fence_after))
