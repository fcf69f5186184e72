"""The kinds Kubernetes-native admission manages, each described by a small adapter.

Phalanx holds, admits and stops every managed kind the same way (``compute/kubernetes/
native.py``); what differs between kinds is only where things are in the object, and each
adapter says that: the resource (group, version, plural) it is served as, where its
``suspend`` lives, where its pod templates are (each gets the admitted gang's node pinning
and tolerations), the fields of its spec the API server or the kind's own webhook sets
(dropped before the object is translated as ``submit -f`` translates it), and how to read
its status (running, succeeded, failed). ``NATIVE_KINDS`` is the table built from the
adapters; the webhook, the informers and the render's RBAC all come from it. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from phalanx.errors import SpecError
from phalanx.spec.manifests import appwrapper, batch, jobset, kubeflow, ray

Object = Mapping[str, Any]
# A path into an object: keys of mappings and indexes of lists.
Path = tuple[str | int, ...]

SUCCEEDED, FAILED = "Succeeded", "Failed"


@dataclass(frozen=True, slots=True)
class Progress:
    """What an object's status says of its pods: finished (``SUCCEEDED``/``FAILED``, with
    a reason) or not; how many of its pods run (``all_running``: every one)."""

    finished: str | None = None
    reason: str = ""
    running: int = 0
    all_running: bool = False
    started: str | None = None  # RFC 3339, when the status says
    completed: str | None = None


def at(obj: Any, path: Path) -> Any:
    """The value at ``path`` in ``obj``, None where the path leads nowhere."""
    for step in path:
        if isinstance(step, int):
            obj = obj[step] if isinstance(obj, list) and -len(obj) <= step < len(obj) else None
        else:
            obj = obj.get(step) if isinstance(obj, Mapping) else None
    return obj


def _conditions(status: Object) -> dict[str, Object]:
    """The conditions that hold (status True), by type."""
    return {str(c.get("type")): c for c in status.get("conditions") or []
            if isinstance(c, Mapping) and c.get("status") == "True"}


def _finished_by(status: Object, succeeded: str, failed: str) -> Progress | None:
    held = _conditions(status)
    if succeeded in held:
        return Progress(SUCCEEDED, str(held[succeeded].get("reason") or succeeded))
    if failed in held:
        return Progress(FAILED, str(held[failed].get("reason") or failed))
    return None


class NativeKind:
    """One managed kind. Subclasses set the class attributes and override what differs."""

    api_version: ClassVar[str]
    kind: ClassVar[str]
    plural: ClassVar[str]
    builtin: ClassVar[bool] = False  # served by every API server: no discovery needed
    suspend: ClassVar[Path] = ("spec", "suspend")
    # Fields of ``spec`` the API server (or the kind's own defaulting webhook) sets, or
    # Phalanx wrote: no part of what the author asked.
    cluster_set: ClassVar[tuple[str, ...]] = ("suspend",)
    # For a kind whose templates may not change (its webhook refuses it): where it takes
    # Kueue's PodSetInfos (labels, tolerations, one per pod template) to apply to its pods
    # instead. None: Phalanx edits the templates themselves.
    pod_set_infos: ClassVar[Path | None] = None

    @property
    def key(self) -> tuple[str, str]:
        return self.api_version, self.kind

    def check(self, obj: Object) -> None:
        """Refuse (SpecError naming the field) what can be submitted but not managed
        natively; nothing by default."""

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0]

    @property
    def version(self) -> str:
        return self.api_version.rpartition("/")[2]

    def collection(self, namespace: str | None = None) -> str:
        """The API path of this kind's objects, cluster-wide or in ``namespace``."""
        base = f"/apis/{self.api_version}"
        return f"{base}/namespaces/{namespace}/{self.plural}" if namespace else \
            f"{base}/{self.plural}"

    def templates(self, obj: Object) -> list[Path]:
        """The paths of the object's pod templates (``PodTemplateSpec``s), in order."""
        raise NotImplementedError

    def pod_sets(self, obj: Object) -> list[str]:
        """The name of the Phalanx pod set each pod template becomes (as the translation in
        ``phalanx.spec.manifests`` names it), in the order of ``templates``."""
        raise NotImplementedError

    def progress(self, obj: Object) -> Progress:
        """What the object's status says (``status`` as its controller writes it)."""
        raise NotImplementedError

    def strip(self, manifest: dict[str, Any]) -> None:
        """Drop from ``manifest`` (a copy) what the cluster set beyond ``cluster_set``."""

    def suspended(self, obj: Object) -> bool:
        return bool(at(obj, self.suspend))


