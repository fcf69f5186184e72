"""What every manifest kind shares: reading a document strictly, field by field, with its path,
and turning pod templates into pod sets.

A manifest is read through ``Fields``: each kind takes the fields it has a meaning for, and
``Fields.done`` refuses every field left, naming its path in the manifest
(``spec.pytorchReplicaSpecs.Worker.template.spec.containers[0].ports``) and saying what to
do instead. Fields Kubernetes sets on stored objects are ignored, as ``kubectl apply`` does.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from phalanx.errors import PhalanxError, SpecError
from phalanx.spec.base import validate
from phalanx.spec.manifests import podspec
from phalanx.spec.manifests.podspec import PodParts
from phalanx.spec.resources import JobSpec

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
# The job's workdir: a directory of the submitter's (the CLI and SDK pack and upload it,
# relative to the manifest's file), or, as they send it, the archive as JSON
# ({"sha256": ..., "size": ...}).
WORKDIR_ANNOTATION = "phalanx.dev/workdir"

# Set by Kubernetes on objects it stores; a manifest exported with kubectl carries them.
SERVER_SET_METADATA = frozenset({
    "uid", "resourceVersion", "creationTimestamp", "managedFields", "generation", "selfLink",
    "deletionTimestamp", "deletionGracePeriodSeconds",
})
SERVER_SET = frozenset({"status"})

# Fields Phalanx refuses for good, with what it does instead.
REFUSED: dict[str, str] = {
    "ports": "remove ports: Phalanx assigns each pod's ports and passes them in the "
             "environment (MASTER_PORT, PHALANX_MASTER_PORT)",
    "initContainers": "remove initContainers: a Phalanx pod runs one container; run the "
                      "setup at the start of the container's command",
    "affinity": "remove affinity: place pods with nodeSelector, tolerations, and the queue's "
                "flavors; keep a gang together with a topology constraint",
    "livenessProbe": "remove the probe: Phalanx watches the pod's process and its node's "
                     "health",
    "readinessProbe": "remove the probe: a Phalanx job is ready when all its pods run",
    "startupProbe": "remove the probe: a Phalanx job is ready when all its pods run",
    "hostNetwork": "remove it: pods reach each other at PHALANX_NODE_IPS",
    "network": "remove network: pods reach each other at PHALANX_NODE_IPS and the leader "
               "at MASTER_ADDR, not by DNS names",
    "suspend": "remove suspend: a submitted job waits in its queue until admitted",
}


def key_path(path: str, key: str) -> str:
    """``path.key``, or ``path["key"]`` for a key that is no identifier (a label)."""
    if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_-]*", key):
        return f"{path}.{key}" if path else key
    return f'{path}["{key}"]'


class Fields:
    """One mapping of a manifest at ``path``, read field by field; ``done`` refuses the rest."""

    def __init__(self, data: object, path: str) -> None:
        if not isinstance(data, dict):
            raise SpecError(f"must be a mapping, not {type(data).__name__}", field=path or None,
                            fix="write the object as `key: value` lines")
        self.data: dict[str, Any] = data
        self.path = path
        self._read: set[str] = set()

    def at(self, key: str) -> str:
        return key_path(self.path, key)

    def has(self, key: str) -> bool:
        return key in self.data

    def take(self, key: str, kind: type | tuple[type, ...] = object, default: Any = None) -> Any:
        self._read.add(key)
        value = self.data.get(key, default)
        if value is None:
            return default
        if kind is int and isinstance(value, bool):
            kind = ()
        if not isinstance(value, kind):
            names = {"str": "string", "int": "integer", "float": "number", "bool": "boolean",
                     "dict": "mapping", "list": "list"}
            kinds = kind if isinstance(kind, tuple) else (kind,)
            wanted = " or ".join(names.get(k.__name__, k.__name__) for k in kinds) or "integer"
            raise SpecError(f"must be {_article(wanted)}, not {type(value).__name__}",
                            field=self.at(key), fix=f"give {_article(wanted)}")
        return value

    def fields(self, key: str) -> Fields | None:
        value = self.take(key)
        return None if value is None else Fields(value, self.at(key))

    def items(self, key: str) -> list[Fields]:
        value = self.take(key, list, [])
        return [Fields(item, f"{self.at(key)}[{i}]") for i, item in enumerate(value)]

    def ignore(self, *keys: str) -> None:
        self._read.update(keys)

    def refuse(self, key: str, message: str, fix: str) -> SpecError:
        return SpecError(message, field=self.at(key), fix=fix)

    def done(self) -> None:
        for key in self.data:
            if key in self._read:
                continue
            if key in REFUSED:
                raise SpecError("cannot be honoured by Phalanx", field=self.at(key),
                                fix=REFUSED[key])
            raise SpecError("has no meaning for Phalanx", field=self.at(key),
                            fix="remove it (docs/manifests.md lists the fields Phalanx takes)")


def _article(word: str) -> str:
    return word if word.startswith("a ") else f"{'an' if word[0] in 'aeiou' else 'a'} {word}"


@dataclass
class Draft:
    """A Phalanx job being made from a manifest: its wire document, where each of its fields
    came from in the manifest, and notes on what was made of fields Phalanx reads its own way."""

    doc: dict[str, Any] = field(default_factory=dict)
    paths: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    min_available: tuple[int, str] | None = None  # a gang size the manifest asks for

    def set(self, key: str, value: Any, path: str) -> None:
        self.doc[key] = value
        self.paths[key] = path

    def note(self, path: str, text: str) -> None:
        self.notes.append(f"{path}: {text}")

    def add_volume(self, name: str, volume: dict[str, Any], path: str) -> None:
        """One of the job's volumes, from a pod template at ``path``: a name other templates
        gave too must mean the same volume there."""
        volumes: list[dict[str, Any]] = self.doc.setdefault("volumes", [])
        for k, known in enumerate(volumes):
            if known["name"] != name:
                continue
            if known != volume:
                raise SpecError(
                    f"defines volume {name!r} otherwise than {self.paths[f'volumes[{k}]']}",
                    field=path, fix="give the two volumes different names, or define them "
                    "alike (a job's volumes are shared by name across its pod sets)")
            return
        self.paths[f"volumes[{len(volumes)}]"] = path
        volumes.append(volume)

    @property
    def pod_sets(self) -> list[dict[str, Any]]:
        pod_sets: list[dict[str, Any]] = self.doc.setdefault("podSets", [])
        return pod_sets

    def manifest_path(self, job_field: str) -> str:
        """Where in the manifest the job's field ``job_field`` came from (its longest known
        prefix, the rest kept: ``podSets[1].resources.cpu`` -> ``...resources.cpu``)."""
        best = ""
        for known in self.paths:
            if (job_field == known or job_field.startswith((known + ".", known + "["))) \
                    and len(known) > len(best):
                best = known
        if not best:
            return job_field
        return self.paths[best] + job_field[len(best):]

    def error_at_manifest(self, exc: PhalanxError) -> PhalanxError:
        """``exc`` about the job, re-aimed at the manifest's field."""
        if exc.field is None:
            return exc
        return type(exc)(exc.message, field=self.manifest_path(exc.field), fix=exc.fix)

    def job_spec(self) -> JobSpec:
        try:
            return validate(JobSpec, self.doc)
        except SpecError as exc:
            raise self.error_at_manifest(exc) from None


