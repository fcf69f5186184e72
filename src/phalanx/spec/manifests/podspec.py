"""What a pod template's volumes, mounts, variables from secrets, pull secrets and security
context become, read strictly through ``base.Fields``.

- ``volumes`` become the job's volumes (phalanx.spec.volumes: the same fields, Kubernetes'
  spellings), ``volumeMounts`` the pod set's ``mounts``; a ``medium: Memory`` emptyDir with
  a ``sizeLimit`` mounted at ``/dev/shm`` is the pod set's ``shm``, as the KubeRay and
  training-operator docs write a bigger /dev/shm. Only the volumes some container mounts
  are carried; one name must mean one volume across the manifest's templates
  (``Draft.add_volume``).
- ``env[].valueFrom.secretKeyRef`` becomes ``secretEnv``, ``envFrom[].secretRef``
  ``envFrom``, ``imagePullSecrets`` the pod set's: each names a Phalanx secret.
- ``valueFrom.fieldRef: metadata.name`` is the pod's name (``PHALANX_POD_NAME``, set by a
  ``/bin/sh`` wrapper as a Job's completion index is); ``resourceFieldRef`` is computed
  from the container's resources, which Phalanx requests and limits alike.
- ``securityContext`` has no meaning in a Phalanx job (whom pods run as is the plane's):
  an empty one is taken, any setting refused, naming it.
"""

from __future__ import annotations

import math
import typing
from dataclasses import dataclass, field
from typing import Any

from phalanx.errors import SpecError
from phalanx.spec.quantity import parse_quantity
from phalanx.spec.secrets import ENV_NAME
from phalanx.spec.volumes import SHM_PATH, Volume, source_kinds

if typing.TYPE_CHECKING:
    from phalanx.spec.manifests.base import Fields

# Each source of phalanx.spec.volumes.Volume, by Kubernetes' name, with the fields it takes.
SOURCE_FIELDS: dict[str, tuple[str, ...]] = {}
for _attr, _info in Volume.model_fields.items():
    if _attr == "name":
        continue
    _model = next(a for a in typing.get_args(_info.annotation) if a is not type(None))
    SOURCE_FIELDS[_info.alias or _attr] = tuple(
        f.alias or n for n, f in _model.model_fields.items())

# Why a source field Kubernetes has is refused, and what to do instead.
SOURCE_FIELD_FIXES: dict[tuple[str, str], str] = {
    ("secret", "items"): "remove items: the secret's keys are all files of the volume (a "
                         "mount's subPath names one key)",
    ("secret", "defaultMode"): "remove defaultMode: a secret's files are 0400, the pod's own",
    ("secret", "optional"): "remove optional: a secret a job names must exist (submit checks "
                            "it)",
}
# Sources Kubernetes has and Phalanx does not, with what to use instead.
SOURCE_FIXES: dict[str, str] = {
    "csi": "mount the CSI driver's storage through a persistentVolumeClaim of its storage "
           "class",
    "ephemeral": "use an emptyDir, or a persistentVolumeClaim made beforehand",
    "projected": "mount each secret as a secret volume; Phalanx gives every pod its name "
                 "and the job's in PHALANX_POD_NAME and PHALANX_JOB",
    "downwardAPI": "read the pod's name and job from PHALANX_POD_NAME and PHALANX_JOB",
}
# Fields of a volumeMount Phalanx refuses, with what to do instead.
MOUNT_FIXES: dict[str, str] = {
    "mountPropagation": "remove it: a Phalanx pod's mounts are its own",
    "subPathExpr": "give subPath: a path in a mount is not expanded per pod",
    "recursiveReadOnly": "remove it; readOnly: true mounts the volume read-only",
}
# fieldRef paths Phalanx has a variable for, set per pod by the command's shell wrapper.
FIELD_REFS: dict[str, str] = {"metadata.name": "$PHALANX_POD_NAME"}
# resourceFieldRef's resources: Phalanx requests and limits a container alike.
RESOURCE_REFS = {f"{kind}.{name}": name for kind in ("requests", "limits")
                 for name in ("cpu", "memory", "ephemeral-storage")}
# Why a securityContext setting is refused.
SECURITY_FIX = ("remove securityContext: whom a Phalanx pod runs as is the compute plane's "
                "(on this machine `phalanx up --run-as-user` or `--pod-uids`; on Kubernetes "
                "the image's user), not the job's")


@dataclass
class PodParts:
    """A pod template's volumes, secrets and mounts, each with its path in the manifest."""

    volumes: dict[str, tuple[dict[str, Any], str]] = field(default_factory=dict)
    mounts: list[tuple[dict[str, Any], str]] = field(default_factory=list)
    shm: tuple[str, str] | None = None
    secret_env: list[tuple[dict[str, Any], str]] = field(default_factory=list)
    env_from: list[tuple[dict[str, Any], str]] = field(default_factory=list)
    pull_secrets: list[tuple[dict[str, Any], str]] = field(default_factory=list)
    # Variables the pod's shell sets (a fieldRef): name -> (shell expression, path).
    pod_env: dict[str, tuple[str, str]] = field(default_factory=dict)
    shm_volume: str = ""  # the volume that became shm

    def mounted_volumes(self) -> list[tuple[str, dict[str, Any], str]]:
        """The volumes some mount uses: (name, volume, path), in the template's order."""
        used = {mount["name"] for mount, _ in self.mounts}
        return [(name, volume, path) for name, (volume, path) in self.volumes.items()
                if name in used]

    def unmounted(self) -> list[str]:
        """The paths of the volumes no container mounts (and that did not become shm)."""
        used = {mount["name"] for mount, _ in self.mounts} | {self.shm_volume}
        return [path for name, (_, path) in self.volumes.items() if name not in used]


