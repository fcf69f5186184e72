"""Jobs' checkpoint directories on this machine: ``<state dir>/checkpoints/<job>``.

When pods run as another user than the control plane (``phalanx up --run-as-user`` or
``--pod-uids``) they cannot enter the owner-only state directory, so the directories
live under ``/var/tmp/phalanx-checkpoints-<control plane uid>-<control plane tag>``
instead (traversable, not listable; each job's directory owned by the user its current
attempt runs as, mode 0700): two control planes on one machine never share one
(``poddirs.py``). ``$PHALANX_CHECKPOINT_ROOT`` chooses another place.

Each job's pods get theirs as ``PHALANX_CHECKPOINT_DIR``. It outlives the job's
attempts (restarts, preemptions, drains), so a new attempt resumes from what the last
one saved (under ``--pod-uids`` everything in it is handed to the new attempt's uid),
and goes when the job ends unless the job keeps it (``checkpoint.keep``).
Whatever the job writes there is a checkpoint: the newest entry's modification time is
when it last saved, which preemption reads to take the job that loses least.
"""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path

from phalanx.compute.local.poddirs import legacy_root, owned_dir, reachable_root
from phalanx.compute.local.users import PodUser

log = logging.getLogger("phalanx.compute.local")

CHECKPOINT_ROOT_ENV = "PHALANX_CHECKPOINT_ROOT"
WHAT = "checkpoints"


def checkpoint_root(home: Path, shared: bool, tag: str = "") -> Path:
    """Where jobs' checkpoint directories go (see the module's docstring)."""
    chosen = os.environ.get(CHECKPOINT_ROOT_ENV)
    if chosen:
        return Path(chosen)
    return reachable_root(home, shared, WHAT, tag)


class CheckpointDirs:
    def __init__(self, root: Path, shared: bool = False, legacy: Path | None = None) -> None:
        self.root = root
        self.shared = shared  # pods of another user must traverse the root
        # The untagged root of earlier versions, whose directories are moved in on use.
        self.legacy = legacy if legacy != root else None

    @classmethod
    def for_plane(cls, home: Path, shared: bool, tag: str) -> CheckpointDirs:
        root = checkpoint_root(home, shared, tag)
        legacy = legacy_root(WHAT) if shared and not os.environ.get(CHECKPOINT_ROOT_ENV) else None
        return cls(root, shared=not root.is_relative_to(home), legacy=legacy)

    def path(self, job: str) -> Path:
        return self.root / job

    def prepare(self, job: str, owner: PodUser | None) -> Path:
        """The job's directory, made if missing and owned by the user its pods run as."""
        self._adopt_legacy(job)
        return owned_dir(self.root, job, owner, shared=self.shared)

    def _adopt_legacy(self, job: str) -> None:
        if self.legacy is None or self.path(job).exists():
            return
        old = self.legacy / job
        if old.is_dir() and not old.is_symlink():
            self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
            try:
                os.rename(old, self.path(job))
                log.info("moved %s's checkpoints from %s to %s", job, old, self.path(job))
            except OSError as exc:
                log.warning("could not move %s's checkpoints from %s: %s", job, old, exc)

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