class JobKind(NativeKind):
    api_version, kind, plural = batch.API_VERSION, batch.KIND, "jobs"
    builtin = True
    cluster_set = ("suspend", "selector", "manualSelector", "podReplacementPolicy")
    # The Job's own labels the API server puts on its pod template.
    TEMPLATE_LABELS = ("batch.kubernetes.io/controller-uid", "controller-uid",
                       "batch.kubernetes.io/job-name", "job-name")

    def templates(self, obj: Object) -> list[Path]:
        return [("spec", "template")]

    def pod_sets(self, obj: Object) -> list[str]:
        return [batch.POD_SET]

    def progress(self, obj: Object) -> Progress:
        status = obj.get("status") or {}
        started, completed = status.get("startTime"), status.get("completionTime")
        done = _finished_by(status, "Complete", "Failed")
        if done is not None:
            return Progress(done.finished, done.reason, started=started, completed=completed)
        running = int(status.get("ready") or 0) or int(status.get("active") or 0)
        return Progress(running=running, started=started)

    def strip(self, manifest: dict[str, Any]) -> None:
        labels = at(manifest, ("spec", "template", "metadata", "labels"))
        if isinstance(labels, dict):
            for key in self.TEMPLATE_LABELS:
                labels.pop(key, None)
            if not labels:
                manifest["spec"]["template"]["metadata"].pop("labels")


class JobSetKind(NativeKind):
    """Child Jobs' pods are counted from ``replicatedJobsStatus`` (ready Jobs x their
    parallelism). JobSet's webhook defaults ``network`` (DNS hostnames) and each child
    template's ``podReplacementPolicy``; the pods its controller makes honour them."""

    api_version, kind, plural = jobset.API_VERSION, jobset.KIND, "jobsets"
    cluster_set = ("suspend", "network", "managedBy")

    def templates(self, obj: Object) -> list[Path]:
        jobs = at(obj, ("spec", "replicatedJobs")) or []
        return [("spec", "replicatedJobs", i, "template", "spec", "template")
                for i in range(len(jobs))]

    def pod_sets(self, obj: Object) -> list[str]:
        return [str(at(job, ("name",))) for job in at(obj, ("spec", "replicatedJobs")) or []]

    def progress(self, obj: Object) -> Progress:
        status = obj.get("status") or {}
        done = _finished_by(status, "Completed", "Failed")
        if done is not None:
            return done
        per_job = {str(r.get("name")): int(at(r, ("template", "spec", "parallelism")) or 1)
                   for r in at(obj, ("spec", "replicatedJobs")) or [] if isinstance(r, Mapping)}
        running = sum(int(r.get("ready") or 0) * per_job.get(str(r.get("name")), 1)
                      for r in status.get("replicatedJobsStatus") or [] if isinstance(r, Mapping))
        return Progress(running=running)

    def strip(self, manifest: dict[str, Any]) -> None:
        for path in self.templates(manifest):
            job_spec = at(manifest, path[:-1])
            if isinstance(job_spec, dict):
                job_spec.pop("podReplacementPolicy", None)


class KubeflowKind(NativeKind):
    """The training operator's jobs: ``runPolicy.suspend``; conditions ``Succeeded`` and
    ``Failed``; ``replicaStatuses`` counts the active pods of each replica type."""

    suspend = ("spec", "runPolicy", "suspend")
    cluster_set = ()
    replicas_key: ClassVar[str]
    roles: ClassVar[tuple[str, ...]]

    def templates(self, obj: Object) -> list[Path]:
        specs = at(obj, ("spec", self.replicas_key)) or {}
        return [("spec", self.replicas_key, role, "template") for role in self.roles
                if role in specs]

    def pod_sets(self, obj: Object) -> list[str]:
        return [str(path[2]).lower() for path in self.templates(obj)]

    def progress(self, obj: Object) -> Progress:
        status = obj.get("status") or {}
        done = _finished_by(status, "Succeeded", "Failed")
        if done is not None:
            return done
        active = sum(int(r.get("active") or 0) for r in (status.get("replicaStatuses") or {})
                     .values() if isinstance(r, Mapping))
        return Progress(running=active, started=status.get("startTime"))

    def strip(self, manifest: dict[str, Any]) -> None:
        policy = at(manifest, ("spec", "runPolicy"))
        if isinstance(policy, dict):
            policy.pop("suspend", None)


class PyTorchJobKind(KubeflowKind):
    """The operator's defaulting gives each replica's ``pytorch`` container the port
    ``pytorchjob-port`` (its rendezvous): dropped, as the operator sets it."""

    api_version, kind = kubeflow.PYTORCH
    plural, replicas_key, roles = "pytorchjobs", "pytorchReplicaSpecs", ("Master", "Worker")
    DEFAULT_PORT = "pytorchjob-port"

    def strip(self, manifest: dict[str, Any]) -> None:
        super().strip(manifest)
        for path in self.templates(manifest):
            for container in at(manifest, (*path, "spec", "containers")) or []:
                if not isinstance(container, dict) or not isinstance(container.get("ports"),
                                                                     list):
                    continue
                container["ports"] = [p for p in container["ports"]
                                      if not (isinstance(p, Mapping)
                                              and p.get("name") == self.DEFAULT_PORT)]
                if not container["ports"]:
                    del container["ports"]


