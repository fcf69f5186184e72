"""The user-facing schema: flavors, queues, cohorts, priorities, jobs and nodes.

Names and semantics follow Kueue so platform engineers recognise them.
All quantities are milli-units (see ``phalanx.spec.quantity``).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Literal

from pydantic import (
    AfterValidator,
    AliasChoices,
    BeforeValidator,
    Field,
    Strict,
    StrictBool,
    StrictInt,
    ValidationInfo,
    WithJsonSchema,
    field_validator,
    model_validator,
)

from phalanx.spec.base import Duration, Model, Name, Quantity, StrictNumber, field_error
from phalanx.spec.labels import check_labels
from phalanx.spec.provisioning import FlavorProvisioning, ProvisioningPolicy
from phalanx.spec.quantity import format_amount
from phalanx.spec.ray import RaySpec
from phalanx.spec.secrets import EnvFromItem, PullSecretItem, SecretEnvVar, split_env
from phalanx.spec.sources import GENERATE_NAME, GitSource, Workdir, generated_name
from phalanx.spec.volumes import Volume, VolumeMount, check_paths, check_shm, check_volumes

GPU = "nvidia.com/gpu"
# The resources counted as GPUs where a rule counts a job's GPUs (holdForLargeGangs): the
# device plugins' names of NVIDIA's, AMD's and Intel's GPUs.
GPU_RESOURCES = frozenset({GPU, "amd.com/gpu", "gpu.intel.com/i915", "gpu.intel.com/xe"})

# The most pods one pod set may ask for: far above any cluster's pod slots, low enough that
# no count the scheduler works with can exhaust the control plane's memory.
MAX_REPLICAS = 100_000
# Priorities are 32-bit, as a Kubernetes PriorityClass's value (and the store's column).
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
# Strict: JSON's true, 1.5 or "10" is no integer (lax pydantic would take them as 1, 1, 10).
Int32 = Annotated[int, Strict(), Field(ge=INT32_MIN, le=INT32_MAX)]


def _priority(value: object) -> object:
    if not isinstance(value, str | int) or isinstance(value, bool):
        raise ValueError(
            f"{value!r} is neither a PriorityClass's name nor an integer; name a PriorityClass "
            f"(such as \"high\") or use an integer from {INT32_MIN} to {INT32_MAX}"
        )
    if isinstance(value, int) and not (
        INT32_MIN <= value <= INT32_MAX
    ):
        raise ValueError(
            f"{value} is outside the 32-bit range of priorities; name a PriorityClass or use "
            f"an integer from {INT32_MIN} to {INT32_MAX}"
        )
    return value


# A PriorityClass's name or the value itself.
Priority = Annotated[
    str | int,
    BeforeValidator(_priority),
    WithJsonSchema({
        "anyOf": [{"type": "string"},
                  {"type": "integer", "minimum": INT32_MIN, "maximum": INT32_MAX}],
        "description": "A PriorityClass's name, or a 32-bit integer",
    }),
]
# A count (restarts, pending jobs): zero or more, at most what a 32-bit column holds.
Count = Annotated[int, Strict(), Field(ge=0, le=INT32_MAX)]
# Records read back from the store were checked when they were submitted; bounds added
# since (MAX_REPLICAS) apply to new input only, so a record stored before still loads.
STORED = "stored"


def from_store(info: ValidationInfo) -> bool:
    """Whether this validation reads a stored record back (``validate(..., stored=True)``)."""
    return isinstance(info.context, dict) and bool(info.context.get(STORED))


# --------------------------------------------------------------------------- nodes & flavors
class Taint(Model):
    key: str
    value: str = ""
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] = "NoSchedule"


class Toleration(Model):
    key: str | None = None
    operator: Literal["Equal", "Exists"] = "Equal"
    value: str = ""
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = None

    def tolerates(self, taint: Taint) -> bool:
        if self.effect is not None and self.effect != taint.effect:
            return False
        if self.key is None:  # empty key + Exists tolerates everything
            return self.operator == "Exists"
        if self.key != taint.key:
            return False
        return self.operator == "Exists" or self.value == taint.value


def tolerates_all(tolerations: list[Toleration], taints: list[Taint]) -> bool:
    """Whether every scheduling-blocking taint is tolerated (PreferNoSchedule never blocks)."""
    return all(
        taint.effect == "PreferNoSchedule" or any(t.tolerates(taint) for t in tolerations)
        for taint in taints
    )


class ResourceFlavor(Model):
    kind: Literal["ResourceFlavor"] = "ResourceFlavor"
    name: Name
    node_labels: dict[str, str] = Field(default_factory=dict)
    node_taints: list[Taint] = Field(default_factory=list)
    tolerations: list[Toleration] = Field(default_factory=list)
    provisioning: FlavorProvisioning | None = Field(
        default=None, description="Node pools bought for gangs that fit the quota but no "
        "node of this flavor (docs/provisioning.md). A Phalanx addition")

    @model_validator(mode="after")
    def _provisioned_nodes_told_apart(self) -> ResourceFlavor:
        if self.provisioning is not None and not self.node_labels:
            raise field_error(
                "provisioning is set but nodeLabels is empty, so the flavor would take every "
                "node; add nodeLabels such as {pool: burst} (the pools' nodes carry them)",
                "nodeLabels")
        return self


class NodeHealth(StrEnum):
    HEALTHY = "healthy"
    DEGRADED = "degraded"
    UNHEALTHY = "unhealthy"


# The label that carries a node's health (set on Kubernetes nodes by the control plane;
# the scheduler gives it every node it places on).
HEALTH_LABEL = "phalanx.dev/health"
HEALTH_LABEL_VALUES = {NodeHealth.HEALTHY: "PASS", NodeHealth.DEGRADED: "WARN",
                       NodeHealth.UNHEALTHY: "ERR"}


class CheckStatus(StrEnum):
    """A node check's answer; N/A when the check does not apply (no GPU, no driver)."""

    PASS = "PASS"
    WARN = "WARN"
    ERR = "ERR"
    NOT_APPLICABLE = "N/A"


