"""A local pod's own mount namespace: its volumes at their mountPaths, its /dev/shm.

Standard library only: the supervisor (``shim.py``) loads it by path. A pod whose plan
has mounts or a ``shm`` size gets a private mount namespace, made by its supervisor
before it starts the command, so the command, what it starts and what ``phalanx exec``
runs in the pod all see the same mounts, and nobody else does; the namespace, and every
mount in it, ends with the pod's last process. Nothing propagates back to the machine
(the namespace's mounts are made private first).

In it, in this order:
- each volume that needs one gets its directory (an emptyDir: owned by the pod's user,
  and for ``medium: Memory`` a tmpfs of its sizeLimit mounted on it),
- each mount binds its source (the volume's directory, or a path inside it, ``subPath``)
  over its mountPath, read-only if asked, shallowest mountPath first,
- ``shm`` mounts a tmpfs of that size over /dev/shm.
Making a namespace and mounting need root (CAP_SYS_ADMIN): the local plane probes for it
(``python mountns.py --probe``) and refuses at submit what needs it when it is missing.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import sys
from typing import Any

CLONE_NEWNS = 0x00020000
MS_RDONLY, MS_NOSUID, MS_NODEV = 1, 2, 4
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
MNT_DETACH = 2
SHM_PATH = "/dev/shm"
SHM_MODE = 0o1777  # everyone's, sticky: as /dev/shm is on every Linux
EMPTY_DIR_MODE = 0o755


class MountError(Exception):
    """A mount the pod asked for could not be made (the pod does not start)."""


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise MountError(f"{what}: {os.strerror(errno)}")


def mount(source: str | None, target: str, fstype: str | None, flags: int,
          data: str | None = None) -> None:
    libc = _libc()
    libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong,
                           ctypes.c_char_p]
    _check(libc.mount(source.encode() if source else None, target.encode(),
                      fstype.encode() if fstype else None, flags,
                      data.encode() if data else None), f"cannot mount {target}")


def unshare_mounts() -> None:
    """Move this process into a mount namespace of its own, whose mounts stay in it."""
    _check(_libc().unshare(CLONE_NEWNS), "cannot make a mount namespace")
    mount(None, "/", None, MS_REC | MS_PRIVATE)


def tmpfs(target: str, size: int | None, mode: int, uid: int | None = None,
          gid: int | None = None) -> None:
    options = [f"mode={mode:o}"]
    if size:
        options.append(f"size={size}")
    if uid is not None and gid is not None:
        options += [f"uid={uid}", f"gid={gid}"]
    mount("tmpfs", target, "tmpfs", MS_NOSUID | MS_NODEV, ",".join(options))


def bind(source: str, target: str, read_only: bool) -> None:
    mount(source, target, None, MS_BIND | MS_REC)
    if read_only:
        mount(None, target, None, MS_REMOUNT | MS_BIND | MS_RDONLY)


def enter(pod: dict[str, Any]) -> None:
    """Make the pod's namespace and its mounts (``pod["volumes"]``, ``["mounts"]``,
    ``["shm"]`` as the plane plans them, ``compute/local/volumes.py``)."""
    user = pod.get("user") or {}
    uid, gid = user.get("uid", os.getuid()), user.get("gid", os.getgid())
    unshare_mounts()
    for volume in pod.get("volumes", []):
        path = volume["dir"]
        os.makedirs(path, mode=EMPTY_DIR_MODE, exist_ok=True)
        if volume.get("memory"):
            tmpfs(path, volume.get("size"), EMPTY_DIR_MODE, uid, gid)
        os.chown(path, uid, gid)
        os.chmod(path, EMPTY_DIR_MODE)
    for item in sorted(pod.get("mounts", []), key=lambda m: m["target"].count("/")):
        source = item["source"]
        if item.get("create"):  # a subPath of an emptyDir: made as the pod's user would
            os.makedirs(source, mode=EMPTY_DIR_MODE, exist_ok=True)
            os.chown(source, uid, gid)
        bind(source, item["target"], bool(item.get("readOnly")))
    if pod.get("shm"):
        tmpfs(SHM_PATH, pod["shm"], SHM_MODE)


def remove_volumes(pod: dict[str, Any]) -> None:
    """The pod's emptyDirs go with it (their tmpfs first, in this namespace)."""
    for volume in pod.get("volumes", []):
        path = volume["dir"]
        if volume.get("memory"):
            with contextlib.suppress(OSError):
                _libc().umount2(path.encode(), MNT_DETACH)
        shutil.rmtree(path, ignore_errors=True)


def probe() -> int:
    """0 when this process may make a mount namespace and mount a tmpfs in it."""
    try:
        unshare_mounts()
        tmpfs(SHM_PATH, 1 << 20, SHM_MODE)
    except (MountError, OSError, AttributeError) as exc:
        print(exc, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(probe() if sys.argv[1:] == ["--probe"] else 2)