# --------------------------------------------------------------------------- volumes
def read_volumes(pod: Fields, parts: PodParts) -> None:
    """The pod's ``volumes``, by name; a name given twice is refused."""
    for item in pod.items("volumes"):
        name = item.take("name", str)
        if name is None:
            raise item.refuse("name", "is missing", "name the volume")
        if name in parts.volumes:
            raise item.refuse("name", f"{name!r} names a second volume of the pod",
                              "give each volume its own name")
        volume: dict[str, Any] = {"name": name}
        for kind in list(item.data):
            if kind == "name":
                continue
            if kind not in SOURCE_FIELDS:
                fix = SOURCE_FIXES.get(kind, "")
                raise item.refuse(kind, "is not a kind of volume Phalanx mounts",
                                  (fix + "; or use " if fix else "use ") + "one of "
                                  + ", ".join(source_kinds()))
            source = item.fields(kind)
            volume[kind] = {} if source is None else _source(kind, source)
        item.done()
        parts.volumes[name] = (volume, item.path)


def _source(kind: str, source: Fields) -> dict[str, Any]:
    for key in source.data:
        if key not in SOURCE_FIELDS[kind]:
            fix = SOURCE_FIELD_FIXES.get((kind, key)) or (
                f"remove it: {kind} takes " + ", ".join(SOURCE_FIELDS[kind]))
            raise source.refuse(key, "cannot be honoured by Phalanx", fix)
    source.ignore(*source.data)  # values are checked as the job's volume's
    return dict(source.data)


def read_mounts(container: Fields, parts: PodParts) -> None:
    """The container's ``volumeMounts``: each names a volume of the pod. A Memory emptyDir
    with a sizeLimit at /dev/shm becomes ``shm``."""
    for item in container.items("volumeMounts"):
        name = item.take("name", str)
        if name is None:
            raise item.refuse("name", "is missing", "name one of the pod's volumes")
        if name not in parts.volumes:
            known = ", ".join(parts.volumes) or "none"
            raise item.refuse("name", f"{name!r} is not a volume of the pod (its volumes: "
                              f"{known})", "add it to the pod's volumes or fix the name")
        mount: dict[str, Any] = {"name": name, "mountPath": item.take("mountPath", str)}
        if mount["mountPath"] is None:
            raise item.refuse("mountPath", "is missing", "give the path the pod sees it at")
        for key in ("readOnly", "subPath"):
            value = item.take(key, bool if key == "readOnly" else str)
            if value:
                mount[key] = value
        for key, fix in MOUNT_FIXES.items():
            if item.data.get(key) in (None, "", "None", "Disabled", False):
                item.ignore(key)  # the default says nothing
            elif key in item.data:
                raise item.refuse(key, "cannot be honoured by Phalanx", fix)
        item.done()
        size = _shm_size(parts.volumes[name][0], mount)
        if size is not None and parts.shm is None:
            parts.shm, parts.shm_volume = (size, item.path), name
            continue
        parts.mounts.append((mount, item.path))


def _shm_size(volume: dict[str, Any], mount: dict[str, Any]) -> str | None:
    """The size of the /dev/shm a mount makes, if it is ``shm``'s: a whole Memory emptyDir
    with a sizeLimit, writable, at /dev/shm (without a sizeLimit it stays a volume, which
    each plane sizes as Kubernetes does)."""
    empty_dir = volume.get("emptyDir")
    if mount["mountPath"].rstrip("/") != SHM_PATH or not isinstance(empty_dir, dict) \
            or mount.get("subPath") or mount.get("readOnly"):
        return None
    size = empty_dir.get("sizeLimit")
    return str(size) if empty_dir.get("medium") == "Memory" and size else None


# --------------------------------------------------------------------------- secrets
def read_env_from(container: Fields, parts: PodParts) -> None:
    for item in container.items("envFrom"):
        if item.has("configMapRef"):
            raise item.refuse(
                "configMapRef", "cannot be honoured by Phalanx: a job's pods get no "
                "ConfigMaps as variables", "store the variables in a Phalanx secret "
                "(phalanx secrets create NAME --from-literal K=V) and use secretRef, or "
                "give each under env")
        if item.has("prefix"):
            raise item.refuse("prefix", "cannot be honoured by Phalanx",
                              "remove prefix: a secret's keys become variables as they are "
                              "named (name the keys with the prefix)")
        ref = item.fields("secretRef")
        if ref is None:
            raise item.refuse("secretRef", "is missing", "name a secret: secretRef: {name: "
                              "NAME}")
        name = _secret_name(ref)
        item.done()
        parts.env_from.append(({"secret": name}, item.path))


