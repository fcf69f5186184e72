"""What a compute-plane worker and the control plane say to each other (``/v1/planes/...``).

The worker dials out; nothing connects into it. It registers, then loops: report what
its plane has (nodes, every pod it still knows, placements it refuses, new log output)
and long-poll for the desired state. The desired state is level-triggered: the whole
set of attempts the control plane wants started or stopped and the attempts whose
terminal states it has kept (``forget``: the worker may drop them), with a version the
worker sends back so the next poll waits for a change.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import ConfigDict, Field, StrictBool, field_validator

from phalanx.spec.base import Model, Quantity
from phalanx.spec.names import LOCAL_PLANE as LOCAL_PLANE  # served here too
from phalanx.spec.names import PLANE_LABEL as PLANE_LABEL
from phalanx.spec.resources import Node
from phalanx.spec.status import JobAdmission

# The scope of an API key that speaks for one compute plane: "plane:<name>".
PLANE_SCOPE_PREFIX = "plane:"
PLANE_NAME = re.compile(r"[a-z0-9]([-a-z0-9]{0,38}[a-z0-9])?")

PodPhaseName = Literal["Pending", "Running", "Succeeded", "Failed"]


class WireModel(Model):
    """A message between a worker and the control plane. A field this side does not know
    is ignored, not refused: a worker and a control plane one version apart still talk
    (an upgrade takes them one at a time). What users write keeps refusing unknown
    fields, which are typos there."""

    model_config = ConfigDict(extra="ignore")


def plane_scope(name: str) -> str:
    return PLANE_SCOPE_PREFIX + name


def check_plane_name(name: str, field: str = "name") -> str:
    from phalanx.errors import SpecError

    if not PLANE_NAME.fullmatch(name):
        raise SpecError(f"{name!r} is not a compute plane name", field=field,
                        fix="use 1-40 lowercase letters, digits and '-', starting and ending "
                            "with a letter or digit (e.g. gcp-a)")
    return name


class PlaneHello(WireModel):
    """A worker registering (again): who it is and how it fences."""

    worker: str = Field(description="Random id of this worker process, new at each start")
    compute: str = Field(description="local, simulated or kubernetes")
    fence_after: float = Field(gt=0, description="Seconds without the control plane after "
                               "which the worker stops its own pods")
    fence_stops_within: float = Field(default=0.0, ge=0, description=(
        "Seconds from the lease lapsing until the fence inside the cluster has stopped "
        "every pod: the control plane waits for that too before it calls the plane lost"))
    version: str = ""
    providers: list[str] = Field(default_factory=list, description=(
        "The node-pool providers the worker can buy pools through on its plane (those "
        "declared for its compute kind that it could build)"))


class PlaneWelcome(WireModel):
    """The control plane's answer to a registration."""

    control_plane: str = Field(description="The control plane's identity; pods carry it")
    plane: str
    worker_grace: float
    worker_lost_after: float
    poll_seconds: float = Field(description="How long a poll for the desired state may wait")


class PodReport(WireModel):
    job: str
    attempt: int
    pod_set: str
    index: int
    rank: int
    node: str = Field(description="The node's name within the plane")
    phase: PodPhaseName
    exit_code: int | None = None
    signal: int | None = None
    reason: str = ""
    failure: Literal["user", "system"] | None = None
    started_at: float | None = None
    finished_at: float | None = None


class PlacementRefusal(WireModel):
    """The worker will not start an attempt where it was placed (its nodes changed)."""

    job: str
    attempt: int
    reason: str
    error: bool = Field(default=False, description="True: the launch failed (a failure of the "
                        "attempt); False: the placement is stale (back to pending)")
    failure: Literal["user", "system"] = "system"


class ReportAck(WireModel):
    nodes_wanted: bool = Field(description="The control plane has no nodes of this worker "
                               "(it restarted): send them with the next report")


class LogChunk(WireModel):
    job: str
    pod: str
    data: str = Field(description="New output of the pod's log, UTF-8 (invalid bytes replaced)")


PoolStateName = Literal["Creating", "Ready", "Failed", "Deleting"]


class PoolReport(WireModel):
    """A node pool the worker's plane has (or could not make), as its provider sees it."""

    name: str
    provider: str
    state: PoolStateName
    nodes: list[str] = Field(default_factory=list, description="Its nodes' names within "
                             "the plane")
    ready_nodes: int = 0
    node_count: int = 0
    config_hash: str = ""
    message: str = ""
    error: str | None = Field(default=None, description=(
        "When Failed: the class of the failure (Stockout, ConfigurationError, "
        "TransientError, Timeout, Error), which decides what the control plane does next"))
    deletion_error: str = Field(default="", description=(
        "Why its deletion failed the last time the worker tried it (it tries again)"))


class PlaneReport(WireModel):
    """What the worker's plane has now. ``nodes`` None: unchanged since the last report."""

    worker: str
    seq: int = Field(default=0, ge=0, description=(
        "The worker's count of its reports (from 1). A report whose answer was lost is sent "
        "again under its number, with the same logs and refusals: one not newer than the "
        "last taken is dropped, so they are kept once (0: unnumbered)"))
    nodes: list[Node] | None = None
    pods: list[PodReport] = Field(default_factory=list)
    refusals: list[PlacementRefusal] = Field(default_factory=list)
    logs: list[LogChunk] = Field(default_factory=list)
    fence_after: float | None = Field(default=None, gt=0, description=(
        "The worker's fence, as in its hello: a control plane restarted since knows it "
        "from here"))
    fence_stops_within: float | None = Field(default=None, ge=0, description=(
        "As in its hello: seconds its fence takes to stop every pod once the lease lapsed"))
    providers: list[str] | None = Field(default=None, description=(
        "As in its hello: the providers it offers (a control plane restarted since knows "
        "them from here)"))
    pools: list[PoolReport] = Field(default_factory=list, description=(
        "Every node pool it made for this control plane, and those it could not make"))

    @field_validator("nodes")
    @classmethod
    def _unique_nodes(cls, nodes: list[Node] | None) -> list[Node] | None:
        if nodes is not None and len({n.name for n in nodes}) != len(nodes):
            raise ValueError("two nodes have the same name; name each node once")
        return nodes


