"""Directories a pod's user owns, where the pods can reach them.

The state directory is owner-only, so when pods run as another user than the control
plane (``phalanx up --run-as-user``, ``--pod-uids``) what they must reach lives under
``/var/tmp/phalanx-<what>-<control plane uid>-<tag>`` instead: traversable, not
listable, each directory in it owned by the pod's user, mode 0700. The tag is the
control plane's (``compute.base.control_plane_tag``, as the Kubernetes plane tags its
objects), so two control planes on one machine never share a directory. With pods of
the control plane's own user it stays in the state directory.

Earlier versions used the untagged ``/var/tmp/phalanx-<what>-<uid>``: a job's
checkpoint directory found there is moved into the tagged root when the job next
starts, and an attempt's credential directory there is removed with the attempt.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from phalanx.compute.local.users import PodUser

log = logging.getLogger("phalanx.compute.local")

SHARED_ROOT = Path("/var/tmp")


def reachable_root(home: Path, shared: bool, what: str, tag: str = "") -> Path:
    """Where the directories named ``what`` (checkpoints, credentials, work) go;
    ``shared``: pods run as another user than this process's."""
    if not shared:
        return home / what
    return SHARED_ROOT / f"phalanx-{what}-{os.getuid()}{tag}"


def legacy_root(what: str) -> Path:
    """The untagged shared root of earlier versions."""
    return SHARED_ROOT / f"phalanx-{what}-{os.getuid()}"


def attempt_workdir(root: Path, job: str, attempt: int) -> Path:
    """The directory of an attempt's pods' own directories (``workdirs.py``), under the
    ``work`` root."""
    return root / f"{job}.{attempt}"


def own_tree(path: Path, uid: int, gid: int) -> None:
    """Make ``path`` and everything in it ``uid``'s (an unpacked workdir; a new attempt of
    a job inherits the last one's checkpoints, written under another uid)."""
    os.lchown(path, uid, gid)
    for root, dirs, files in os.walk(path):
        for name in (*dirs, *files):
            os.lchown(os.path.join(root, name), uid, gid)


def owned_dir(root: Path, name: str, owner: PodUser | None, *, shared: bool) -> Path:
    """``root/name``, made if missing (0700) and owned by ``owner`` (None: this process's
    user); ``shared``: pods of another user must traverse ``root``."""
    root.mkdir(mode=0o700, parents=True, exist_ok=True)
    if shared and root.stat().st_mode & 0o777 != 0o711:
        root.chmod(0o711)  # others may enter their own directory, not list
    path = root / name
    path.mkdir(mode=0o700, exist_ok=True)
    if path.stat().st_mode & 0o777 != 0o700:
        path.chmod(0o700)
    if owner is not None and (path.stat().st_uid, path.stat().st_gid) != (owner.uid, owner.gid):
        os.chown(path, owner.uid, owner.gid)
    return path