def _secret_name(ref: Fields) -> str:
    name = ref.take("name", str)
    if not name:
        raise ref.refuse("name", "is missing", "name a Phalanx secret (phalanx secrets list)")
    if ref.take("optional", bool, False):
        raise ref.refuse("optional", "cannot be honoured by Phalanx",
                         "remove optional: a secret a job names must exist (submit checks it)")
    return name


def read_pull_secrets(pod: Fields, parts: PodParts) -> None:
    for item in pod.items("imagePullSecrets"):
        name = item.take("name", str)
        if not name:
            raise item.refuse("name", "is missing", "name a docker secret of Phalanx")
        item.done()
        parts.pull_secrets.append(({"name": name}, item.path))


# --------------------------------------------------------------------------- env
@dataclass
class ResourceRef:
    """A variable whose value is one of the container's resources, once they are read."""

    name: str
    resource: str
    divisor: object
    path: str


def value_from(name: str, source: Fields, parts: PodParts) -> ResourceRef | None:
    """A variable's ``valueFrom``: a secret's key, the pod's name, or a resource (returned,
    to be computed once the container's resources are read)."""
    kinds = list(source.data)
    if len(kinds) != 1:
        raise SpecError(f"gives {len(kinds)} sources", field=source.path,
                        fix="give one: secretKeyRef, fieldRef or resourceFieldRef")
    kind = kinds[0]
    if kind == "secretKeyRef":
        ref = source.fields(kind)
        assert ref is not None
        secret = _secret_name(ref)
        key = ref.take("key", str)
        if not key:
            raise ref.refuse("key", "is missing", "name the secret's key")
        ref.done()
        parts.secret_env.append(({"name": name, "valueFrom": {"secretKeyRef": {
            "name": secret, "key": key}}}, source.path.rsplit(".", 1)[0]))
        return None
    if kind == "fieldRef":
        ref = source.fields(kind)
        assert ref is not None
        path = ref.take("fieldPath", str)
        ref.take("apiVersion", str)
        ref.done()
        if path not in FIELD_REFS:
            raise ref.refuse("fieldPath", f"{path!r} has no meaning for Phalanx",
                             "use metadata.name, or read what Phalanx gives every pod: "
                             "PHALANX_POD_NAME, PHALANX_POD_INDEX, PHALANX_JOB, "
                             "PHALANX_NODE_IPS, RANK")
        if not ENV_NAME.fullmatch(name):
            raise SpecError(f"{name!r} is set by the pod's shell, so it must be a shell "
                            "variable's name", field=source.path,
                            fix="use letters, digits and '_', not starting with a digit")
        parts.pod_env[name] = (FIELD_REFS[path], ref.at("fieldPath"))
        return None
    if kind == "resourceFieldRef":
        ref = source.fields(kind)
        assert ref is not None
        resource = ref.take("resource", str)
        ref.take("containerName", str)  # a Phalanx pod runs one container
        divisor = ref.take("divisor", (str, int, float), 1)
        ref.done()
        if resource not in RESOURCE_REFS:
            raise ref.refuse("resource", f"{resource!r} is not a container resource",
                             "use one of " + ", ".join(RESOURCE_REFS))
        return ResourceRef(name, RESOURCE_REFS[resource], divisor, ref.at("resource"))
    if kind == "configMapKeyRef":
        raise source.refuse(kind, "cannot be honoured by Phalanx: a job's pods get no "
                            "ConfigMaps as variables", "give the variable a value, or store "
                            "it in a Phalanx secret and use secretKeyRef")
    raise source.refuse(kind, "has no meaning for Phalanx",
                        "give the variable a value, or use secretKeyRef, fieldRef or "
                        "resourceFieldRef")


def resource_value(ref: ResourceRef, resources: dict[str, Any]) -> str:
    """A resourceFieldRef's value, as Kubernetes computes it: the resource divided by the
    divisor, rounded up."""
    if ref.resource not in resources:
        raise SpecError(f"names {ref.resource}, which the container does not request",
                        field=ref.path, fix=f"give the container a {ref.resource} request, or "
                        "give the variable a value")
    amount = parse_quantity(resources[ref.resource], ref.path)
    divisor = parse_quantity(ref.divisor, ref.path.rsplit(".", 1)[0] + ".divisor")
    if divisor <= 0:
        raise SpecError("is not above 0", field=ref.path.rsplit(".", 1)[0] + ".divisor",
                        fix="give a divisor such as 1, 1m or 1Mi")
    return str(math.ceil(amount / divisor))


# --------------------------------------------------------------------------- security
def security_context(owner: Fields) -> None:
    """An empty ``securityContext`` says nothing; any setting is refused, naming it."""
    context = owner.fields("securityContext")
    if context is None:
        return
    for key, value in context.data.items():
        if value in (None, {}, []):
            context.ignore(key)
            continue
        raise context.refuse(key, "cannot be honoured by Phalanx", SECURITY_FIX)
    context.done()
