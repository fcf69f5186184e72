"""Jobs' checkpoint directories on this machine: ``<state dir>/checkpoints/<job>``.

When pods run as another user than the control plane (``phalanx up --run-as-user``)
they cannot enter the owner-only state directory, so the directories live under
``/var/tmp/phalanx-checkpoints-<control plane uid>`` instead (traversable, not
listable; each job's directory owned by the pod user, mode 0700).
``$PHALANX_CHECKPOINT_ROOT`` chooses another place.

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

from phalanx.compute.local.poddirs import owned_dir, reachable_root
from phalanx.compute.local.users import PodUser

CHECKPOINT_ROOT_ENV = "PHALANX_CHECKPOINT_ROOT"


def checkpoint_root(home: Path, run_as: PodUser | None) -> Path:
    """Where jobs' checkpoint directories go (see the module's docstring)."""
    chosen = os.environ.get(CHECKPOINT_ROOT_ENV)
    if chosen:
        return Path(chosen)
    return reachable_root(home, run_as, "checkpoints")


class CheckpointDirs:
    def __init__(self, root: Path, shared: bool = False) -> None:
        self.root = root
        self.shared = shared  # pods of another user must traverse the root

    def path(self, job: str) -> Path:
        return self.root / job

    def prepare(self, job: str, owner: PodUser | None) -> Path:
        """The job's directory, made if missing and owned by the user its pods run as."""
        return owned_dir(self.root, job, owner, shared=self.shared)

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