class NodeCheck(Model):
    """The last result of one of a node's health checks."""

    name: str = Field(description="The check, e.g. gpu-ecc, disk, site/nccl-allreduce")
    status: CheckStatus
    message: str = Field(description="One sentence saying what was found")
    values: dict[str, float] = Field(
        default_factory=dict, description="The numbers behind the answer"
    )


class Node(Model):
    kind: Literal["Node"] = "Node"
    name: str
    labels: dict[str, str] = Field(default_factory=dict)
    taints: list[Taint] = Field(default_factory=list)
    allocatable: dict[str, Quantity] = Field(default_factory=dict)
    unschedulable: bool = False
    health: NodeHealth = NodeHealth.HEALTHY
    health_reasons: list[str] = Field(default_factory=list)
    lost: bool = Field(
        default=False, description="The node stopped reporting for longer than the grace: "
        "its pods cannot stop by themselves and are deleted at once",
    )
    checks: list[NodeCheck] = Field(
        default_factory=list, description="The last result of each of the node's checks"
    )


# --------------------------------------------------------------------------- quotas
class ResourceQuota(Model):
    name: str
    nominal_quota: Quantity
    borrowing_limit: Quantity | None = None
    lending_limit: Quantity | None = None

    @model_validator(mode="after")
    def _lending_within_nominal(self) -> ResourceQuota:
        if self.lending_limit is not None and self.lending_limit > self.nominal_quota:
            raise field_error(
                "lendingLimit is above nominalQuota; "
                "set lendingLimit to at most nominalQuota (a queue cannot lend what it lacks)",
                "lendingLimit")
        return self


class FlavorQuotas(Model):
    name: str
    resources: list[ResourceQuota]