class AttemptKey(WireModel):
    job: str
    attempt: int
    grace: float | None = Field(default=None, description="In ``stops``: seconds between "
                                "SIGTERM and SIGKILL")


class DesiredAttempt(WireModel):
    """An attempt the control plane wants started."""

    job: str
    attempt: int
    epoch: int = Field(description="The attempt's fencing epoch (PHALANX_EPOCH in its pods)")
    spec: dict[str, Any] = Field(description="The job's spec, as submitted")
    admission: JobAdmission = Field(description="Where its pods go, node names within the plane")
    credential: str | None = Field(
        default=None, description="The attempt's API key, which its pods call the API with as "
        "their job's owner (at the worker's --control-plane URL); sent only to its plane's worker")
    secrets: dict[str, Any] | None = Field(
        default=None, description="The values of the secrets the job names (env: pod set -> "
        "variables; volumes: volume -> file -> base64; pull: reference -> base64 docker "
        "config; git: the files of git.sshKeySecret, base64, for the clone), for this "
        "attempt's pods only; sent only to its plane's worker while the attempt is wanted")


class DesiredPool(WireModel):
    """A node pool the control plane's provisioning controller wants on the worker's plane
    (``deleted``: wants it gone). A pool the desired state does not list is left alone."""

    name: str
    provider: str
    request: dict[str, Any] = Field(description="The pool's request, as the provider takes "
                                    "it (flavor, node count, one node's allocatable, labels)")
    deleted: bool = False


class DesiredState(WireModel):
    version: int
    attempts: list[DesiredAttempt] = Field(default_factory=list)
    stops: list[AttemptKey] = Field(default_factory=list)
    forget: list[AttemptKey] = Field(default_factory=list)
    pools: list[DesiredPool] = Field(default_factory=list)
    term: int | None = Field(
        default=None, description="The term of the leading replica that answered (replicas "
        "on one store, `phalanx up --ha`); none from a lone control plane. A worker acts on "
        "no desired state of an older term than one it has acted on")



# --------------------------------------------------------------------------- exec
class ExecRequest(WireModel):
    """A command to run in one of the plane's pods (``phalanx exec``): the worker opens the
    WebSocket ``/v1/planes/{plane}/exec/{session}`` and relays its frames."""

    session: str = Field(description="The session's random id: the path the worker dials")
    job: str
    pod: str | None = Field(default=None, description="A rank or a pod name; none: rank 0")
    argv: list[str]
    tty: bool = False
    cols: int = 80
    rows: int = 24


class ExecRequests(WireModel):
    """Commands waiting for the worker (each handed out once)."""

    sessions: list[ExecRequest] = Field(default_factory=list)


class ExecReady(WireModel):
    """The worker's first message on an exec WebSocket: the command runs, or why it does not."""

    error: dict[str, Any] | None = Field(
        default=None, description="The plane's refusal in the API's error form (type, message, "
        "field, fix); none: the command runs and frames follow")

# --------------------------------------------------------------------------- admin views
PlanePhase = Literal["in-process", "waiting", "connected", "silent", "lost"]


class PlaneView(Model):
    name: str
    state: str = Field(description="in-process, connected, waiting for its worker, "
                       "disconnected (silent for Ns) or lost")
    phase: PlanePhase = Field(
        default="in-process", description="in-process (the control plane's own); for a plane "
        "behind a worker: waiting (not heard since the control plane started, within the "
        "grace), connected, silent (past --worker-grace: no new placements, its jobs keep "
        "their quota) or lost (past --worker-lost-after: its jobs were requeued)")
    remote: bool
    cordoned: bool = False
    draining: bool = False
    nodes: int = 0
    jobs: list[str] = Field(default_factory=list, description="Jobs whose pods it holds; a "
                            "silent plane's keep their quota until it is lost")
    last_seen: float | None = None
    worker: str | None = None
    fence_after: float | None = None
    silent_for: float | None = Field(
        default=None, description="Seconds since its worker was last heard (counted from the "
        "control plane's start), when it is not connected")
    lost_after: float | None = Field(
        default=None, description="Seconds of silence after which the plane is lost and its "
        "jobs lose their quota (--worker-lost-after)")
    allocatable: dict[str, Quantity] = Field(
        default_factory=dict, description="What its nodes hold, summed")
    used: dict[str, Quantity] = Field(
        default_factory=dict, description="What the jobs placed on it hold of that (their "
        "quota), summed")

    @property
    def quota_kept_for(self) -> float | None:
        """Seconds until a silent plane is lost and its jobs' quota is released."""
        if self.phase not in ("waiting", "silent") or self.silent_for is None or (
                self.lost_after is None):
            return None
        return max(0.0, self.lost_after - self.silent_for)


class PlaneList(Model):
    planes: list[PlaneView]


class PlaneCreate(Model):
    name: str
    description: str = ""


class PlaneKey(Model):
    """A plane's new API key: shown once."""

    name: str
    key: str
    key_id: str


class PlaneFlags(Model):
    cordoned: StrictBool


class PlaneDrain(Model):
    move: StrictBool = Field(default=False, description="Stop the plane's jobs now (requeued as "
                       "system failures, to run elsewhere); false: let them finish")


class PlaneDrained(Model):
    name: str
    stopped: list[str] = Field(default_factory=list)
    running: list[str] = Field(default_factory=list)
