"""The local plane's meaning of a job's volumes, mounts and ``shm``.

Pods here are processes of this machine, so a mountPath is a path of the machine: the
plane honours mounts by giving each such pod a mount namespace of its own
(``mountns.py``, made by the pod's supervisor), in which each kind means what is
closest to Kubernetes':

- ``emptyDir``: a directory of the pod's own, owned by its user, empty at the start and
  removed when the pod ends (per pod, as on Kubernetes); ``sizeLimit`` of a disk one is
  refused at submit (nothing here could hold the directory to it). ``medium: Memory``:
  a tmpfs of ``sizeLimit`` (without one, of the pod set's memory request; without that,
  the kernel's default, half the RAM).
- ``hostPath``: the machine's path, bound over mountPath; ``type`` is checked as the
  kubelet does (``DirectoryOrCreate``/``FileOrCreate`` create it as the pod's user). The
  pod reaches nothing through it that its user could not reach by the path itself.
- ``secret``: the secret's keys as files, 0400 and the pod's user's, in the attempt's
  credential directory (``credentials.py``), bound read-only over mountPath (whatever
  the mount's ``readOnly``); a ``subPath`` names one key, a file.
- ``shm: SIZE``: a tmpfs of that size over /dev/shm.
- ``persistentVolumeClaim``, ``configMap``, ``nfs`` (and any kind this table does not
  know): refused at submit; there are no claims or ConfigMaps on this machine, and an
  export is mounted once on the machine and given as a hostPath.

Namespaces need root: on a plane without (``mountns.py --probe`` fails) a job with mounts
or ``shm`` is refused at submit, naming the field. A mountPath must exist on the machine
(the plane does not make directories in the machine's tree for a pod), be of the source's
type (a directory over a directory) and hide none of the plane's own directories (its
state, logs, checkpoints, credentials, the Python it runs on), nor /proc, /sys or /dev.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from collections.abc import Callable, Collection, Iterable, Mapping
from pathlib import Path
from typing import Any

from phalanx.compute.local import mountns
from phalanx.compute.local.users import ROOT_UID, PodUser
from phalanx.errors import SpecError
from phalanx.spec.quantity import MILLI
from phalanx.spec.resources import JobSpec, PodSet
from phalanx.spec.volumes import Volume

MOUNTNS = Path(mountns.__file__).resolve()
ROOT_FIX = ("start the control plane as root (pods can then run as other users: "
            "--pod-uids or --run-as-user), or run the job on a Kubernetes plane")
# Mounts there would take from the pod (and its supervisor) what the machine needs.
KERNEL_TREES = ("/proc", "/sys")
NOT_OVER = ("/", "/dev")
# Kinds this plane has no meaning for, and what to do instead.
REFUSED = {
    "persistentVolumeClaim": "a PersistentVolumeClaim is a Kubernetes object and this "
    "machine has none; give the data as a hostPath, or run the job on a Kubernetes plane",
    "configMap": "a ConfigMap is a Kubernetes object and this machine has none; give the "
    "files as a hostPath, or run the job on a Kubernetes plane",
    "nfs": "the local plane mounts no network file systems for a pod; mount the export on "
    "this machine and give its path as a hostPath",
}
HONOURED = ("emptyDir", "hostPath", "secret")
_HOST_TYPES: dict[str, Callable[[int], bool]] = {
    "Directory": stat.S_ISDIR, "DirectoryOrCreate": stat.S_ISDIR,
    "File": stat.S_ISREG, "FileOrCreate": stat.S_ISREG, "Socket": stat.S_ISSOCK,
    "CharDevice": stat.S_ISCHR, "BlockDevice": stat.S_ISBLK,
}


def can_make_namespaces() -> bool:
    """Whether a pod's supervisor could make its mount namespace here (a probe process)."""
    if os.geteuid() != ROOT_UID:
        return False
    probe = subprocess.run([sys.executable, "-I", "-S", str(MOUNTNS), "--probe"],
                           capture_output=True, timeout=30, check=False)
    return probe.returncode == 0


def _within(path: str, tree: str) -> bool:
    return path == tree or path.startswith(tree.rstrip("/") + "/")


