"""The typed values of a Kubernetes deployment of Phalanx.

Value names follow the MosaicML compute plane's chart where it has one
(``worker.rbac.allowNodeReads``, ``worker.enableRunInteractivity``,
``runs.namespace``, ``nodeDoctor.enabled``, ``<component>.rbac.create`` with
``serviceAccountName``), so platform engineers who know it recognise them.
With ``mode: full`` (the default) the *worker* is the control plane Deployment:
the HTTP API, the scheduler and the Kubernetes compute plane that turns admitted
jobs into pods. With ``mode: cluster`` the cluster only runs a compute plane: the
*worker* is ``phalanx worker``, which dials out to a remote control plane
(``controlPlane.url``) as the compute plane ``plane.name``, authenticated by that
plane's key from the ``apiKey`` Secret.

Every field is strict: an unknown or mistyped field is rejected naming it, and
the checks that span fields (``rbac.create: false`` without a
``serviceAccountName``, SQLite without a volume, requests above limits) name the
field to change and how.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

import yaml
from pydantic import BeforeValidator, Field, model_validator

from phalanx.defaults import DEFAULT_PORT
from phalanx.errors import SpecError
from phalanx.spec.base import ImageReference, Model, Name, check_api_url, field_error, validate
from phalanx.spec.labels import selector_text
from phalanx.spec.quantity import parse_duration, parse_quantity
from phalanx.version import __version__

API_PORT = DEFAULT_PORT
STATE_DIR = "/var/lib/phalanx"
# Where the worker of a cluster-only install reads its plane's key (re-read on rotation).
KEY_DIR = "/var/run/phalanx"
KEY_FILE = f"{KEY_DIR}/key"
# The ServiceAccounts created when a component's rbac.serviceAccountName is not set.
WORKER_ACCOUNT = "phalanx"
RUNS_ACCOUNT = "phalanx-run"
DOCTOR_ACCOUNT = "phalanx-node-doctor"

_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL_NAME = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)$")
_SECRET_KEY = re.compile(r"^[-._a-zA-Z0-9]+$")


def _subdomain(value: object) -> object:
    if isinstance(value, str) and (len(value) > 253 or not _SUBDOMAIN.match(value)):
        raise ValueError(
            f"{value!r} is not a valid object name; use lowercase letters, digits, '-' and '.', "
            "starting and ending with a letter or digit"
        )
    return value


def _qualified_name(value: str) -> bool:
    """A label key or resource name: an optional DNS-subdomain prefix, '/', then a name."""
    prefix, _, name = value.rpartition("/")
    if prefix and (len(prefix) > 253 or not _SUBDOMAIN.match(prefix)):
        return False
    return 0 < len(name) <= 63 and bool(_LABEL_NAME.match(name))


def _labels(value: object) -> object:
    if not isinstance(value, dict):
        return value
    for key, text in value.items():
        if not isinstance(key, str) or not _qualified_name(key):
            raise ValueError(
                f"{key!r} is not a valid label key; use an optional DNS prefix and '/', then "
                "at most 63 letters, digits, '-', '_' or '.'"
            )
        if isinstance(text, str) and text and (len(text) > 63 or not _LABEL_NAME.match(text)):
            raise ValueError(
                f"{text!r} (for {key!r}) is not a valid label value; use at most 63 letters, "
                "digits, '-', '_' or '.', starting and ending with a letter or digit"
            )
    return value


def _quantity_text(value: object) -> object:
    """Check a quantity the Kubernetes way but keep the text the user wrote."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise ValueError(f"expected a quantity, got {value!r}; write e.g. \"500m\" or \"1Gi\"")
    try:
        parse_quantity(value)
    except SpecError as exc:
        raise ValueError(f"{exc.message}; {exc.fix}") from None
    return str(value)