# --------------------------------------------------------------------------- common parts
def metadata(manifest: Fields, draft: Draft) -> Fields:
    """The job's name, labels, queue (the Kueue label) and priority from ``metadata``."""
    meta = manifest.fields("metadata")
    if meta is None:
        raise manifest.refuse("metadata", "is missing", "give metadata.name")
    name = meta.take("name", str)
    if name is None:
        raise meta.refuse("name", "is missing", "give the job a name (generateName is not "
                          "supported: a Phalanx job's name is how you find it)")
    draft.set("name", name, meta.at("name"))
    labels = meta.take("labels", dict, {})
    if labels:
        draft.set("labels", dict(labels), meta.at("labels"))
    if QUEUE_LABEL in labels:
        draft.set("queue", labels[QUEUE_LABEL], key_path(meta.at("labels"), QUEUE_LABEL))
    if PRIORITY_LABEL in labels:
        draft.set("priority", labels[PRIORITY_LABEL],
                  key_path(meta.at("labels"), PRIORITY_LABEL))
    namespace = meta.take("namespace", str)
    if namespace:
        draft.note(meta.at("namespace"), f"{namespace!r} is recorded; the job's queue is "
                   f"its {QUEUE_LABEL} label")
    annotations = meta.take("annotations", dict, {})
    if WORKDIR_ANNOTATION in annotations:
        draft.set("workdir", workdir_of(annotations[WORKDIR_ANNOTATION]),
                  key_path(meta.at("annotations"), WORKDIR_ANNOTATION))
    meta.ignore("generateName", "ownerReferences", "finalizers", *SERVER_SET_METADATA)
    meta.done()
    manifest.ignore("apiVersion", "kind", *SERVER_SET)
    return meta