class MPIJobKind(KubeflowKind):
    api_version, kind = kubeflow.MPI
    plural, replicas_key, roles = "mpijobs", "mpiReplicaSpecs", ("Launcher", "Worker")

    def check(self, obj: Object) -> None:
        """Its launcher made only once the workers run would never be made: the workers
        stay gated until the whole gang, launcher included, exists."""
        policy = (obj.get("spec") or {}).get("launcherCreationPolicy")
        if policy == "WaitForWorkersReady":
            raise SpecError("is WaitForWorkersReady: the workers of a managed MPIJob stay "
                            "gated until the whole gang exists, its launcher included, so "
                            "that launcher would never be made",
                            field="spec.launcherCreationPolicy",
                            fix="remove it, or set it to AtStartup (the default)")


class RayClusterKind(NativeKind):
    """The head group and each worker group; ``status.state: ready`` is every pod up. A
    RayCluster never finishes: it runs until it is deleted or preempted."""

    api_version, kind, plural = ray.API_VERSION, ray.RAY_CLUSTER, "rayclusters"
    prefix: ClassVar[Path] = ("spec",)

    def templates(self, obj: Object) -> list[Path]:
        groups = at(obj, (*self.prefix, "workerGroupSpecs")) or []
        return [(*self.prefix, "headGroupSpec", "template"),
                *[(*self.prefix, "workerGroupSpecs", i, "template") for i in range(len(groups))]]

    def pod_sets(self, obj: Object) -> list[str]:
        groups = at(obj, (*self.prefix, "workerGroupSpecs")) or []
        return [ray.HEAD, *[str(at(group, ("groupName",))) for group in groups]]

    def progress(self, obj: Object) -> Progress:
        status = obj.get("status") or {}
        if str(status.get("state") or "").lower() == "ready":
            return Progress(all_running=True)
        return Progress(running=int(status.get("readyWorkerReplicas") or 0))


class RayJobKind(RayClusterKind):
    """Its cluster's templates under ``rayClusterSpec``; finished by ``jobStatus``."""

    kind, plural = ray.RAY_JOB, "rayjobs"
    prefix = ("spec", "rayClusterSpec")

    def progress(self, obj: Object) -> Progress:
        status = obj.get("status") or {}
        job, deployment = status.get("jobStatus"), status.get("jobDeploymentStatus")
        if job == "SUCCEEDED":
            return Progress(SUCCEEDED, "SUCCEEDED")
        if job in ("FAILED", "STOPPED") or deployment == "Failed":
            return Progress(FAILED, str(status.get("reason") or job or deployment))
        return Progress(all_running=deployment == "Running")


class AppWrapperKind(NativeKind):
    """The templates are those of the one wrapped object, found by its own kind's adapter;
    ``status.phase`` says the rest. Its webhook keeps the component immutable, so what
    Phalanx adds goes in the component's ``podSetInfos``, as Kueue's does; a PodSetInfo has
    no node affinity, so its pods are not pinned to the placed nodes."""

    api_version, kind, plural = appwrapper.API_VERSION, appwrapper.KIND, "appwrappers"
    WRAPPED: ClassVar[Path] = ("spec", "components", 0, "template")
    pod_set_infos = ("spec", "components", 0, "podSetInfos")

    def templates(self, obj: Object) -> list[Path]:
        inner = at(obj, self.WRAPPED)
        wrapped = kind_of(inner) if isinstance(inner, Mapping) else None
        if wrapped is None or isinstance(wrapped, AppWrapperKind):
            return []
        return [(*self.WRAPPED, *path) for path in wrapped.templates(inner)]

    def pod_sets(self, obj: Object) -> list[str]:
        inner = at(obj, self.WRAPPED)
        wrapped = kind_of(inner) if isinstance(inner, Mapping) else None
        if wrapped is None or isinstance(wrapped, AppWrapperKind):
            return []
        return wrapped.pod_sets(inner)

    def progress(self, obj: Object) -> Progress:
        phase = str((obj.get("status") or {}).get("phase") or "")
        if phase in (SUCCEEDED, FAILED):
            return Progress(phase, phase)
        return Progress(all_running=phase == "Running")


NATIVE_KINDS: dict[tuple[str, str], NativeKind] = {
    k.key: k for k in (JobKind(), JobSetKind(), PyTorchJobKind(), MPIJobKind(),
                       RayClusterKind(), RayJobKind(), AppWrapperKind())}


def kind_of(obj: Object) -> NativeKind | None:
    """The adapter of ``obj``'s kind, None for a kind not managed natively."""
    return NATIVE_KINDS.get((str(obj.get("apiVersion") or ""), str(obj.get("kind") or "")))


def owned_by_managed(obj: Object) -> bool:
    """Whether a managed kind's object controls ``obj`` (a JobSet's Jobs, a RayJob's
    RayCluster, an AppWrapper's workload): the owner is what is queued, not this."""
    for owner in (obj.get("metadata") or {}).get("ownerReferences") or []:
        if isinstance(owner, Mapping) and owner.get("controller") and (
                str(owner.get("apiVersion")), str(owner.get("kind"))) in NATIVE_KINDS:
            return True
    return False