def _duration_text(value: object) -> object:
    """Check a duration (90s, 10m, 1h30m) but keep the text the user wrote."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise ValueError(f"expected a duration, got {value!r}; write e.g. \"10m\"")
    try:
        seconds = parse_duration(value)
    except SpecError as exc:
        raise ValueError(f"{exc.message}; {exc.fix}") from None
    if seconds <= 0:
        raise ValueError(f"{value!r} is not more than 0; write e.g. \"10m\"")
    return str(value)


def _resource_names(value: object) -> object:
    if isinstance(value, dict):
        for key in value:
            if not isinstance(key, str) or not _qualified_name(key):
                raise ValueError(
                    f"{key!r} is not a resource name; use e.g. cpu, memory or nvidia.com/gpu"
                )
    return value


ObjectName = Annotated[str, BeforeValidator(_subdomain)]
QuantityText = Annotated[str, BeforeValidator(_quantity_text)]
DurationText = Annotated[str, BeforeValidator(_duration_text)]
LabelMap = Annotated[dict[str, str], BeforeValidator(_labels)]
ResourceMap = Annotated[dict[str, QuantityText], BeforeValidator(_resource_names)]


class Toleration(Model):
    key: str | None = Field(default=None, description="Taint key; empty with Exists: every taint")
    operator: Literal["Equal", "Exists"] = Field(default="Equal", description="Equal or Exists")
    value: str | None = Field(default=None, description="Taint value (with Equal only)")
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = Field(
        default=None, description="Effect tolerated; empty: every effect"
    )
    toleration_seconds: int | None = Field(
        default=None, ge=0, description="With NoExecute: how long the pod stays after the taint"
    )

    @model_validator(mode="after")
    def _consistent(self) -> Toleration:
        # The API server rejects these two shapes; say so before anything is applied.
        if self.operator == "Exists" and self.value:
            raise field_error("operator Exists takes no value; remove value or use Equal",
                              "value")
        if not self.key and self.operator != "Exists":
            raise field_error("a toleration without a key needs operator Exists; set key or "
                              "use operator: Exists", "key")
        if self.toleration_seconds is not None and self.effect != "NoExecute":
            raise field_error("tolerationSeconds applies to effect NoExecute only; set "
                              "effect: NoExecute or remove tolerationSeconds",
                              "tolerationSeconds")
        return self


class Resources(Model):
    requests: ResourceMap = Field(default_factory=dict, description="Resources requested")
    limits: ResourceMap = Field(default_factory=dict, description="Resource limits")


class Rbac(Model):
    create: bool = Field(
        default=True,
        description="Create the ServiceAccount and its roles; false: bring your own "
        "(serviceAccountName is then required)",
    )
    service_account_name: ObjectName | None = Field(
        default=None,
        description="The ServiceAccount to use (created with this name when create is true)",
    )


class WorkerRbac(Rbac):
    allow_node_reads: bool = Field(
        default=True,
        description="Cluster-wide read of nodes and CRDs (and pods, to subtract capacity used "
        "by other workloads); the Kubernetes compute plane schedules on the nodes it sees "
        "(and, with mode: cluster, reports them to the control plane)",
    )
    allow_node_writes: bool = Field(
        default=False,
        description="Cluster-wide patch of nodes (cordon, and the phalanx.dev/unhealthy "
        "taint on nodes the doctor reports ERR)",
    )
    allow_provisioning_requests: bool = Field(
        default=False,
        description="ProvisioningRequests (autoscaling.x-k8s.io) and PodTemplates in the runs "
        "namespace, for flavors provisioned through kubernetes-provisioningrequest (which "
        "also needs allowNodeWrites, to reserve the nodes it gets for their job)",
    )


class ApiService(Model):
    type: Literal["ClusterIP", "NodePort", "LoadBalancer"] = Field(
        default="ClusterIP", description="Service type of the HTTP API"
    )
    port: int = Field(default=API_PORT, ge=1, le=65535, description="Service port of the API")
    annotations: dict[str, str] = Field(default_factory=dict, description="Service annotations")


class Worker(Model):
    enabled: bool = Field(
        default=True,
        description="Render the control plane (mode: cluster: worker) Deployment; false keeps "
        "its namespaces, ServiceAccount and roles, for one that runs outside the cluster",
    )
    replicas: int = Field(
        default=1, description="Control plane replicas: 1; 2 or more run with a leader "
        "(`phalanx up --ha`; needs store.kind: postgresql); 0 stops it"
    )
    leader_lease: Literal["kubernetes", "store"] = Field(
        default="kubernetes", description="With 2 or more replicas: where the leader's lease "
        "is kept: kubernetes (a coordination.k8s.io Lease, phalanx-control-plane, in this "
        "namespace: `phalanx up --leader-lease`) or store (a row of the PostgreSQL store; no "
        "Lease RBAC). Either way the store's term fences every write"
    )
    resources: Resources = Field(
        default_factory=lambda: Resources(
            requests={"cpu": "500m", "memory": "1Gi"}, limits={"memory": "2Gi"}
        ),
        description="Resources of the control plane container (replaces the default whole)",
    )
    node_selector: LabelMap = Field(
        default_factory=dict, description="Node labels the worker must run on"
    )
    cpu_nodes_only: bool = Field(
        default=True,
        description="Keep the worker off GPU nodes (a required node affinity: no NVIDIA GPU "
        "label of Node Feature Discovery or the GPU operator), so it never takes a GPU "
        "node's CPU and memory from training pods",
    )
    tolerations: list[Toleration] = Field(default_factory=list, description="Tolerations")
    priority_class_name: ObjectName | None = Field(default=None, description="PriorityClass")
    enable_run_interactivity: bool = Field(
        default=True, description="Runs' ServiceAccount may get pods and exec into them"
    )
    enable_run_logging: bool = Field(
        default=True, description="Runs' ServiceAccount may get pods (ignored with interactivity)"
    )
    fence_after: DurationText | None = Field(
        default=None,
        description="With mode: cluster: the worker stops this plane's pods after this long "
        "without the control plane (`phalanx worker --fence-after`; unset: its default, 10m). "
        "Keep it below the control plane's --worker-lost-after",
    )
    rbac: WorkerRbac = Field(default_factory=WorkerRbac, description="The control plane's RBAC")
    service: ApiService = Field(default_factory=ApiService, description="The API's Service")


class Checkpoints(Model):
    """Where jobs' checkpoint directories live: one directory per job on this volume."""

    claim_name: ObjectName | None = Field(
        default=None, description="A PersistentVolumeClaim in the runs namespace (ReadWriteMany "
        "when a job's pods may land on several nodes)")
    host_path: str | None = Field(
        default=None, description="A directory on every node (node-local: a job resumes only "
        "on the node that saved)")
    cleanup_image: ImageReference = Field(
        default="busybox:1.36", description="Image of the pods that remove a finished job's "
        "directory")

    @model_validator(mode="after")
    def _one_volume(self) -> Checkpoints:
        if self.claim_name and self.host_path:
            raise field_error("both claimName and hostPath are set; name one checkpoint "
                              "volume", "hostPath")
        if self.host_path is not None and not self.host_path.startswith("/"):
            raise field_error(f"hostPath {self.host_path!r} is not an absolute path; give one "
                              "starting with /", "hostPath")
        return self

    def volume(self) -> dict[str, Any] | None:
        """The Kubernetes volume source, or None without a volume."""
        if self.claim_name:
            return {"persistentVolumeClaim": {"claimName": self.claim_name}}
        if self.host_path:
            return {"hostPath": {"path": self.host_path, "type": "DirectoryOrCreate"}}
        return None