class ResourceGroup(Model):
    covered_resources: list[str] = Field(min_length=1)
    flavors: list[FlavorQuotas] = Field(min_length=1)

    @model_validator(mode="after")
    def _flavors_cover_resources(self) -> ResourceGroup:
        covered = list(self.covered_resources)
        twice = next((i for i, res in enumerate(covered) if res in covered[:i]), None)
        if twice is not None:
            raise field_error("coveredResources lists a resource twice; list each resource "
                              "once", "coveredResources", twice)
        for i, flavor in enumerate(self.flavors):
            names = [r.name for r in flavor.resources]
            if sorted(names) != sorted(covered):
                raise field_error(
                    f"flavor {flavor.name!r} (flavors[{i}]) sets quotas for {names} but the group "
                    f"covers {covered}; give every flavor exactly one quota per covered resource",
                    "flavors", i, "resources")
        return self


# A job preempted this often within the window is no victim until it ends (see
# scheduler/thrashing.py and the README's Philly figures for why these values).
DEFAULT_MAX_PREEMPTIONS = 20
DEFAULT_MAX_PREEMPTIONS_WINDOW = 7 * 86400.0


class PreemptionPolicy(Model):
    within_cluster_queue: Literal["Never", "LowerPriority", "LowerOrNewerEqualPriority"] = "Never"
    reclaim_within_cohort: Literal["Never", "LowerPriority", "Any"] = "Never"
    borrow_within_cohort: BorrowWithinCohort | None = None
    protect_after_start: Duration | None = Field(
        default=None,
        description="After each start a job of this queue is no victim of any preemption for "
                    "this long. Unset: the job's checkpoint interval once it has reported "
                    "checkpoints; 0: no such protection. A Phalanx addition; Kueue has no "
                    "such field",
    )
    max_preemptions: Count | None = Field(
        default=None,
        description="A job of this queue preempted this many times within "
                    "maxPreemptionsWindow is no victim of any preemption until it ends; 0: no "
                    f"cap; unset: {DEFAULT_MAX_PREEMPTIONS}. A Phalanx addition; Kueue has no "
                    "such field",
    )
    max_preemptions_window: Duration | None = Field(
        default=None,
        description="The window maxPreemptions counts in; unset: "
                    f"{DEFAULT_MAX_PREEMPTIONS_WINDOW / 86400:g} days. A Phalanx addition",
    )

    @property
    def preemption_cap(self) -> tuple[int, float]:
        """(maxPreemptions, its window in seconds), defaults filled in."""
        count = DEFAULT_MAX_PREEMPTIONS if self.max_preemptions is None else self.max_preemptions
        window = self.max_preemptions_window
        return count, DEFAULT_MAX_PREEMPTIONS_WINDOW if window is None else window


class BorrowWithinCohort(Model):
    policy: Literal["Never", "LowerPriority"] = "Never"
    max_priority_threshold: Int32 | None = None


class FlavorFungibility(Model):
    when_can_borrow: Literal["Borrow", "TryNextFlavor"] = "Borrow"
    when_can_preempt: Literal["Preempt", "TryNextFlavor"] = "TryNextFlavor"


class FairSharing(Model):
    weight: StrictNumber = Field(default=1.0, ge=0, allow_inf_nan=False)


def gpus_requested(spec: JobSpec) -> int:
    """The GPUs a job asks for in all (``GPU_RESOURCES``, every replica of every pod set),
    rounded down to whole GPUs."""
    milli = sum(p.replicas * amount for p in spec.pod_sets
                for resource, amount in p.resources.items() if resource in GPU_RESOURCES)
    return milli // 1000


class HoldForLargeGangs(Model):
    """A ClusterQueue's head that asks for ``minGPUs`` or more and has waited ``after``
    holds the queue: nothing behind it is admitted ahead of it while it waits."""

    min_gpus: int = Field(
        strict=True, ge=1, le=INT32_MAX, alias="minGPUs",
        description="The head's GPUs (every replica of every pod set) from which it holds")
    after: Duration = Field(description="How long the head waits before it holds the queue")


