"""The ``local`` compute plane: pods as processes on this machine (``compute/local/``)."""

from __future__ import annotations

from phalanx.spec.computeplanes.base import OptionKind, PlaneInfo, PlaneOption, register_plane

_NOT_HERE = "the {plane} compute plane starts no processes on this machine"
_IMAGE_DECIDES = "(on Kubernetes the image and the pod's securityContext decide)"

MAX_PODS = PlaneOption(
    "max_pods", "--max-pods", "Pods this machine runs at once (default 110)",
    kind=OptionKind.COUNT, refusal="the {plane} compute plane's nodes say how many pods they take")
RUN_AS_USER = PlaneOption(
    "run_as_user", "--run-as-user",
    "User (name or uid) the local plane's pods run as; required when the control plane runs "
    "as root (--run-as-user root to mean it)",
    verbs=("up",), refusal=_NOT_HERE, fix_note=_IMAGE_DECIDES)
POD_UIDS = PlaneOption(
    "pod_uids", "--pod-uids",
    "Range of uids, FIRST-LAST, the local plane gives its running attempts, one each, so "
    "tenants cannot read each other's pods (needs root; uids no user has, see "
    "docs/security.md)",
    verbs=("up",), refusal=_NOT_HERE, fix_note=_IMAGE_DECIDES)
HEALTH_INTERVAL = PlaneOption(
    "health_interval", "--health-interval",
    "How often the local plane checks this machine's health (phalanx doctor's checks), e.g. "
    "60s; 0 never", kind=OptionKind.DURATION, verbs=("up",), cli_default="60s")
SITE_CHECKS = PlaneOption(
    "site_checks", "--site-checks",
    "Directory of site health checks for the local plane (executables: exit 0/1/2 = "
    "PASS/WARN/ERR)", kind=OptionKind.DIRECTORY, verbs=("up",))

LOCAL = register_plane(PlaneInfo(
    "local", what="runs pods as processes on this machine",
    build="phalanx.compute.local.build:build",
    options=(MAX_PODS, RUN_AS_USER, POD_UIDS, HEALTH_INTERVAL, SITE_CHECKS),
    worker_fence="file",
))