class Runs(Model):
    namespace: Name = Field(default="phalanx-runs", description="Namespace the job pods run in")
    rbac: Rbac = Field(default_factory=Rbac, description="The ServiceAccount job pods run as")
    default_image: ImageReference | None = Field(
        default=None,
        description="Image of job pod sets that name none (unset: such jobs are refused at submit)",
    )
    checkpoints: Checkpoints = Field(
        default_factory=Checkpoints, description="The volume of jobs' checkpoint directories "
        "(PHALANX_CHECKPOINT_DIR); unset: jobs get none")
    allowed_service_accounts: list[ObjectName] = Field(
        default_factory=list, description="ServiceAccounts of the runs namespace a job's pod "
        "set may run as (serviceAccountName); none by default: every pod runs as the runs "
        "account")
    api_url: str | None = Field(
        default=None, description="The API's URL as job pods reach it, where their "
        "per-attempt credential acts as the job's owner (unset: this install's Service, "
        "http://phalanx.<namespace>.svc:<worker.service.port>)")


def _gpu_nodes() -> dict[str, str]:
    # Node Feature Discovery's label for an NVIDIA PCI device (vendor 10de).
    return {"feature.node.kubernetes.io/pci-10de.present": "true"}


class Ray(Model):
    use_kube_ray: Literal["auto", "always", "never"] = Field(
        default="never",
        description="Ray jobs as KubeRay RayClusters: auto (where ray.io/v1 is served), "
                    "always (required), never (Phalanx's own pods)",
    )