class ClusterQueue(Model):
    kind: Literal["ClusterQueue"] = "ClusterQueue"
    name: Name
    cohort: Name | None = None
    resource_groups: list[ResourceGroup] = Field(default_factory=list)
    queueing_strategy: Literal["BestEffortFIFO", "StrictFIFO"] = "BestEffortFIFO"
    preemption: PreemptionPolicy = Field(default_factory=PreemptionPolicy)
    flavor_fungibility: FlavorFungibility = Field(default_factory=FlavorFungibility)
    fair_sharing: FairSharing = Field(default_factory=FairSharing)
    stop_policy: Literal["None", "Hold", "HoldAndDrain"] = "None"
    max_pending_jobs: Count | None = Field(
        default=None,
        description="Pending jobs the queue holds at most; a submit beyond is refused (429). "
                    "A Phalanx addition, as Slurm's MaxSubmitJobs; Kueue has no such field",
    )
    min_runtime: Duration | None = Field(
        default=None,
        description="A job of this queue that has run less than this is no victim of another "
                    "queue's reclaim or fair-sharing preemption (KAI's preemption protection). "
                    "A Phalanx addition; Kueue has no such field",
    )
    reserve_after: Duration | None = Field(
        default=None,
        description="A job at the head of this queue that has waited this long gets a "
                    "reservation at its earliest start (from the expected ends of running "
                    "jobs); later jobs start only where they end before it or leave its room "
                    "(backfill). Unset: no reservations. A Phalanx addition; Kueue has no "
                    "such field",
    )
    hold_for_large_gangs: HoldForLargeGangs | None = Field(
        default=None,
        description="A head of this queue that asks for minGPUs GPUs or more and has waited "
                    "`after` makes the queue StrictFIFO while it waits: nothing behind it is "
                    "admitted ahead of it, so big gangs are not starved by smaller jobs "
                    "passing them. Unset: BestEffortFIFO as set. A Phalanx addition; Kueue "
                    "has no such field",
    )
    capacity_follows_health: StrictBool = Field(
        default=False,
        description="The queue's nominal quota (and lendingLimit) of a flavor shrink by the "
                    "capacity of that flavor's nodes that are unhealthy or cordoned, every "
                    "cycle; admitted jobs over the shrunk quota are preempted, lowest priority "
                    "first (MLBatch's slack queue). A Phalanx addition",
    )
    avoid_degraded_nodes: StrictBool = Field(
        default=False,
        description="Place this queue's jobs on no node whose health is degraded (WARN). "
                    "A Phalanx addition",
    )

    @model_validator(mode="after")
    def _resources_in_one_group(self) -> ClusterQueue:
        seen: set[str] = set()
        for i, group in enumerate(self.resource_groups):
            for j, res in enumerate(group.covered_resources):
                if res in seen:
                    raise field_error(
                        f"resource {res!r} is covered by two resourceGroups; "
                        "cover each resource in exactly one group",
                        "resourceGroups", i, "coveredResources", j)
                seen.add(res)
        return self


class Cohort(Model):
    kind: Literal["Cohort"] = "Cohort"
    name: Name
    parent: Name | None = None
    resource_groups: list[ResourceGroup] = Field(default_factory=list)
    fair_sharing: FairSharing = Field(default_factory=FairSharing)


class LocalQueue(Model):
    kind: Literal["LocalQueue"] = "LocalQueue"
    name: Name
    cluster_queue: Name
    stop_policy: Literal["None", "Hold", "HoldAndDrain"] = "None"


class PriorityClass(Model):
    kind: Literal["PriorityClass"] = "PriorityClass"
    name: Name
    value: Int32
    description: str = ""
    min_runtime: Duration | None = Field(
        default=None,
        description="A job of this class that has run less than this is no victim of another "
                    "queue's reclaim or fair-sharing preemption (with the queue's minRuntime, "
                    "the longer counts). A Phalanx addition",
    )


BUILTIN_PRIORITY_CLASSES = (
    PriorityClass(name="low", value=-100, description="Runs when nothing else needs the capacity"),
    PriorityClass(name="default", value=0, description="The priority of jobs that name none"),
    PriorityClass(name="high", value=100, description="Preempts lower priorities where allowed"),
)


