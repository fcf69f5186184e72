"""The compute-plane interface the control plane drives.

Level-triggered: the control plane says what should run (``launch``) or stop
(``terminate``) and reads back what is (``observe``). Every call is
idempotent, so a restarted control plane can re-issue them safely.

``ComputePlane`` is the base every plane derives from. Its abstract methods
are what a plane must do; the rest are optional capabilities with defaults
that mean "not offered", so the control loop calls them on any plane and a new
plane overrides only what it can do better:

- ``inventory_generation`` and ``subscribe``: a plane whose nodes change bumps
  the generation (``_nodes_changed``) and the loop re-reads ``inventory``; a
  plane that knows when its pods change wakes the loop through ``subscribe``
  instead of leaving the change to the next tick.
- ``flush_logs``: a plane that writes logs in the background waits for them.
- ``pod_events``: what the plane itself says about a job's pods (a cluster's
  Events).
- ``check_job``: what the plane can tell is wrong with a job before it is queued
  (a pod set with nothing to run here), so bad input is refused at submit instead
  of failing at launch and burning restarts.
- ``endpoints``: addresses the job's kind recorded at launch (a Ray dashboard's URL).
  ``endpoints_reachable`` says whether the control plane can reach them (and so proxy
  them, ``server/routes/ray.py``): a plane behind a worker says no.
- ``cordon``: mark a node (un)schedulable where the plane keeps its nodes, so an
  operator's cordon reaches the scheduler like any node change.
- ``sees`` and ``refusals``: a plane that reaches its pods through a worker
  (``compute/remote.py``) says when it cannot see a node's pods right now (a job there
  that reports no pods is not lost), and which placements its worker refused.
- ``exec``: run a command inside a running pod (``phalanx exec``), its input,
  output and exit relayed as ``phalanx.relay`` frames.
- ``workdir_archives``: a plane whose pods unpack a job's ``workdir`` from a store on
  its own machine (the local plane) names that store; a worker puts the archive there,
  fetched by hash, before it launches. None: the pods fetch it themselves (Kubernetes).
- ``plane_lease``: the lease a worker renews for the plane when the plane keeps its own
  (the Kubernetes plane's Lease object); None: the worker keeps a file lease.
"""

from __future__ import annotations

import abc
import base64
import hashlib
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, ClassVar, Protocol, Self

from phalanx.compute.lease import PlaneLease
from phalanx.defaults import API_KEY_FILE_ENV, URL_ENV
from phalanx.errors import NotFound, SpecError
from phalanx.kinds import framework_of
from phalanx.kinds.pods import FailureKind, PodPhase, PodRef, PodState
from phalanx.scheduler.types import Admission
from phalanx.spec.resources import JobSpec, Node
from phalanx.spec.status import JobEvent
from phalanx.store.workdirs import WorkdirStore

# Where a job's pods save checkpoints: kept across its attempts (each plane says where).
CHECKPOINT_DIR_ENV = "PHALANX_CHECKPOINT_DIR"
# The label naming the control plane whose objects these are (a plane's objects carry it).
CONTROL_PLANE_LABEL = "phalanx.dev/control-plane"


def owner_tag(identity: dict[str, str] | None) -> str:
    """A short tag of whose objects these are (plane and control plane), for names that
    must never meet: two control planes sharing a namespace, or a machine's ``/var/tmp``,
    both run a job "train", attempt 1, under names that differ. Empty for no identity."""
    if not identity:
        return ""
    owner = "/".join(f"{k}={v}" for k, v in sorted(identity.items()))
    return "-" + hashlib.sha256(owner.encode()).hexdigest()[:6]


def control_plane_tag(control_plane: str) -> str:
    """The tag of one control plane's objects (``owner_tag`` of its label alone)."""
    return owner_tag({CONTROL_PLANE_LABEL: control_plane})

__all__ = [
    "AttemptSecrets", "ComputePlane", "FailureKind", "Listener", "NodeTable", "PodCredential",
    "PodPhase", "PodRef", "PodState", "Refusal",
]


