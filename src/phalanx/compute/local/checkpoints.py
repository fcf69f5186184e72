"""Jobs' checkpoint directories on this machine: ``<state dir>/checkpoints/<job>``.

Each job's pods get theirs as ``PHALANX_CHECKPOINT_DIR``. It outlives the job's
attempts (restarts, preemptions, drains), so a new attempt resumes from what the last
one saved, and goes when the job ends unless the job keeps it (``checkpoint.keep``).
Whatever the job writes there is a checkpoint: the newest entry's modification time is
when it last saved, which preemption reads to take the job that loses least.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from phalanx.compute.local.users import PodUser


class CheckpointDirs:
    def __init__(self, root: Path) -> None:
        self.root = root

    def path(self, job: str) -> Path:
        return self.root / job

    def prepare(self, job: str, owner: PodUser | None) -> Path:
        """The job's directory, made if missing and owned by the user its pods run as."""
        self.root.mkdir(mode=0o755, parents=True, exist_ok=True)
        path = self.path(job)
        path.mkdir(mode=0o700, exist_ok=True)
        if owner is not None and (path.stat().st_uid, path.stat().st_gid) != (owner.uid,
                                                                               owner.gid):
            os.chown(path, owner.uid, owner.gid)
        return path

    def last_saved(self, job: str) -> float | None:
        """When the job last wrote into its directory (None: never)."""
        newest: float | None = None
        try:
            with os.scandir(self.path(job)) as entries:
                for entry in entries:
                    try:
                        mtime = entry.stat(follow_symlinks=False).st_mtime
                    except FileNotFoundError:  # replaced while we looked
                        continue
                    if newest is None or mtime > newest:
                        newest = mtime
        except (FileNotFoundError, NotADirectoryError):
            return None
        return newest

    def remove(self, job: str) -> None:
        shutil.rmtree(self.path(job), ignore_errors=True)