class LocalVolumes:
    """Checks a job's volumes against this plane and plans each pod's namespace."""

    def __init__(self, protected: Iterable[Path | str], namespaces: bool | None = None) -> None:
        """``protected``: the plane's own directories, which no mountPath may hide or
        enter; ``namespaces``: whether pods may get mount namespaces (None: probed on first
        need)."""
        self.protected = sorted({os.path.realpath(p) for p in protected})
        self._namespaces = namespaces

    @property
    def namespaces(self) -> bool:
        if self._namespaces is None:
            self._namespaces = can_make_namespaces()
        return self._namespaces

    def check(self, job: JobSpec) -> None:
        """What the plane can never honour, refused at submit naming the field."""
        for i, volume in enumerate(job.volumes):
            if volume.kind in REFUSED or volume.kind not in HONOURED:
                fix = REFUSED.get(volume.kind, "use an emptyDir, a hostPath or a secret on "
                                  "this plane")
                raise SpecError(f"volume {volume.name!r} is a {volume.kind}, which the local "
                                "plane cannot give a pod", field=f"volumes[{i}].{volume.kind}",
                                fix=fix)
            disk = volume.empty_dir
            if disk is not None and disk.medium != "Memory" and disk.size_limit is not None:
                # A directory on the machine's disk has no size of its own to hold it to.
                raise SpecError(f"volume {volume.name!r} asks for a sizeLimit on disk, which "
                                "the local plane cannot enforce",
                                field=f"volumes[{i}].emptyDir.sizeLimit",
                                fix="remove sizeLimit, or set medium: Memory for a tmpfs of "
                                "that size")
        for i, pod_set in enumerate(job.pod_sets):
            asks = [f"podSets[{i}].shm"] if pod_set.shm is not None else []
            asks += [f"podSets[{i}].mounts[{j}]" for j in range(len(pod_set.mounts))]
            if asks and not self.namespaces:
                raise SpecError(
                    f"pod set {pod_set.name!r} asks for mounts, which this local plane cannot "
                    "make: a pod's own mount namespace (its volumes at their mountPaths, its "
                    "/dev/shm) needs a control plane running as root", field=asks[0],
                    fix=ROOT_FIX)
            for j, mount in enumerate(pod_set.mounts):
                self._check_target(mount.mount_path, f"podSets[{i}].mounts[{j}].mountPath")

    def _check_target(self, path: str, field: str) -> str:
        """``path`` resolved, or a refusal if a mount there would hide what the plane needs."""
        real = os.path.realpath(path)
        hidden = [p for p in self.protected if _within(p, real) or _within(real, p)]
        if real in NOT_OVER or any(_within(real, t) for t in KERNEL_TREES) or hidden:
            what = f"the plane's directory {hidden[0]}" if hidden else real
            raise SpecError(f"a mount at {path} would cover {what}, which the pod and its "
                            "supervisor need", field=field,
                            fix="mount the volume at another path, e.g. /mnt/data")
        return real

    def plan(self, job: JobSpec, index: int, pod_dir: Path, owner: PodUser | None,
             checked_as: PodUser | None = None, secrets_dir: Path | None = None,
             secret_keys: Mapping[str, Collection[str]] | None = None) -> dict[str, Any]:
        """The namespace of one pod of pod set ``index`` (the supervisor's ``volumes``,
        ``mounts`` and ``shm``); ``pod_dir`` holds its emptyDirs. ``owner``: the pod's
        user (None: this process's, or not known yet), ``checked_as``: whose permissions
        a hostPath is checked with, if not ``owner``'s. ``secrets_dir``: where the
        attempt's secret volumes' files are (written before the pods start), one directory
        per volume with ``secret_keys[volume]`` in it. Raises SpecError for what the
        machine lacks now (a hostPath, a mountPath, a secret's values)."""
        pod_set = job.pod_sets[index]
        if not pod_set.mounts and pod_set.shm is None:
            return {}
        self.check(job)
        by_name = {v.name: (i, v) for i, v in enumerate(job.volumes)}
        volumes: dict[str, dict[str, Any]] = {}
        mounts = []
        for j, mount in enumerate(pod_set.mounts):
            field = f"podSets[{index}].mounts[{j}]"
            i, volume = by_name[mount.name]
            if volume.kind == "emptyDir":
                directory = volumes.setdefault(volume.name, self._empty_dir(
                    volume, pod_set, pod_dir / volume.name))["dir"]
                source = os.path.join(directory, mount.sub_path) if mount.sub_path else directory
                create = bool(mount.sub_path)
            elif volume.kind == "secret":
                source = self._secret(volume, i, f"{field}.subPath", mount.sub_path,
                                      secrets_dir, secret_keys or {})
                create = False
            else:
                source = self._host_path(volume, i, mount.sub_path, owner, checked_as or owner)
                create = False
            target = self._check_target(mount.mount_path, f"{field}.mountPath")
            if not os.path.exists(target):
                raise SpecError(f"mountPath {mount.mount_path} does not exist on this machine",
                                field=f"{field}.mountPath", fix=f"create it on the machine "
                                f"(mkdir -p {mount.mount_path}), or mount at an existing "
                                "directory such as /mnt")
            source_is_dir = create or os.path.isdir(source) or volume.kind == "emptyDir" or (
                volume.kind == "secret" and not mount.sub_path)
            if os.path.isdir(target) != source_is_dir:
                kinds = ("a directory", "a file") if source_is_dir else ("a file", "a directory")
                raise SpecError(f"{mount.name!r} is {kinds[0]} and mountPath "
                                f"{mount.mount_path} is {kinds[1]}", field=f"{field}.mountPath",
                                fix=f"mount it at {kinds[0]}")
            read_only = mount.read_only or volume.kind == "secret"
            mounts.append({"source": source, "target": target, "readOnly": read_only,
                           "create": create})
        plan: dict[str, Any] = {"volumes": list(volumes.values()), "mounts": mounts}
        if pod_set.shm is not None:
            plan["shm"] = pod_set.shm // MILLI
        return plan

    @staticmethod
    def _empty_dir(volume: Volume, pod_set: PodSet, directory: Path) -> dict[str, Any]:
        source = volume.empty_dir
        assert source is not None
        entry: dict[str, Any] = {"dir": str(directory)}
        if source.medium == "Memory":
            size = source.size_limit or pod_set.resources.get("memory")
            entry.update(memory=True, size=size // MILLI if size else None)
        return entry

    @staticmethod
    def _secret(volume: Volume, index: int, sub_field: str, sub_path: str,
                secrets_dir: Path | None, secret_keys: Mapping[str, Collection[str]]) -> str:
        keys = secret_keys.get(volume.name)
        if secrets_dir is None or keys is None:
            raise SpecError(f"the values of secret volume {volume.name!r} did not reach this "
                            "plane", field=f"volumes[{index}].secret",
                            fix="submit the job to the control plane, which hands each "
                                "attempt its secrets")
        if sub_path and sub_path not in keys:
            raise SpecError(f"subPath {sub_path!r} is no key of secret volume "
                            f"{volume.name!r}", field=sub_field,
                            fix=f"give one of its keys: {', '.join(sorted(keys))}")
        directory = secrets_dir / volume.name
        return str(directory / sub_path) if sub_path else str(directory)

    @staticmethod
    def _host_path(volume: Volume, index: int, sub_path: str, owner: PodUser | None,
                   checked_as: PodUser | None) -> str:
        source = volume.host_path
        assert source is not None
        field = f"volumes[{index}].hostPath.path"
        path = os.path.join(source.path, sub_path) if sub_path else source.path
        if source.type in ("DirectoryOrCreate", "FileOrCreate") and not os.path.lexists(path):
            _create_as(path, owner, checked_as, directory=source.type == "DirectoryOrCreate",
                       field=field)
        if not os.path.lexists(path):
            raise SpecError(f"hostPath {path} does not exist on this machine", field=field,
                            fix="create it, or set type: DirectoryOrCreate")
        real = os.path.realpath(path)
        if sub_path and not _within(real, os.path.realpath(source.path)):
            raise SpecError(f"subPath {sub_path!r} leads out of hostPath {source.path}",
                            field=field, fix="give a subPath inside the volume")
        wanted = _HOST_TYPES.get(source.type)
        if wanted is not None and not wanted(os.stat(real).st_mode):
            raise SpecError(f"hostPath {path} is no {source.type}", field=field,
                            fix=f"give the path of a {source.type}, or leave type empty")
        if not reachable(real, checked_as):
            raise SpecError(f"hostPath {path} is out of the reach of the pod's user (a "
                            "directory on its way may not be entered)", field=field,
                            fix="give a path the pods' user may reach, or make it reachable")
        return real


def _allowed(info: os.stat_result, owner: PodUser | None, bits: int) -> bool:
    """Whether ``owner`` has the permission ``bits`` (rwx as 4/2/1) by the mode bits."""
    if owner is None:
        uid, groups = os.geteuid(), {os.getegid(), *os.getgroups()}
    else:
        uid, groups = owner.uid, {owner.gid, *owner.groups}
    if uid == ROOT_UID:
        return True
    if info.st_uid == uid:
        return (info.st_mode >> 6) & bits == bits
    if info.st_gid in groups:
        return (info.st_mode >> 3) & bits == bits
    return info.st_mode & bits == bits


def reachable(path: str, owner: PodUser | None) -> bool:
    """Whether ``owner`` may walk to ``path`` (a resolved path): every directory above it
    may be entered by it. A bind mount would otherwise open a way around them."""
    parent = os.path.dirname(path)
    while True:
        if not _allowed(os.stat(parent), owner, 1):
            return False
        if parent == "/":
            return True
        parent = os.path.dirname(parent)


def _create_as(path: str, owner: PodUser | None, checked_as: PodUser | None, *,
               directory: bool, field: str) -> None:
    """Create ``path`` (and missing directories above it) for ``owner``, where
    ``checked_as`` may create them."""
    existing = os.path.dirname(path)
    while not os.path.lexists(existing):
        existing = os.path.dirname(existing)
    real = os.path.realpath(existing)
    if not (reachable(real, checked_as) and _allowed(os.stat(real), checked_as, 3)):
        raise SpecError(f"the pods' user may not create {path}", field=field,
                        fix="give a path under a directory the pods' user may write to")
    missing = []
    probe = path if directory else os.path.dirname(path)
    while not os.path.lexists(probe):
        missing.append(probe)
        probe = os.path.dirname(probe)
    for made in reversed(missing):
        os.mkdir(made, 0o755)
        if owner is not None:
            os.chown(made, owner.uid, owner.gid)
    if not directory:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        os.close(fd)
        if owner is not None:
            os.chown(path, owner.uid, owner.gid)