Listener = Callable[[], None]


@dataclass(frozen=True, slots=True)
class AttemptSecrets:
    """The values of the secrets a job names, resolved for one attempt (server/secrets.py):
    planes hand them to that attempt's pods only and keep nothing once it ends."""

    env: dict[str, dict[str, str]] = field(default_factory=dict)  # pod set -> variables
    volumes: dict[str, dict[str, bytes]] = field(default_factory=dict)  # volume -> files
    pull: dict[str, bytes] = field(default_factory=dict)  # reference -> .dockerconfigjson
    # The files of git.sshKeySecret (ssh-privatekey, known_hosts): what the clone uses.
    git: dict[str, bytes] = field(default_factory=dict)

    def __repr__(self) -> str:  # never the values, wherever a plan is logged
        return (f"AttemptSecrets(env={ {k: sorted(v) for k, v in self.env.items()} }, "
                f"volumes={ {k: sorted(v) for k, v in self.volumes.items()} }, "
                f"pull={sorted(self.pull)}, git={sorted(self.git)})")

    def __bool__(self) -> bool:
        return bool(self.env or self.volumes or self.pull or self.git)

    def to_wire(self) -> dict[str, Any]:
        """JSON for a worker's desired state (bytes in base64)."""
        def encoded(data: dict[str, bytes]) -> dict[str, str]:
            return {k: base64.b64encode(v).decode() for k, v in data.items()}
        return {"env": self.env, "volumes": {v: encoded(f) for v, f in self.volumes.items()},
                "pull": encoded(self.pull), "git": encoded(self.git)}

    @classmethod
    def from_wire(cls, wire: dict[str, Any] | None) -> AttemptSecrets:
        if not wire:
            return cls()
        def decoded(data: dict[str, str]) -> dict[str, bytes]:
            return {k: base64.b64decode(v) for k, v in data.items()}
        return cls(env={p: dict(e) for p, e in wire.get("env", {}).items()},
                   volumes={v: decoded(f) for v, f in wire.get("volumes", {}).items()},
                   pull=decoded(wire.get("pull", {})), git=decoded(wire.get("git", {})))


@dataclass(frozen=True, slots=True)
class PodCredential:
    """What the pods of one attempt get to call the API as their job's owner: the API's URL
    (as the pods reach it) and the attempt's key. The key goes to the pods as a file the
    pods alone can read, never into an environment, a spec or a log. ``secrets``: the values
    of the secrets the job names, for this attempt's pods alone."""

    api_url: str
    key: str = field(repr=False)
    secrets: AttemptSecrets = field(default_factory=AttemptSecrets, repr=False)

    def environment(self, key_file: str) -> dict[str, str]:
        """The pod's variables that point at the API and at ``key_file`` (what the SDK and
        CLI read when given no key)."""
        return {URL_ENV: self.api_url, API_KEY_FILE_ENV: key_file}


@dataclass(frozen=True, slots=True)
class Refusal:
    """A plane would not start an attempt: ``error`` None means where it was placed is no
    longer there (the job goes back to pending, not a failure); otherwise the launch failed
    (``failure``: "user" for the job's own input, else "system")."""

    job: str
    attempt: int
    reason: str
    plane: str = ""
    error: bool = False
    failure: FailureKind = "system"


class ExecSession(Protocol):
    """A command running inside a pod, spoken to in whole ``phalanx.relay`` frames."""

    def send(self, frame: bytes) -> None:
        """Input (``I``) or a terminal size (``R``) from the client."""

    def receive(self) -> bytes | None:
        """The next output or exit frame; None once the command's stream has ended."""

    def close(self) -> None: ...


class CannotTellYet(SpecError):
    """A plane cannot tell yet whether it could run a job: its worker has not said what it
    runs. Not a refusal by itself; a federation of planes weighs the others' answers."""


