"""A job's volumes, mounts and ``shm`` on a Kubernetes pod: as Kubernetes has them.

Each pod gets the job's volumes its pod set mounts (the volume's document form is the
pod spec's, ``phalanx.spec.volumes``) and a ``volumeMounts`` entry per mount; ``shm:
SIZE`` is a Memory emptyDir of that sizeLimit at /dev/shm (named ``phalanx-shm``; the
kubelet counts what the pod writes there as the container's memory, whose limit Phalanx
sets to the request). The paths where the plane mounts its own volumes (checkpoints,
the API credential, the fence) are refused as mountPaths at submit.

A ``secret`` volume names a Phalanx secret, whose values the attempt's own Secret
``<attempt>-vol-<volume>`` carries (``secretdata.py``): the pod's volume names that
Secret, its files 0400, and every mount of it is read-only, as on the local plane.
"""

from __future__ import annotations

from typing import Any

from phalanx.errors import SpecError
from phalanx.spec.quantity import format_quantity
from phalanx.spec.resources import JobSpec, PodSet
from phalanx.spec.volumes import SHM_PATH, SHM_VOLUME, Volume

Object = dict[str, Any]


def volume_secret(attempt_name: str, volume: str) -> str:
    """The attempt's Secret holding the files of its secret volume ``volume``."""
    return f"{attempt_name}-vol-{volume}"


def _pod_volume(volume: Volume, attempt_name: str) -> Object:
    if volume.secret is not None:
        return {"name": volume.name, "secret": {
            "secretName": volume_secret(attempt_name, volume.name), "defaultMode": 0o400}}
    return volume.to_kubernetes()


def plane_mounts() -> tuple[str, ...]:
    """The plane's own mountPaths: a user's mount there would clash with them."""
    # Imported here: those modules build on objects.py, which builds on this one.
    from phalanx.compute.kubernetes import checkpoints, credentials, fencing

    return checkpoints.MOUNT_PATH, credentials.MOUNT_PATH, fencing.MOUNT


def _within(path: str, tree: str) -> bool:
    return path == tree or path.startswith(tree.rstrip("/") + "/")


def check(job: JobSpec) -> None:
    """Refuse a mountPath that would meet one of the plane's own mounts."""
    for i, pod_set in enumerate(job.pod_sets):
        for j, mount in enumerate(pod_set.mounts):
            clash = [p for p in plane_mounts()
                     if _within(p, mount.mount_path) or _within(mount.mount_path, p)]
            if clash:
                raise SpecError(f"a mount at {mount.mount_path} would meet Phalanx's own mount "
                                f"at {clash[0]}", field=f"podSets[{i}].mounts[{j}].mountPath",
                                fix="mount the volume at another path, e.g. /mnt/data")


def mount(spec: Object, container: Object, job: JobSpec, pod_set: PodSet,
          attempt_name: str) -> None:
    """Add the pod set's volumes and mounts to a pod (``spec``, its ``container``) of the
    attempt ``attempt_name``; raises SpecError at launch, as ``check`` does at submit (a
    worker's plane sees jobs first at launch)."""
    check(job)
    used = {m.name for m in pod_set.mounts}
    volumes = [_pod_volume(v, attempt_name) for v in job.volumes if v.name in used]
    secret = {v.name for v in job.volumes if v.secret is not None}
    mounts: list[Object] = []
    for m in pod_set.mounts:
        entry: Object = {"name": m.name, "mountPath": m.mount_path}
        if m.read_only or m.name in secret:
            entry["readOnly"] = True
        if m.sub_path:
            entry["subPath"] = m.sub_path
        mounts.append(entry)
    if pod_set.shm is not None:
        volumes.append({"name": SHM_VOLUME, "emptyDir": {
            "medium": "Memory", "sizeLimit": format_quantity(pod_set.shm, "memory")}})
        mounts.append({"name": SHM_VOLUME, "mountPath": SHM_PATH})
    if volumes:
        spec.setdefault("volumes", []).extend(volumes)
    if mounts:
        container.setdefault("volumeMounts", []).extend(mounts)