class NodeDoctor(Model):
    enabled: bool = Field(
        default=False, description="Run `phalanx doctor` on every GPU node (a DaemonSet)"
    )
    resources: Resources = Field(
        default_factory=lambda: Resources(
            requests={"cpu": "50m", "memory": "128Mi"}, limits={"memory": "256Mi"}
        ),
        description="Resources of the doctor container (replaces the default whole)",
    )
    node_selector: LabelMap = Field(
        default_factory=_gpu_nodes, description="Nodes to run on (default: nodes with a GPU)"
    )
    tolerations: list[Toleration] = Field(
        default_factory=lambda: [Toleration(operator="Exists", effect="NoSchedule")],
        description="Tolerations (default: every NoSchedule taint, so cordoned nodes are seen)",
    )
    priority_class_name: ObjectName | None = Field(
        default="system-node-critical", description="PriorityClass"
    )
    rbac: Rbac = Field(default_factory=Rbac, description="The doctor's RBAC")


class ApiKey(Model):
    secret_name: ObjectName = Field(
        default="phalanx-api-key", description="Secret holding the bootstrap admin API key "
        "(mode: cluster: the plane's key, from `phalanx plane add NAME --key-file FILE`)"
    )
    key: str = Field(default="token", description="Key of the token in that Secret")
    value: str | None = Field(
        default=None,
        description="Create the Secret with this token; empty: the Secret must already exist",
    )


class Postgresql(Model):
    secret_name: ObjectName = Field(
        default="phalanx-db", description="Secret holding the PostgreSQL URL"
    )
    key: str = Field(default="url", description="Key of the URL in that Secret")
    url: str | None = Field(
        default=None,
        description="Create the Secret with this URL (postgresql://user:pass@host/db); empty: "
        "the Secret must already exist",
    )


class Store(Model):
    kind: Literal["sqlite", "postgresql"] = Field(
        default="sqlite", description="sqlite (a file on the state volume) or postgresql"
    )
    postgresql: Postgresql = Field(default_factory=Postgresql, description="With postgresql")


class Persistence(Model):
    enabled: bool = Field(
        default=True,
        description="Keep the state directory (SQLite store, job logs) on a PersistentVolumeClaim",
    )
    size: QuantityText = Field(default="10Gi", description="Size of the claim")
    storage_class_name: ObjectName | None = Field(
        default=None, description="StorageClass of the claim (empty: the cluster's default)"
    )
    existing_claim: ObjectName | None = Field(
        default=None, description="Use this existing claim instead of creating one"
    )


class Image(Model):
    repository: str = Field(default="phalanx", description="Image of the control plane")
    tag: str = Field(default=__version__, description="Image tag")
    pull_policy: Literal["Always", "IfNotPresent", "Never"] = Field(
        default="IfNotPresent", description="Image pull policy"
    )

    @property
    def reference(self) -> str:
        return f"{self.repository}:{self.tag}"


class ControlPlane(Model):
    """Where a cluster-only install's worker dials out to."""

    url: str | None = Field(
        default=None,
        description="The remote control plane's URL (https://HOST[:PORT]); required with "
        "mode: cluster",
    )


class Plane(Model):
    name: Name | None = Field(
        default=None,
        description="This cluster's compute plane name, as registered with `phalanx plane "
        "add NAME`; required with mode: cluster",
    )