def check_commands(job: JobSpec) -> None:
    """SpecError unless every pod set whose kind supplies no command has one: on a plane
    whose pods are processes (no image supplies one), what it would run."""
    framework = framework_of(job)
    for i, pod_set in enumerate(job.pod_sets):
        if not pod_set.command and framework.needs_command(pod_set):
            raise SpecError(
                f"pod set {pod_set.name!r} has no command to run",
                field=f"podSets[{i}].command",
                fix='give the command to run, e.g. command: ["python", "train.py"]',
            )


def check_process_pods(job: JobSpec) -> None:
    """SpecError unless a plane whose pods are processes of a machine (the local plane,
    here or behind a worker) can run the job: every command (``check_commands``), and no
    ServiceAccount to run as, which a process has no meaning of."""
    check_commands(job)
    for i, pod_set in enumerate(job.pod_sets):
        if pod_set.service_account_name is not None:
            raise SpecError(
                f"pod set {pod_set.name!r} names ServiceAccount "
                f"{pod_set.service_account_name!r}, and the local plane runs pods as "
                "processes of this machine, not as ServiceAccounts",
                field=f"podSets[{i}].serviceAccountName",
                fix="remove serviceAccountName, or submit to a queue of a Kubernetes plane")


class ComputePlane(abc.ABC):
    """What every compute plane does, and the optional capabilities it may offer."""

    # What kind of plane it is ("local", "kubernetes", ...): `phalanx up --compute`'s word,
    # and what the provisioning registry compares a provider's plane with, so that choosing
    # providers imports no plane module (nor the optional extra behind one).
    name: ClassVar[str]
    workdir_archives: WorkdirStore | None = None
    # The lease a worker renews for this plane, when the plane keeps one of its own.
    plane_lease: PlaneLease | None = None
    # Whether the control plane reaches the addresses this plane's jobs record (its pods are
    # on its network: this machine, or the cluster it runs in).
    endpoints_reachable: ClassVar[bool] = True

    def __init__(self) -> None:
        self._listeners: list[Listener] = []
        self._generation = 0
        self._generation_lock = threading.Lock()

    # ------------------------------------------------------------------ required
    @abc.abstractmethod
    def inventory(self) -> list[Node]:
        """The nodes this plane offers, with allocatable capacity, labels, taints and health."""

    @abc.abstractmethod
    def launch(self, job: JobSpec, attempt: int, admission: Admission, *,
               credential: PodCredential | None = None) -> None:
        """Start every pod of ``job``'s ``attempt`` where ``admission`` places it (idempotent).

        ``credential``: what the pods call the API with (None: they get none); the same
        for every launch of one attempt."""

    @abc.abstractmethod
    def observe(self) -> list[PodState]:
        """Every pod the plane still knows, of every job and attempt not yet forgotten."""

    @abc.abstractmethod
    def terminate(self, job: str, attempt: int, grace_seconds: float = 10.0) -> None:
        """Stop the attempt's pods: SIGTERM now, SIGKILL after the grace (non-blocking)."""

    @abc.abstractmethod
    def forget(self, job: str, attempt: int) -> None:
        """Drop the bookkeeping of an attempt whose pods are all done."""

    @abc.abstractmethod
    def close(self) -> None:
        """Release the plane's own resources; running pods keep running."""

    # ------------------------------------------------------------------ optional
    @property
    def inventory_generation(self) -> int:
        """Counts changes to ``inventory``; read it before the inventory so none is missed."""
        return self._generation

    def subscribe(self, listener: Listener) -> None:
        """Call ``listener`` (from any thread) whenever pods or nodes change."""
        self._listeners.append(listener)

    def flush_logs(self) -> None:
        """Wait until the logs of every pod state reported so far are written."""
        return None  # a plane that writes logs as it goes has nothing to wait for

    def pod_events(self, job: str) -> list[JobEvent]:
        """What the plane itself says about ``job``'s pods; none by default."""
        return []

    def check_job(self, job: JobSpec) -> None:
        """Raise ``SpecError`` (naming the field and the fix) if this plane could never run
        ``job``'s pods as specified; accept by default."""
        return None

    def last_checkpoint(self, job: str) -> float | None:
        """When ``job`` last saved into its checkpoint directory (epoch seconds; None: never,
        or the plane cannot tell)."""
        return None

    def release_checkpoints(self, job: str) -> None:
        """``job`` ended for good and keeps no checkpoints: remove its checkpoint directory."""
        return None

    def endpoints(self, job: str, attempt: int) -> dict[str, str]:
        """What the job's kind said is worth recording about a launched attempt; none by default."""
        return {}

    def sees(self, node: str) -> bool:
        """Whether ``observe`` shows every pod on ``node`` now; False while a plane's worker
        has not reported since the control plane started (no pod there counts as gone)."""
        return True

    @property
    def kind(self) -> str:
        """What computes, for ``phalanx status``: the plane's name by default."""
        return self.name

    def where(self, node: str) -> str:
        """Where a pod on ``node`` runs, for events: "the local compute plane"."""
        return f"the {self.name} compute plane"

    def refusals(self) -> list[Refusal]:
        """Placements the plane refused since the last call (taken: each is returned once)."""
        return []

    def cordon(self, name: str, unschedulable: bool) -> None:
        """Mark node ``name`` unschedulable (or schedulable again); NotFound if there is none."""
        raise SpecError(f"the {self.name} compute plane cannot cordon nodes", field="node",
                        fix="cordon the node where the plane's nodes are kept")

    def exec(self, job: str, pod: str | None, argv: list[str], *, tty: bool = False,
             cols: int = 80, rows: int = 24) -> ExecSession:
        """Start ``argv`` inside ``job``'s running pod ``pod`` (a rank or a pod name; None:
        rank 0), in the pod's environment; NotFound when no such pod runs."""
        raise SpecError(f"the {self.name} compute plane cannot run commands in pods",
                        field="pod", fix="read the pod's output with phalanx logs instead")

    # ------------------------------------------------------------------ for implementations
    def _nodes_changed(self) -> None:
        """Tell the control loop the inventory changed: after the change is visible."""
        with self._generation_lock:
            self._generation += 1
        self._notify()

    def _notify(self) -> None:
        for listener in list(self._listeners):
            listener()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class NodeTable:
    """The nodes of a plane that declares them itself, changed by name.

    Each change that alters a node calls ``on_change``, so every plane reports its
    node changes the same way (``ComputePlane._nodes_changed``).
    """

    def __init__(self, nodes: Iterable[Node], on_change: Listener) -> None:
        self._nodes = {n.name: n.model_copy(deep=True) for n in nodes}
        self._lock = threading.Lock()
        self._on_change = on_change

    def snapshot(self) -> list[Node]:
        with self._lock:
            return [n.model_copy(deep=True) for n in self._nodes.values()]

    def names(self) -> set[str]:
        with self._lock:
            return set(self._nodes)

    def get(self, name: str) -> Node | None:
        with self._lock:
            node = self._nodes.get(name)
            return node.model_copy(deep=True) if node is not None else None

    def upsert(self, node: Node) -> bool:
        """Add or replace ``node``; True (and ``on_change``) when that changed anything."""
        with self._lock:
            if self._nodes.get(node.name) == node:
                return False
            self._nodes[node.name] = node.model_copy(deep=True)
        self._on_change()
        return True

    def cordon(self, name: str, unschedulable: bool) -> None:
        """Set the node's cordon flag (``ComputePlane.cordon`` for planes that keep a table)."""
        node = self.get(name)
        if node is None:
            raise NotFound(f"no node {name!r}", field="node",
                           fix="name a node `phalanx nodes` lists")
        node.unschedulable = unschedulable
        self.upsert(node)

    def remove(self, name: str) -> bool:
        with self._lock:
            if self._nodes.pop(name, None) is None:
                return False
        self._on_change()
        return True