def workdir_of(annotation: object) -> object:
    """The job's ``workdir`` from the annotation's text: the archive's JSON, or a path."""
    if isinstance(annotation, str) and annotation.lstrip().startswith("{"):
        try:
            return json.loads(annotation)
        except ValueError:
            pass  # a path, then, refused as one that is not the submitter's
    return annotation


def unsuspended(fields: Fields) -> None:
    """``suspend: false`` says nothing; ``suspend: true`` is refused (``REFUSED``)."""
    if fields.data.get("suspend") is False:
        fields.ignore("suspend")


def seconds(value: int, path: str) -> int:
    if value < 0:
        raise SpecError("must be 0 or more seconds", field=path, fix="give a number of seconds")
    return value


def active_deadline(fields: Fields, draft: Draft) -> None:
    """``activeDeadlineSeconds`` (Job, RayJob, Kubeflow ``runPolicy``) is ``maxRuntime``."""
    deadline = fields.take("activeDeadlineSeconds", int)
    if deadline is not None:
        draft.set("maxRuntime", seconds(deadline, fields.at("activeDeadlineSeconds")),
                  fields.at("activeDeadlineSeconds"))


def backoff_limit(fields: Fields, draft: Draft) -> None:
    """``backoffLimit`` (RayJob, Kubeflow ``runPolicy``), when given, is ``restart.maxRestarts``."""
    backoff = fields.take("backoffLimit", int)
    if backoff is not None:
        draft.set("restart", {"maxRestarts": backoff}, fields.at("backoffLimit"))


def run_policy(policy: Fields | None, draft: Draft) -> None:
    """The Kubeflow operators' ``runPolicy`` (PyTorchJob, MPIJob)."""
    if policy is None:
        return
    active_deadline(policy, draft)
    backoff_limit(policy, draft)
    policy.take("cleanPodPolicy", str)  # a finished job's pods are always cleaned up
    policy.take("ttlSecondsAfterFinished", int)  # finished jobs follow the retention
    unsuspended(policy)
    scheduling = policy.fields("schedulingPolicy")
    if scheduling is not None:
        queue = scheduling.take("queue", str)
        if queue and "queue" not in draft.doc:
            draft.set("queue", queue, scheduling.at("queue"))
        priority = scheduling.take("priorityClass", str)
        if priority and "priority" not in draft.doc:
            draft.set("priority", priority, scheduling.at("priorityClass"))
        min_available = scheduling.take("minAvailable", int)
        if min_available is not None:  # checked against the gang once pods are counted
            draft.min_available = (min_available, scheduling.at("minAvailable"))
        scheduling.done()
    policy.done()


def check_min_available(draft: Draft) -> None:
    """A gang is all its pods: a minAvailable below that cannot be honoured."""
    if draft.min_available is None:
        return
    min_available, path = draft.min_available
    total = sum(p["replicas"] for p in draft.pod_sets)
    if min_available != total:
        raise SpecError(f"is {min_available} but the job has {total} pods", field=path,
                        fix=f"remove minAvailable or set it to {total}: Phalanx starts all "
                            "of a job's pods together")