class Values(Model):
    mode: Literal["full", "cluster"] = Field(
        default="full",
        description="full: the control plane and its compute plane run in this cluster; "
        "cluster: only a compute plane (the worker, which dials out to controlPlane.url)",
    )
    control_plane: ControlPlane = Field(
        default_factory=ControlPlane, description="With mode: cluster, the remote control plane"
    )
    plane: Plane = Field(default_factory=Plane, description="With mode: cluster, this cluster")
    namespace: Name = Field(
        default="phalanx-system",
        description="The main namespace: control plane (or worker) and doctor",
    )
    create_namespaces: bool = Field(
        default=True, description="Render the main and runs Namespaces"
    )
    image: Image = Field(default_factory=Image, description="Container image")
    image_pull_secrets: list[ObjectName] = Field(
        default_factory=list, description="Secrets to pull the image with"
    )
    api_key: ApiKey = Field(default_factory=ApiKey, description="The bootstrap admin API key "
                            "(exchanged for tokens; create other users' keys with it)")
    store: Store = Field(default_factory=Store, description="Where jobs and queues are stored")
    persistence: Persistence = Field(
        default_factory=Persistence, description="The state directory's volume"
    )
    worker: Worker = Field(
        default_factory=Worker,
        description="The control plane Deployment (mode: cluster: the worker Deployment)",
    )
    runs: Runs = Field(default_factory=Runs, description="Where and as whom job pods run")
    ray: Ray = Field(default_factory=Ray, description="How Ray jobs run (kind: ray)")
    manage_namespaces: str | None = Field(
        default=None, description="Kubernetes-native admission: a label selector (key=value, "
        "comma-separated) of the namespaces whose workloads created with kubectl (Jobs, JobSets, "
        "PyTorchJobs, MPIJobs, RayJobs, RayClusters, AppWrappers) Phalanx queues and admits "
        "(`phalanx up --manage-namespaces`); unset: none")
    webhook_certificate: Literal["generate", "cert-manager"] = Field(
        default="generate", description="With manageNamespaces, who makes the admission "
        "webhook's TLS certificate: generate (each render makes a CA and a serving "
        "certificate, into the Secret phalanx-webhook-tls and the webhook's caBundle) or "
        "cert-manager (an Issuer and a Certificate for cert-manager, which injects the "
        "caBundle)")
    node_doctor: NodeDoctor = Field(
        default_factory=NodeDoctor, description="The node health agent (DaemonSet)"
    )


# --------------------------------------------------------------------------- checks
def _require_account(rbac: Rbac, where: str) -> None:
    if not rbac.create and not rbac.service_account_name:
        raise SpecError(
            "rbac.create is false but no ServiceAccount is named",
            field=f"{where}.rbac.serviceAccountName",
            fix="name an existing ServiceAccount, or set rbac.create: true",
        )


def _check_distinct_accounts(values: Values) -> None:
    """Two created ServiceAccounts of one name in one namespace would be one account."""
    created = [
        ("worker", values.namespace, values.worker.rbac, WORKER_ACCOUNT),
        ("runs", values.runs.namespace, values.runs.rbac, RUNS_ACCOUNT),
    ]
    if values.node_doctor.enabled:
        created.append(("nodeDoctor", values.namespace, values.node_doctor.rbac,
                        DOCTOR_ACCOUNT))
    seen: dict[tuple[str, str], str] = {}
    for where, namespace, rbac, default in created:
        if not rbac.create:
            continue
        key = (namespace, rbac.service_account_name or default)
        if key in seen:
            raise SpecError(
                f"names the same ServiceAccount as {seen[key]}.rbac in namespace {namespace}",
                field=f"{where}.rbac.serviceAccountName",
                fix="give each component its own ServiceAccount",
            )
        seen[key] = where


def _check_resources(resources: Resources, where: str) -> None:
    for name, limit in resources.limits.items():
        request = resources.requests.get(name)
        if request is not None and parse_quantity(request) > parse_quantity(limit):
            raise SpecError(
                f"request {request} is above the limit {limit}",
                field=f"{where}.resources.requests.{name}",
                fix=f"lower it to at most {limit}, or raise {where}.resources.limits.{name}",
            )


def _check_secret_key(key: str, field: str) -> None:
    if not key or not _SECRET_KEY.match(key):
        raise SpecError(f"{key!r} is not a valid Secret key", field=field,
                        fix="use letters, digits, '-', '_' or '.'")


# Values that configure the control plane: with mode: cluster nothing would use them.
_CONTROL_PLANE_ONLY: list[tuple[str, str]] = [
    ("store", "the worker keeps no store; jobs and queues live in the remote control plane"),
    ("persistence", "the worker keeps no state directory on a volume"),
    ("worker.service", "nothing connects into the worker, so it has no Service"),
]


def _check_url(url: str | None) -> None:
    if url is None:
        raise SpecError("is required with mode: cluster", field="controlPlane.url",
                        fix="set the remote control plane's URL, e.g. https://phalanx.example.com")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise SpecError(f"{url!r} is not an http(s) URL", field="controlPlane.url",
                        fix="write https://HOST[:PORT], the address `phalanx up` serves on")


