"""The bodies of the HTTP API (``/v1``): what each route takes and returns.

The server builds its answers from these models and the SDK parses answers into them,
so ``/openapi.json`` describes exactly what goes over the wire.
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, ConfigDict, Field, PlainSerializer, WithJsonSchema

from phalanx.errors import SpecError
from phalanx.spec.base import Model, Quantity, StrictNumber, validate
from phalanx.spec.config import CONFIG_KINDS, parse_config_documents
from phalanx.spec.labels import check_labels
from phalanx.spec.names import ACT_AS_HEADER as ACT_AS_HEADER
from phalanx.spec.planes import PlaneView
from phalanx.spec.provisioning import ProvisioningPolicy
from phalanx.spec.resources import (
    ClusterQueue,
    Cohort,
    ConfigObject,
    JobSpec,
    LocalQueue,
    Node,
    PriorityClass,
    ResourceFlavor,
)
from phalanx.spec.status import JobEvent
from phalanx.spec.status import JobList as JobList

API_VERSION = "v1"


# --------------------------------------------------------------------------- errors
class ErrorBody(Model):
    type: str = Field(description="The phalanx.errors class, e.g. SpecError, NotFound")
    message: str
    field: str | None = Field(default=None, description="The field at fault, if one is")
    fix: str | None = Field(default=None, description="How to fix it")


class ErrorResponse(Model):
    """Every error answer (4xx and 5xx) of the API."""

    error: ErrorBody


# --------------------------------------------------------------------------- server
class Health(Model):
    """The control loop is stepping (when it is not, ``/healthz`` answers 503)."""

    status: Literal["ok"] = "ok"
    message: str = ""


class VersionInfo(Model):
    version: str
    api: Literal["v1"] = "v1"


class ServerStatus(Model):
    version: str
    db: str = Field(description="The store: 'sqlite', or the database URL without password")
    started_at: float = Field(description="Epoch seconds")
    compute: str = Field(description="The compute plane: local, simulated or kubernetes")
    jobs: dict[str, int] = Field(description="Job counts by status")
    nodes: int
    planes: list[PlaneView] = Field(
        default_factory=list, description="Each compute plane: its state, nodes, the jobs "
        "placed on it and what they use")


# --------------------------------------------------------------------------- jobs
# JobList (a page of jobs) lives in spec/status.py and the act-as header in names.py,
# imported above and served from here as well: `phalanx jobs` and every client load them
# without the rest of the API's models.


class JobSelector(Model):
    """Which live jobs a bulk cancel is about: every given part must match."""

    queue: str | None = Field(default=None, description="LocalQueue")
    labels: Annotated[dict[str, str], AfterValidator(check_labels)] = Field(
        default_factory=dict, description="Labels the jobs carry (all of them)")
    user: str | None = Field(default=None, description="Who submitted them")


class EventList(Model):
    items: list[JobEvent]


# Jobs one batch submits at most: one store transaction and one lock hold, kept short.
MAX_BATCH = 5_000


class JobBatch(Model):
    """Jobs submitted all or nothing."""

    items: list[JobSpec] = Field(min_length=1, max_length=MAX_BATCH)

    @classmethod
    def parse(cls, body: object) -> JobBatch:
        """The batch, or a SpecError naming the first bad field as ``items[i]...``."""
        items = body.get("items") if isinstance(body, dict) else None
        if not isinstance(items, list) or not items:
            raise SpecError("must be a non-empty list of jobs", field="items",
                            fix='send {"items": [{"name": ..., "podSets": [...]}, ...]}')
        if len(items) > MAX_BATCH:
            raise SpecError(f"holds {len(items)} jobs, more than the {MAX_BATCH} a batch takes",
                            field="items",
                            fix=f"split it into batches of at most {MAX_BATCH} jobs")
        specs = [validate(JobSpec, item, prefix=f"items[{i}]") for i, item in enumerate(items)]
        assert isinstance(body, dict)
        extra = sorted(set(body) - {"items"})
        if extra:
            raise SpecError("unknown field", field=extra[0],
                            fix="remove it; the body holds only items")
        return cls(items=specs)


class ManifestBatch(Model):
    """Kubernetes workload manifests (batch Job, JobSet, PyTorchJob, MPIJob, RayJob,
    RayCluster, AppWrapper) and Phalanx jobs, submitted all or nothing."""

    items: list[dict[str, Any]] = Field(
        min_length=1, max_length=MAX_BATCH,
        description="Each a manifest as its project publishes it, or a Phalanx job")


def parse_job(body: object) -> JobSpec:
    if isinstance(body, dict) and "apiVersion" in body:
        raise SpecError("is a Kubernetes manifest, not a Phalanx job", field="apiVersion",
                        fix='POST it to /v1/manifests as {"items": [manifest]}')
    return validate(JobSpec, body)


# --------------------------------------------------------------------------- queues & nodes
def _share(value: float) -> float | str:
    return "Infinity" if math.isinf(value) else value


# A queue of weight 0 has an infinite share, which JSON numbers cannot say.
Share = Annotated[
    float,
    PlainSerializer(_share),
    WithJsonSchema({"anyOf": [{"type": "number"}, {"const": "Infinity"}]}),
]


class ResourceUsageView(Model):
    flavor: str
    resource: str
    nominal: Quantity
    used: Quantity
    borrowed: Quantity
    lendable: Quantity
    withheld: Quantity = Field(
        default=0, description="Taken from the nominal quota by the flavor's unhealthy or "
        "cordoned nodes (capacityFollowsHealth); nominal is what is left")


class ClusterQueueView(Model):
    name: str
    cohort: str | None = None
    pending: int
    admitted: int
    stopped: bool = False
    weighted_share: Share = Field(
        description="Dominant resource share / weight (fair sharing), 0 when not borrowing"
    )
    usage: list[ResourceUsageView]


class LocalQueueView(Model):
    name: str
    cluster_queue: str
    pending: int
    admitted: int


class CohortView(Model):
    name: str
    parent: str | None = None


class QueuesOverview(Model):
    cluster_queues: list[ClusterQueueView]
    local_queues: list[LocalQueueView]
    cohorts: list[CohortView]

    # A notebook shows the queues' usage as an HTML table, rich's console as a table.
    def _repr_html_(self) -> str:
        from phalanx.spec.tables import queues_table

        return queues_table(self)._repr_html_()

    def __rich__(self) -> Any:
        from phalanx.spec.tables import queues_table

        return queues_table(self).__rich__()


class NodeView(Node):
    used: dict[str, Quantity] = Field(
        default_factory=dict, description="Requested by the admitted jobs' pods"
    )


class NodeList(Model):
    items: list[NodeView]


class PoolView(Model):
    """A node pool bought for a pending gang (docs/provisioning.md)."""

    name: str = Field(description="<job>-<attempt>")
    job: str
    attempt: int
    flavor: str
    provider: str
    state: Literal["Intent", "Creating", "Ready", "Idle", "Deleting", "Deleted"]
    node_count: int
    price_per_node_hour: float
    created_at: float
    updated_at: float
    error: str = Field(default="", description="The failure's class, when the pool failed: "
                       "Stockout, ConfigurationError, TransientError, Timeout")
    message: str = ""


class PoolList(Model):
    items: list[PoolView]


class DrainRequest(Model):
    grace_seconds: StrictNumber | None = Field(
        default=None, ge=0, allow_inf_nan=False,
        description="Time the gangs on the node get to stop (default: the control plane's "
        "grace)",
    )


class NodeDrained(Model):
    node: NodeView
    stopped: list[str] = Field(description="Jobs stopped, to be requeued onto other nodes")


# --------------------------------------------------------------------------- config
ConfigDocument = Annotated[
    ResourceFlavor | Cohort | ClusterQueue | LocalQueue | PriorityClass | ProvisioningPolicy,
    Field(discriminator="kind"),
]


class ConfigDocuments(Model):
    """Queue configuration documents: what ``GET /v1/config`` returns and apply takes."""

    documents: list[ConfigDocument]

    @classmethod
    def parse(cls, body: object) -> ConfigDocuments:
        """The documents, or a SpecError naming the first bad one as ``documents[i] (...)``."""
        documents = body.get("documents") if isinstance(body, dict) else None
        if not isinstance(documents, list):
            raise SpecError("must be a list of documents", field="documents",
                            fix='send {"documents": [{"kind": "ClusterQueue", ...}]}')
        objects: list[ConfigObject] = parse_config_documents(documents)
        assert isinstance(body, dict)
        extra = sorted(set(body) - {"documents"})
        if extra:
            raise SpecError("unknown field", field=extra[0],
                            fix="remove it; the body holds only documents")
        return cls(documents=objects)


class ConfigRef(Model):
    """An object to delete: its kind and name (other fields, as in an applied file, are
    ignored)."""

    model_config = ConfigDict(extra="ignore")

    kind: Literal["ResourceFlavor", "Cohort", "ClusterQueue", "LocalQueue", "PriorityClass",
                  "ProvisioningPolicy"]
    name: str


assert set(CONFIG_KINDS) == set(ConfigRef.model_fields["kind"].annotation.__args__)  # type: ignore[union-attr]


class ConfigRefs(Model):
    """What ``POST /v1/config/delete`` takes: the documents of the objects to delete."""

    documents: list[ConfigRef] = Field(min_length=1)


class DeletedObject(Model):
    kind: str
    name: str


class ConfigDeleted(Model):
    deleted: list[DeletedObject]


class AppliedObject(Model):
    kind: str
    name: str
    action: Literal["created", "configured", "unchanged"]


class ConfigApplied(Model):
    applied: list[AppliedObject]