@dataclass
class PodTemplate:
    """What a pod template says, as one pod set's fields."""

    command: list[str]
    image: str | None
    env: dict[str, str]
    resources: dict[str, Any]
    paths: dict[str, str]
    priority_class: tuple[str, str] | None = None
    grace: tuple[int, str] | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    parts: PodParts = field(default_factory=PodParts)


def pod_template(template: Fields, *, command: Callable[[Fields, list[str], list[str]],
                                                       list[str]] | None = None) -> PodTemplate:
    """A pod template's one container and scheduling fields. ``command`` decides what the
    container's command and args become (by default the two joined)."""
    template.fields("metadata")  # the pods' labels and annotations: not Phalanx's to use
    pod = template.fields("spec")
    if pod is None:
        raise template.refuse("spec", "is missing", "give the pod's spec with its container")
    parts = PodParts()
    podspec.read_volumes(pod, parts)
    podspec.read_pull_secrets(pod, parts)
    podspec.security_context(pod)
    containers = pod.items("containers")
    if not containers:
        raise pod.refuse("containers", "is empty", "give the pod one container")
    if len(containers) > 1:
        raise SpecError("is a second container; a Phalanx pod runs one",
                        field=containers[1].path, fix="run sidecars' work in the main "
                        "container, or as a pod set of its own")
    made = _container(containers[0], command, parts)
    extra: dict[str, Any] = {}
    selector = pod.take("nodeSelector", dict)
    if selector:
        extra["nodeSelector"] = selector
        made.paths["nodeSelector"] = pod.at("nodeSelector")
    tolerations = []
    for toleration in pod.items("tolerations"):
        kept = {k: v for k in ("key", "operator", "value", "effect")
                if (v := toleration.take(k)) is not None}
        toleration.done()
        tolerations.append(kept)
    if tolerations:
        extra["tolerations"] = tolerations
        made.paths["tolerations"] = pod.at("tolerations")
    made.extra.update(extra)  # beside the container's own (workingDir)
    account = pod.take("serviceAccountName", str)
    if account:  # allowed or refused by the Kubernetes plane (its list of accounts)
        made.extra["serviceAccountName"] = account
        made.paths["serviceAccountName"] = pod.at("serviceAccountName")
    priority_class = pod.take("priorityClassName", str)
    if priority_class:
        made.priority_class = (priority_class, pod.at("priorityClassName"))
    grace = pod.take("terminationGracePeriodSeconds", int)
    if grace is not None:
        made.grace = (seconds(grace, pod.at("terminationGracePeriodSeconds")),
                      pod.at("terminationGracePeriodSeconds"))
    pod.take("restartPolicy", str)  # a failed pod restarts the gang, under the job's budget
    pod.done()
    template.done()
    return made


def _container(container: Fields, command: Callable[[Fields, list[str], list[str]],
                                                     list[str]] | None,
               parts: PodParts) -> PodTemplate:
    paths = {"command": container.at("command"), "image": container.at("image"),
             "env": container.at("env"), "resources": container.at("resources"),
             "envFrom": container.at("envFrom"), "mounts": container.at("volumeMounts")}
    container.take("name", str)
    image = container.take("image", str)
    pull_policy = container.take("imagePullPolicy", str)
    given = [str(a) for a in container.take("command", list, [])]
    args = [str(a) for a in container.take("args", list, [])]
    if command is not None:
        run = command(container, given, args)
    elif args and not given:
        raise container.refuse(
            "args", "are given without command, so they go to the image's entrypoint",
            "give command too (the image's entrypoint), so the pod runs the same on every "
            "plane")
    else:
        run = given + args
    env: dict[str, str] = {}
    from_resources: list[podspec.ResourceRef] = []
    for item in container.items("env"):
        name = item.take("name", str)
        if name is None:
            raise item.refuse("name", "is missing", "name the variable")
        source = item.fields("valueFrom")
        if source is not None:
            if item.has("value"):
                raise item.refuse("value", "is given beside valueFrom",
                                  "give the variable a value or a valueFrom, not both")
            ref = podspec.value_from(name, source, parts)
            if ref is not None:
                from_resources.append(ref)
        else:
            env[name] = str(item.take("value", (str, int, float), ""))
        item.done()
    podspec.read_env_from(container, parts)
    podspec.read_mounts(container, parts)
    podspec.security_context(container)
    resources: dict[str, Any] = {}
    wanted = container.fields("resources")
    if wanted is not None:
        limits = wanted.take("limits", dict, {})
        requests = wanted.take("requests", dict, {})
        # As Kubernetes: a resource with only a limit requests its limit.
        resources = {**limits, **requests}
        if limits and not requests:
            paths["resources"] = wanted.at("limits")
        elif requests:
            paths["resources"] = wanted.at("requests")
        wanted.done()
    for ref in from_resources:
        env[ref.name] = podspec.resource_value(ref, resources)
    working_dir = container.take("workingDir", str)
    container.done()
    made = PodTemplate(command=run, image=image, env=env, resources=resources, paths=paths,
                       parts=parts)
    if working_dir:
        made.extra["workingDir"] = working_dir
        paths["workingDir"] = container.at("workingDir")
    if pull_policy:
        made.extra["imagePullPolicy"] = pull_policy
        paths["imagePullPolicy"] = container.at("imagePullPolicy")
    return made