def _check_mode(values: Values) -> None:
    """Each mode's values mean something; the other mode's are refused, not ignored."""
    if values.mode == "full":
        for field, value in (("controlPlane.url", values.control_plane.url),
                             ("plane.name", values.plane.name),
                             ("worker.fenceAfter", values.worker.fence_after)):
            if value is not None:
                raise SpecError("applies to a cluster-only install", field=field,
                                fix="set mode: cluster, or remove it")
        return
    _check_url(values.control_plane.url)
    if values.plane.name is None:
        raise SpecError("is required with mode: cluster", field="plane.name",
                        fix="name this cluster's compute plane, as `phalanx plane add NAME` did")
    defaults = Values(mode="full")
    for field, why in _CONTROL_PLANE_ONLY:
        if _lookup(values, field) != _lookup(defaults, field):
            raise SpecError(f"configures the control plane, but with mode: cluster {why}",
                            field=field, fix="remove it, or set mode: full")


def _lookup(values: Values, dotted: str) -> object:
    """A value by its document path (camelCase keys), e.g. ``worker.service``."""
    node: object = values
    for part in dotted.split("."):
        node = getattr(node, _snake(part))
    return node


def _snake(name: str) -> str:
    return re.sub(r"([A-Z])", lambda m: "_" + m.group(1).lower(), name)


def _check_replicas(values: Values) -> None:
    """Several replicas lead by a lease in a shared PostgreSQL store and share the state
    directory's keys (a ReadWriteMany claim); a compute plane has one worker."""
    n = values.worker.replicas
    if n < 0 or (n > 1 and values.mode == "cluster"):
        raise SpecError(f"{n} replicas", field="worker.replicas",
                        fix="use 1 (or 0 to stop it): a compute plane has one worker")
    if n > 1 and values.store.kind != "postgresql":
        raise SpecError(f"{n} replicas need the PostgreSQL store: a SQLite file belongs to "
                        "one process", field="store.kind",
                        fix="set store.kind: postgresql, or use 1 replica")
    if n > 1 and not values.persistence.enabled:
        raise SpecError(f"{n} replicas share the state directory's keys on one volume",
                        field="persistence.enabled", fix="set persistence.enabled: true (with "
                        "a ReadWriteMany storage class), or use 1 replica")


def check(values: Values) -> None:
    """The rules that span fields; each failure names the field to change."""
    _check_mode(values)
    if values.manage_namespaces is not None:
        selector_text(values.manage_namespaces, "manageNamespaces")
        if values.mode == "cluster":
            raise SpecError("native admission runs in the control plane's own cluster only",
                            field="manageNamespaces", fix="remove it, or set mode: full")
    _check_replicas(values)
    _require_account(values.worker.rbac, "worker")
    _require_account(values.runs.rbac, "runs")
    if values.node_doctor.enabled:
        _require_account(values.node_doctor.rbac, "nodeDoctor")
    _check_distinct_accounts(values)
    _check_resources(values.worker.resources, "worker")
    _check_resources(values.node_doctor.resources, "nodeDoctor")
    _check_secret_key(values.api_key.key, "apiKey.key")
    if values.runs.api_url is not None:
        check_api_url(values.runs.api_url, "runs.apiUrl")
    if values.api_key.value is not None and not values.api_key.value.strip():
        raise SpecError("is empty", field="apiKey.value",
                        fix="set a long random token, or remove apiKey.value")
    if values.store.kind == "postgresql":
        pg = values.store.postgresql
        _check_secret_key(pg.key, "store.postgresql.key")
        if pg.url is not None and not pg.url.startswith(("postgresql://", "postgresql+")):
            raise SpecError(
                "is not a PostgreSQL URL", field="store.postgresql.url",
                fix="write postgresql://USER:PASSWORD@HOST:5432/DATABASE",
            )
    elif values.mode == "full" and not values.persistence.enabled:
        raise SpecError(
            "the SQLite store needs a persistent state directory",
            field="persistence.enabled",
            fix="set persistence.enabled: true, or use store.kind: postgresql",
        )


def load_values(data: object, source: str = "values") -> Values:
    """Validate a values document (a mapping; None or empty means the defaults)."""
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise SpecError(f"is not a mapping of values (got {type(data).__name__})",
                        field=source, fix="write a YAML mapping such as `runs: {namespace: ml}`")
    values = validate(Values, data)
    check(values)
    return values


def load_values_yaml(text: str, source: str = "values") -> Values:
    try:
        data: Any = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise SpecError(f"is not valid YAML: {exc}", field=source,
                        fix="fix the YAML syntax") from None
    return load_values(data, source)
