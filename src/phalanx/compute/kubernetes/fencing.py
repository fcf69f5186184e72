"""Putting a job pod under the fence: its command runs inside ``fence.py``.

An init container of the Phalanx image copies ``fence.py`` (standard library only)
into an ``emptyDir``; the rank's container runs ``python3 fence.py -- COMMAND``, which
stops the rank when the plane's Lease lapses. The job image needs ``python3`` (every
training image has it) and the pod set a command (an image's own ENTRYPOINT is not
known to the plane, so it cannot be wrapped).
"""

from __future__ import annotations

import socket
from dataclasses import dataclass

from phalanx.compute.kubernetes import fence
from phalanx.compute.kubernetes.client import KubeClient, Object
from phalanx.compute.kubernetes.lease import KubeLease, lease_name
from phalanx.compute.kubernetes.settings import FENCE_IMAGE_ENV, Settings
from phalanx.compute.lease import fence_step
from phalanx.errors import SpecError

VOLUME = "phalanx-fence"
MOUNT = "/phalanx-fence"
SCRIPT = f"{MOUNT}/fence.py"
INIT_CONTAINER = "phalanx-fence"
_COPY = ("import shutil, phalanx.compute.kubernetes.fence as f; "
         f"shutil.copy(f.__file__, {SCRIPT!r})")


MIN_POLL = 1.0  # seconds between a rank's reads of the Lease, at least
MAX_STEP = 10.0  # ... and at most, as for the rank's grace
LEASE_ROUNDING = 1.0  # the Lease's duration is whole seconds, rounded up


@dataclass(frozen=True, slots=True)
class Fence:
    """The Lease the pods watch, and the image the fence script is copied from."""

    namespace: str
    lease: str
    image: str
    poll: float = 10.0  # how often each rank's fence reads the Lease
    grace: float = 10.0  # SIGTERM to SIGKILL once it lapsed

    @property
    def stops_within(self) -> float:
        """The longest from the Lease lapsing until every rank is stopped. The fence also
        counts, on its own clock, from when it last saw the Lease change, which can be a
        read (late by its jitter, slow by its timeout) after the renewal; it notices the
        lapse up to another read later; the Lease's whole seconds round up by 1 s; then
        the grace."""
        read = fence.POLL_JITTER * self.poll + fence.read_timeout(self.poll)
        return 2 * read + LEASE_ROUNDING + self.grace


def wrap(pod: Object, fence_: Fence, where: str) -> None:
    """Run the pod's main container under the fence (in place)."""
    spec = pod["spec"]
    container = spec["containers"][0]
    command = container.get("command")
    if not command:
        raise SpecError(
            "has no command; on a compute plane behind a worker each rank runs under the "
            "fence, which must know what to run", field=f"{where}.command",
            fix="give the pod set a command (the image's ENTRYPOINT cannot be wrapped)")
    container["command"] = ["python3", SCRIPT, "--", *list(command)]
    container.setdefault("env", []).append(
        {"name": fence.LEASE_ENV, "value": f"{fence_.namespace}/{fence_.lease}"})
    container["env"] += [{"name": fence.POLL_ENV, "value": f"{fence_.poll:g}"},
                         {"name": fence.GRACE_ENV, "value": f"{fence_.grace:g}"}]
    container.setdefault("volumeMounts", []).append(
        {"name": VOLUME, "mountPath": MOUNT, "readOnly": True})
    spec.setdefault("volumes", []).append({"name": VOLUME, "emptyDir": {}})
    spec.setdefault("initContainers", []).insert(0, {
        "name": INIT_CONTAINER, "image": fence_.image, "command": ["python3", "-c", _COPY],
        "volumeMounts": [{"name": VOLUME, "mountPath": MOUNT}],
        "resources": {"requests": {"cpu": "10m", "memory": "32Mi"},
                      "limits": {"memory": "64Mi"}},
    })
    # The fence reads the Lease with the pod's ServiceAccount token.
    spec["automountServiceAccountToken"] = True


def from_settings(client: KubeClient, settings: Settings) -> tuple[Fence | None, KubeLease | None]:
    """The plane's fence and the Lease its worker renews; (None, None) for an in-process
    plane (``settings.plane`` unset), whose control plane is its only driver."""
    if settings.plane is None:
        return None, None
    if not settings.fence_image:
        raise SpecError(
            "a compute plane behind a worker fences its pods, copying the fence from the "
            "Phalanx image, which is not known", field=FENCE_IMAGE_ENV,
            fix="pass `phalanx worker --fence-image IMAGE` (or set it), the Phalanx image "
            "the worker runs; `phalanx k8s render` with mode: cluster sets it")
    name = lease_name(settings.plane)
    # Scaled to the worker's fence (10 s at most each), so that the fence acts well within
    # the margin the control plane keeps between --fence-after and --worker-lost-after;
    # the reads no more than once a second, whatever the fence (every rank reads).
    step = MAX_STEP if settings.fence_after is None else fence_step(settings.fence_after,
                                                                       MAX_STEP)
    made = Fence(settings.namespace, name, settings.fence_image, poll=max(MIN_POLL, step),
                 grace=step)
    lease = KubeLease(client, settings.namespace, name,
                      holder=f"{settings.plane}@{socket.gethostname()}",
                      stops_within=made.stops_within)
    return made, lease
