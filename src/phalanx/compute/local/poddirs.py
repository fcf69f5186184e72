"""Directories a pod's user owns, where the pods can reach them.

The state directory is owner-only, so when pods run as another user than the control
plane (``phalanx up --run-as-user``) what they must reach lives under
``/var/tmp/phalanx-<what>-<control plane uid>`` instead: traversable, not listable, each
directory in it owned by the pod user, mode 0700. With pods of the control plane's own
user it stays in the state directory.
"""

from __future__ import annotations

import os
from pathlib import Path

from phalanx.compute.local.users import PodUser

SHARED_ROOT = Path("/var/tmp")


def reachable_root(home: Path, run_as: PodUser | None, what: str) -> Path:
    """Where the directories named ``what`` (checkpoints, credentials) go."""
    if run_as is None or run_as.uid == os.getuid():
        return home / what
    return SHARED_ROOT / f"phalanx-{what}-{os.getuid()}"


def owned_dir(root: Path, name: str, owner: PodUser | None, *, shared: bool) -> Path:
    """``root/name``, made if missing (0700) and owned by ``owner`` (None: this process's
    user); ``shared``: pods of another user must traverse ``root``."""
    root.mkdir(mode=0o700, parents=True, exist_ok=True)
    if shared and root.stat().st_mode & 0o777 != 0o711:
        root.chmod(0o711)  # others may enter their own directory, not list
    path = root / name
    path.mkdir(mode=0o700, exist_ok=True)
    if owner is not None and (path.stat().st_uid, path.stat().st_gid) != (owner.uid, owner.gid):
        os.chown(path, owner.uid, owner.gid)
    return path