# --------------------------------------------------------------------------- jobs
class JobKind(StrEnum):
    TORCH = "torch"
    MPI = "mpi"
    RAY = "ray"
    GENERIC = "generic"


class RestartPolicy(Model):
    max_restarts: Count = Field(default=0, description="Restarts allowed after user errors")
    max_system_restarts: Count = Field(
        default=10, description="Restarts allowed after system failures (node loss, kills)"
    )
    backoff: Duration = 10.0
    max_backoff: Duration = 600.0


class CheckpointPolicy(Model):
    keep: StrictBool = Field(
        default=False,
        description="Keep the job's checkpoint directory (PHALANX_CHECKPOINT_DIR) after the job "
                    "ends; by default it is removed then",
    )


class TopologyConstraint(Model):
    required: str | None = None
    preferred: str | None = None

    @model_validator(mode="after")
    def _one_level(self) -> TopologyConstraint:
        if self.required and self.preferred:
            raise field_error(
                "both required and preferred are set; choose one topology constraint",
                "preferred")
        return self


class Dependency(Model):
    """One job this job waits for, and which of its ends lets this one run.

    Succeeded is Argo's plain ``dependencies``/``depends: "prep"`` and Slurm's ``afterok``;
    Finished (any end: succeeded, failed or cancelled) is Slurm's ``afterany``.
    """

    job: Name = Field(description="The name of a job submitted earlier or in the same request")
    condition: Literal["Succeeded", "Finished"] = Field(
        default="Succeeded",
        description="Succeeded: run only after the job succeeded, fail if it does not; "
                    "Finished: run after the job ends however it ends",
    )


def _dependency(value: object) -> object:
    return {"job": value} if isinstance(value, str) else value  # `dependsOn: [prep]`


DependencyItem = Annotated[
    Dependency,
    BeforeValidator(_dependency),
    WithJsonSchema({
        "anyOf": [{"type": "string", "description": "A job name (condition Succeeded)"},
                  {"$ref": "#/components/schemas/Dependency"}],
    }),
]


# Bounds of one pod set's command and environment: far above what a program takes, low
# enough that one job spec stays small (every list of jobs carries its specs).
MAX_ARGUMENTS = 4096
MAX_ARGUMENT_BYTES = 128 * 1024
MAX_ENV = 1024
MAX_ENV_BYTES = 256 * 1024
# All commands, environments and labels of one job: what a list of jobs carries per job.
MAX_JOB_SPEC_BYTES = 1024 * 1024
_ENV_NAME = r"^[^=\x00]+$"

Argument = Annotated[str, Field(max_length=MAX_ARGUMENT_BYTES, pattern=r"^[^\x00]*$")]
EnvName = Annotated[str, Field(min_length=1, max_length=1024, pattern=_ENV_NAME)]
EnvValue = Annotated[str, Field(max_length=MAX_ENV_BYTES, pattern=r"^[^\x00]*$")]


def _env_bounded(env: dict[str, str]) -> dict[str, str]:
    size = sum(len(k) + len(v) for k, v in env.items())
    if size > MAX_ENV_BYTES:
        raise ValueError(
            f"the environment holds {size} characters, above the limit of {MAX_ENV_BYTES}; "
            "pass large data as a file (a volume, the checkpoint directory), not in env"
        )
    return env