def add_pod_set(draft: Draft, name: str, replicas: int, replicas_path: str,
                template_path: str, made: PodTemplate, env: dict[str, str] | None = None,
                index_env: dict[str, str] | None = None) -> None:
    """A pod set of ``replicas`` pods made from a template. ``index_env``: variables computed
    per pod from ``PHALANX_POD_INDEX`` by the shell (a Job's ``JOB_COMPLETION_INDEX``)."""
    if replicas < 1:
        raise SpecError(f"is {replicas}; a pod set runs 1 pod or more", field=replicas_path,
                        fix="give 1 or more replicas, or remove the pod set")
    command = made.command
    parts = made.parts
    if parts.pod_env and not command:
        name_, (_, path) = next(iter(parts.pod_env.items()))
        raise SpecError(f"sets {name_} in the pod's shell, and this pod runs no command of "
                        "its own", field=path, fix="read PHALANX_POD_NAME instead")
    shell_env = {**(index_env or {}), **{k: v for k, (v, _) in parts.pod_env.items()}}
    if shell_env and command:
        exports = "; ".join(f'export {k}="{v}"' for k, v in shell_env.items())
        command = ["/bin/sh", "-c", f'{exports}; exec "$@"', "sh", *command]
    i = len(draft.pod_sets)
    pod_set: dict[str, Any] = {"name": name, "replicas": replicas,
                               "env": {**(env or {}), **made.env}}
    if command:
        pod_set["command"] = command
    if made.image:
        pod_set["image"] = made.image
    if made.resources:
        pod_set["resources"] = made.resources
    pod_set.update(made.extra)
    draft.pod_sets.append(pod_set)
    draft.paths[f"podSets[{i}]"] = template_path
    draft.paths[f"podSets[{i}].name"] = template_path
    draft.paths[f"podSets[{i}].replicas"] = replicas_path
    for key, path in made.paths.items():
        draft.paths[f"podSets[{i}].{key}"] = path
    for key, items in (("secretEnv", parts.secret_env), ("envFrom", parts.env_from),
                       ("imagePullSecrets", parts.pull_secrets), ("mounts", parts.mounts)):
        if items:
            pod_set[key] = [item for item, _ in items]
        for j, (_, path) in enumerate(items):
            draft.paths[f"podSets[{i}].{key}[{j}]"] = path
    if parts.shm is not None:
        pod_set["shm"] = parts.shm[0]
        draft.paths[f"podSets[{i}].shm"] = parts.shm[1]
    for volume_name, volume, path in parts.mounted_volumes():
        draft.add_volume(volume_name, volume, path)
    for path in parts.unmounted():
        draft.note(path, "mounted by no container: left out")
    if made.priority_class and "priority" not in draft.doc:
        draft.set("priority", *made.priority_class)
    if made.grace and "terminationGrace" not in draft.doc:
        draft.set("terminationGrace", *made.grace)
