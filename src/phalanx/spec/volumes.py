"""Volumes of a job and the mounts of its pod sets, spelled as Kubernetes spells them.

A job lists ``volumes`` (each a name and exactly one source: ``emptyDir``, ``hostPath``,
``persistentVolumeClaim``, ``configMap``, ``secret``, ``nfs``); a pod set lists
``mounts`` (Kubernetes' ``volumeMounts``, accepted under that name too) and may ask for
``shm: 16Gi``, a ``/dev/shm`` of that size. Every source's fields are the Kubernetes
API's, so a volume written for a Kubernetes pod reads the same here, but for
``secret.secretName``, which names a Phalanx secret (phalanx.spec.secrets). What each
compute plane makes of a source is the plane's (docs/your-work.md: "Data and memory");
a plane that cannot honour one refuses the job at submit, naming the field.

A source is one optional field of ``Volume``: adding a kind is one field here (its model
and its name) and, on each plane, one entry in that plane's table of sources.
"""

from __future__ import annotations

import posixpath
import re
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, model_validator

from phalanx.spec.base import Model, Quantity
from phalanx.spec.secrets import SecretRef

# The names of volumes the planes add themselves (checkpoints, the API credential, shm).
RESERVED_PREFIX = "phalanx-"
SHM_PATH = "/dev/shm"
SHM_VOLUME = "phalanx-shm"


def _dns_label(value: str) -> str:
    if not re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", value) or len(value) > 63:
        raise ValueError(f"{value!r} is not a volume name; use at most 63 lowercase letters, "
                         "digits and '-', starting and ending with a letter or digit")
    if value.startswith(RESERVED_PREFIX):
        raise ValueError(f"{value!r} starts with {RESERVED_PREFIX!r}, which names the volumes "
                         "Phalanx adds itself; choose another name")
    return value


def _absolute(value: str) -> str:
    if not value.startswith("/") or "\x00" in value:
        raise ValueError(f"{value!r} is not an absolute path; give a path starting with '/'")
    return posixpath.normpath(value) if value != "/" else value


def _relative(value: str) -> str:
    parts = value.split("/")
    if value.startswith("/") or ".." in parts or "\x00" in value:
        raise ValueError(f"{value!r} must be a relative path without '..'; give a path inside "
                         "the volume, e.g. data/train")
    return value


VolumeName = Annotated[str, AfterValidator(_dns_label)]
AbsolutePath = Annotated[str, AfterValidator(_absolute)]
RelativePath = Annotated[str, AfterValidator(_relative)]


class EmptyDirSource(Model):
    """A directory of the pod's own, empty when the pod starts and gone when it ends."""

    medium: Literal["", "Memory"] = Field(
        default="", description="Memory: a tmpfs (counted as the pod's memory on Kubernetes)")
    size_limit: Quantity | None = Field(
        default=None, description="The most the volume may hold, e.g. 16Gi")


class HostPathSource(Model):
    """A file or directory of the machine the pod runs on."""

    path: AbsolutePath
    type: Literal["", "DirectoryOrCreate", "Directory", "FileOrCreate", "File", "Socket",
                  "CharDevice", "BlockDevice"] = Field(
        default="", description="What must be at path (Kubernetes' hostPath types)")


class PersistentVolumeClaimSource(Model):
    claim_name: VolumeName = Field(description="A PersistentVolumeClaim of the pods' namespace")
    read_only: bool = False


class KeyToPath(Model):
    key: str = Field(min_length=1)
    path: RelativePath = Field(min_length=1)
    mode: int | None = Field(default=None, ge=0, le=0o777)


class ConfigMapSource(Model):
    name: VolumeName = Field(description="A ConfigMap of the pods' namespace")
    items: list[KeyToPath] = Field(default_factory=list)
    default_mode: int | None = Field(default=None, ge=0, le=0o777)
    optional: bool | None = None


class SecretSource(Model):
    """A Phalanx secret's keys as files (0400, the pod's own), read-only wherever mounted."""

    secret_name: SecretRef = Field(description="A secret of the submitter or of one of their "
                                   "teams: NAME or TEAM/NAME")


class NFSSource(Model):
    server: str = Field(min_length=1)
    path: AbsolutePath
    read_only: bool = False


class Volume(Model):
    """A named volume: ``name`` and exactly one source."""

    name: VolumeName
    empty_dir: EmptyDirSource | None = None
    host_path: HostPathSource | None = None
    persistent_volume_claim: PersistentVolumeClaimSource | None = None
    config_map: ConfigMapSource | None = None
    secret: SecretSource | None = None
    nfs: NFSSource | None = None

    @model_validator(mode="after")
    def _one_source(self) -> Volume:
        given = [kind for kind, _ in self.sources()]
        if len(given) != 1:
            shown = "none" if not given else " and ".join(given)
            raise ValueError(
                f"volume {self.name!r} has {shown} as its source; give exactly one of "
                f"{', '.join(source_kinds())}")
        return self

    def sources(self) -> list[tuple[str, Model]]:
        """The sources given, as (Kubernetes' name of the kind, its fields)."""
        return [(kind, value) for kind, value in
                ((kind, getattr(self, attr)) for attr, kind in _SOURCE_FIELDS.items())
                if value is not None]

    @property
    def kind(self) -> str:
        """The source's kind as Kubernetes names it: emptyDir, hostPath, nfs..."""
        return self.sources()[0][0]

    @property
    def source(self) -> Any:
        return self.sources()[0][1]

    def to_kubernetes(self) -> dict[str, Any]:
        """The pod spec's volume: the document form, which is Kubernetes', without the
        fields left at their defaults."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True,
                               exclude_defaults=True)


def source_kinds() -> list[str]:
    return list(_SOURCE_FIELDS.values())


# Every field of Volume but its name is a source, keyed by its Python name.
_SOURCE_FIELDS = {attr: info.alias or attr for attr, info in Volume.model_fields.items()
                  if attr != "name"}


class VolumeMount(Model):
    """Where a pod set's pods see one of the job's volumes."""

    name: str = Field(description="The volume, one of the job's volumes")
    mount_path: AbsolutePath
    read_only: bool = False
    sub_path: RelativePath = Field(default="", description="A path inside the volume to "
                                   "mount instead of its root")



def check_paths(mounts: list[VolumeMount]) -> None:
    """A pod set mounts one path once; ValueError if not."""
    paths: list[str] = []
    for j, mount in enumerate(mounts):
        if mount.mount_path in paths:
            raise ValueError(f"mounts[{j}] mounts a second volume at {mount.mount_path}; "
                             "give each mount its own mountPath")
        paths.append(mount.mount_path)


def check_shm(mounts: list[VolumeMount]) -> None:
    """With ``shm``, no mount is at /dev/shm; ValueError if one is."""
    for j, mount in enumerate(mounts):
        if mount.mount_path == SHM_PATH:
            raise ValueError(f"shm and mounts[{j}] both mount {SHM_PATH}; drop one of them")


def check_volumes(volumes: list[Volume], pod_sets: list[Any]) -> None:
    """Volume names are unique and every mount names one; ValueError if not."""
    names = [v.name for v in volumes]
    for name in names:
        if names.count(name) > 1:
            raise ValueError(f"two volumes are named {name!r}; give each volume its own name")
    for i, pod_set in enumerate(pod_sets):
        for j, mount in enumerate(pod_set.mounts):
            if mount.name not in names:
                known = ", ".join(names) or "none"
                raise ValueError(f"podSets[{i}].mounts[{j}] mounts volume {mount.name!r}, "
                                 f"which the job does not list (its volumes: {known}); add "
                                 "it to volumes or fix the name")