class PodSet(Model):
    name: Name = "worker"
    replicas: StrictInt = Field(default=1, ge=1, json_schema_extra={"maximum": MAX_REPLICAS})
    min_replicas: StrictInt | None = Field(default=None, ge=1,
                                           json_schema_extra={"maximum": MAX_REPLICAS})
    resources: dict[str, Quantity] = Field(default_factory=dict)
    command: list[Argument] = Field(
        default_factory=list, max_length=MAX_ARGUMENTS,
        description="The program and its arguments; the program is not empty",
    )
    env: Annotated[dict[EnvName, EnvValue], AfterValidator(_env_bounded)] = Field(
        default_factory=dict, max_length=MAX_ENV,
        description=f"Variables (at most {MAX_ENV}, {MAX_ENV_BYTES} bytes in all): a map, or "
        "Kubernetes' list of {name, value} and {name, valueFrom: {secretKeyRef}} (those go to "
        "secretEnv)",
    )
    env_from: list[EnvFromItem] = Field(
        default_factory=list, description="Secrets whose every key becomes a variable")
    secret_env: list[SecretEnvVar] = Field(
        default_factory=list, description="Variables taken from one key of a secret")
    image_pull_secrets: list[PullSecretItem] = Field(
        default_factory=list, description="docker secrets Kubernetes pulls the image with")
    working_dir: str | None = None
    image: str | None = None
    image_pull_policy: Literal["Always", "IfNotPresent", "Never"] | None = Field(
        default=None, description="When Kubernetes pulls the image (its container's "
        "imagePullPolicy; Kubernetes' default when unset); recorded, unused on the local plane")
    service_account_name: str | None = Field(
        default=None, pattern=r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$",
        description="The ServiceAccount the pods run as on Kubernetes, one the install "
        "allows (--allow-service-account); unset: the install's runs account")
    node_selector: dict[str, str] = Field(default_factory=dict)
    tolerations: list[Toleration] = Field(default_factory=list)
    cpu_pinning: Literal["none", "exclusive"] = Field(
        default="none",
        description="exclusive: each pod gets whole CPUs of its own (its cpu request, an "
                    "integer), from one NUMA node when they fit; on Kubernetes requests equal "
                    "limits (Guaranteed QoS) for the static CPU manager",
    )
    mounts: list[VolumeMount] = Field(
        default_factory=list, validation_alias=AliasChoices("mounts", "volumeMounts"),
        description="Where the pods see the job's volumes (Kubernetes' volumeMounts, "
                    "accepted under that name too)",
    )
    shm: Quantity | None = Field(
        default=None, gt=0, description="A /dev/shm of this size, e.g. 16Gi (on Kubernetes a "
        "Memory emptyDir, counted as the pod's memory)",
    )

    @model_validator(mode="before")
    @classmethod
    def _env_list(cls, value: object) -> object:
        if isinstance(value, dict) and isinstance(value.get("env"), list):
            plain, from_secrets = split_env(value["env"])
            field = "secretEnv" if "secretEnv" in value or "secret_env" not in value \
                else "secret_env"
            return {**value, "env": plain, field: [*value.get(field, []), *from_secrets]}
        return value

    @model_validator(mode="after")
    def _variables_named_once(self) -> PodSet:
        names = [e.name for e in self.secret_env]
        for j, name in enumerate(names):
            if name in self.env or name in names[:j]:
                raise field_error(f"variable {name!r} is set twice (env and secretEnv, or "
                                  "twice from secrets); set each variable once",
                                  "secretEnv", j, "name")
        return self

    @model_validator(mode="after")
    def _min_within_replicas(self) -> PodSet:
        if self.min_replicas is not None and self.min_replicas > self.replicas:
            raise field_error(
                f"minReplicas ({self.min_replicas}) is above replicas ({self.replicas}); "
                "set minReplicas to at most replicas", "minReplicas")
        return self

    @field_validator("replicas")
    @classmethod
    def _replicas_bounded(cls, value: int, info: ValidationInfo) -> int:
        if value > MAX_REPLICAS and not from_store(info):
            raise ValueError(
                f"{value} replicas is above the limit of {MAX_REPLICAS} per pod set; "
                f"ask for at most {MAX_REPLICAS} replicas (split the work into several jobs)"
            )
        return value

    @field_validator("command")
    @classmethod
    def _program_named(cls, value: list[str]) -> list[str]:
        if value and not value[0].strip():
            raise ValueError("the program (command[0]) is empty; name the program to run, "
                             "such as python or /bin/sh")
        size = sum(len(arg) for arg in value)
        if size > MAX_ARGUMENT_BYTES * 2:
            raise ValueError(
                f"the command holds {size} characters, above the limit of "
                f"{MAX_ARGUMENT_BYTES * 2}; pass large data as a file, not as arguments"
            )
        return value

    @field_validator("cpu_pinning")
    @classmethod
    def _pinned_cpus_whole(cls, value: str, info: ValidationInfo) -> str:
        cpu = info.data.get("resources", {}).get("cpu")
        if value == "exclusive" and (cpu is None or cpu <= 0 or cpu % 1000):
            shown = "not set" if cpu is None else format_amount(cpu, "cpu")
            raise ValueError(
                f"exclusive pinning gives whole CPUs, and resources.cpu is {shown}; ask for an "
                f"integer cpu such as \"1\" or \"4\", or drop cpuPinning"
            )
        return value

    @field_validator("mounts")
    @classmethod
    def _one_mount_per_path(cls, value: list[VolumeMount]) -> list[VolumeMount]:
        check_paths(value)
        return value

    @field_validator("shm")
    @classmethod
    def _shm_mounted_once(cls, value: int | None, info: ValidationInfo) -> int | None:
        if value is not None:
            check_shm(info.data.get("mounts", []))
        return value

    @field_validator("resources")
    @classmethod
    def _no_pods_request(cls, value: dict[str, int]) -> dict[str, int]:
        if "pods" in value:
            raise ValueError(
                "'pods' is counted by Phalanx, not requested; remove it from resources"
            )
        return value


class JobSpec(Model):
    name: Name
    generate_name: str | None = Field(
        default=None, pattern=f"^{GENERATE_NAME.pattern}$",
        description="A prefix of the job's name: without a name, and whenever the name is "
                    "taken, the control plane names the job this prefix and 5 random "
                    "lowercase letters and digits (Kubernetes' generateName)")
    queue: Name = "default"
    priority: Priority = "default"
    kind: JobKind = JobKind.GENERIC
    max_runtime: Duration | None = None
    restart: RestartPolicy = Field(default_factory=RestartPolicy)
    termination_grace: Duration | None = Field(
        default=None,
        description="How long the job's pods get between SIGTERM and SIGKILL when it is "
                    "preempted, drained or cancelled, or still runs when the job succeeds "
                    "(default: the control plane's grace)",
    )
    checkpoint: CheckpointPolicy | None = Field(
        default=None, description="What becomes of the job's checkpoint directory")
    topology: TopologyConstraint | None = None
    pod_sets: list[PodSet] = Field(min_length=1)
    labels: Annotated[dict[str, str], AfterValidator(check_labels)] = Field(
        default_factory=dict,
        description="Kubernetes-style labels; lists and bulk cancels select jobs by them",
    )
    ray: RaySpec | None = Field(
        default=None, description="kind: ray only: the entrypoint that makes the cluster a "
        "Ray job (see phalanx.spec.ray)",
    )
    depends_on: list[DependencyItem] = Field(
        default_factory=list,
        description="Jobs that must end first: names (`[prep]`, condition Succeeded) or "
                    "`{job: prep, condition: Finished}`; the job waits, holding no quota",
    )
    volumes: list[Volume] = Field(
        default_factory=list, validate_default=True,
        description="Volumes the pod sets mount (Kubernetes' volumes: emptyDir, hostPath, "
                    "persistentVolumeClaim, configMap, secret, nfs)",
    )
    workdir: Workdir | None = Field(
        default=None,
        description="The directory every pod starts in, a copy of its own: a path on the "
                    "submitter's machine, which the CLI and SDK pack and upload, sent as "
                    "{sha256, size} (docs/your-work.md)")
    git: GitSource | None = Field(
        default=None, description="A git commit every pod starts in, a clone of its own "
                                  "(the other source of code than workdir)")

    @model_validator(mode="before")
    @classmethod
    def _name_from_prefix(cls, data: object) -> object:
        if isinstance(data, dict) and not data.get("name"):
            prefix = data.get("generateName", data.get("generate_name"))
            if isinstance(prefix, str) and prefix:
                # A bad prefix makes no name: the error is then generateName's alone.
                name = generated_name(prefix) if GENERATE_NAME.fullmatch(prefix) else "x"
                return {**data, "name": name}
        return data

    @model_validator(mode="after")
    def _bounded(self, info: ValidationInfo) -> JobSpec:
        if from_store(info):
            return self
        parts: list[tuple[int, tuple[str | int, ...]]] = [
            (sum(len(k) + len(v) for k, v in self.labels.items()), ("labels",))]
        for i, pod_set in enumerate(self.pod_sets):
            parts.append((sum(len(arg) for arg in pod_set.command), ("podSets", i, "command")))
            parts.append((sum(len(k) + len(v) for k, v in pod_set.env.items()),
                          ("podSets", i, "env")))
        size = sum(part for part, _ in parts)
        if size > MAX_JOB_SPEC_BYTES:
            # Named: the biggest part, the one whose shrinking helps most.
            biggest = max(parts, key=lambda part: part[0])[1]
            raise field_error(
                f"the pod sets' commands, env and the labels hold {size} characters, above "
                f"the limit of {MAX_JOB_SPEC_BYTES} per job; pass large data as a file "
                "(a volume, the checkpoint directory), not in the job spec", *biggest)
        return self

    @field_validator("pod_sets")
    @classmethod
    def _unique_pod_sets(cls, value: list[PodSet]) -> list[PodSet]:
        # A field's validator, so the refusal names podSets.
        names = [p.name for p in value]
        if len(set(names)) != len(names):
            raise ValueError("two podSets share a name; give each pod set its own name")
        return value

    @model_validator(mode="after")
    def _one_kind_one_source(self) -> JobSpec:
        if self.ray is not None and self.kind is not JobKind.RAY:
            raise field_error(f"ray is set on a job of kind {self.kind.value!r}; set kind: "
                              "ray, or remove ray", "ray")
        if self.workdir is not None and self.git is not None:
            raise field_error("both workdir and git are set; a job's code comes from one "
                              "source: remove one of them", "git")
        return self

    def secret_refs(self) -> list[tuple[str, str]]:
        """Every secret the job names, with the field that names it, in spec order."""
        refs: list[tuple[str, str]] = [
            (v.secret.secret_name, f"volumes[{i}].secret.secretName")
            for i, v in enumerate(self.volumes) if v.secret is not None]
        if self.git is not None and self.git.ssh_key_secret is not None:
            refs.append((self.git.ssh_key_secret, "git.sshKeySecret"))
        for i, p in enumerate(self.pod_sets):
            refs += [(e.secret, f"podSets[{i}].envFrom[{j}].secret")
                     for j, e in enumerate(p.env_from)]
            refs += [(e.value_from.secret_key_ref.name,
                      f"podSets[{i}].secretEnv[{j}].valueFrom.secretKeyRef.name")
                     for j, e in enumerate(p.secret_env)]
            refs += [(s.name, f"podSets[{i}].imagePullSecrets[{j}].name")
                     for j, s in enumerate(p.image_pull_secrets)]
        return refs

    @field_validator("volumes")
    @classmethod
    def _mounted_volumes_listed(cls, value: list[Volume], info: ValidationInfo,
                                ) -> list[Volume]:
        check_volumes(value, info.data.get("pod_sets", []))
        return value

    @field_validator("depends_on")
    @classmethod
    def _dependencies_named_once(cls, value: list[Dependency], info: ValidationInfo,
                                 ) -> list[Dependency]:
        seen: set[str] = set()
        for dep in value:
            if dep.job == info.data.get("name"):
                raise ValueError(f"the job depends on itself; remove {dep.job!r} from dependsOn")
            if dep.job in seen:
                raise ValueError(f"job {dep.job!r} is named twice; name each job once")
            seen.add(dep.job)
        return value

    @property
    def pod_count(self) -> int:
        return sum(p.replicas for p in self.pod_sets)

    @property
    def keeps_checkpoints(self) -> bool:
        return self.checkpoint is not None and self.checkpoint.keep


ConfigObject = (ResourceFlavor | Cohort | ClusterQueue | LocalQueue | PriorityClass
                | ProvisioningPolicy)
