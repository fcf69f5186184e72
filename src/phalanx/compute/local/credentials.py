"""The file that holds an attempt's API credential, for its pods alone.

``<root>/<job>.<attempt>/api-key``: the directory 0700 and the file 0600, both owned by
the user the attempt's pods run as (its own uid under ``--pod-uids``), under the state
directory, or under ``/var/tmp``, keyed by the control plane, when pods run as another
user (``poddirs.py``). Pods find it through ``PHALANX_API_KEY_FILE``; the key is never in
their environment, which ``/proc/<pid>/environ`` and crash reports show more readily
than a file. It goes when the plane forgets the attempt.

The files of a job's secret volumes go beside it, in ``secrets/<volume>/<key>`` (0400, the
pods' user's), which each pod's mount namespace binds read-only at the volume's
mountPath (``volumes.py``); they go with it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from pathlib import Path

from phalanx.compute.local.poddirs import legacy_root, owned_dir, reachable_root
from phalanx.compute.local.users import PodUser

KEY_FILE = "api-key"
SECRETS_DIR = "secrets"
WHAT = "credentials"


class CredentialFiles:
    def __init__(self, home: Path, shared: bool, tag: str = "") -> None:
        self.root = reachable_root(home, shared, WHAT, tag)
        self.shared = shared
        # An attempt adopted from an earlier version keeps its file in the untagged root.
        self.legacy = legacy_root(WHAT) if shared and tag else None

    def directory(self, job: str, attempt: int) -> Path:
        return self.root / f"{job}.{attempt}"

    def write(self, job: str, attempt: int, key: str, owner: PodUser | None) -> Path:
        """The attempt's key file, written once (a repeated launch finds it in place),
        owned by ``owner`` (None: this process's user)."""
        directory = owned_dir(self.root, f"{job}.{attempt}", owner, shared=self.shared)
        path = directory / KEY_FILE
        with contextlib.suppress(FileNotFoundError):
            if path.read_text() == key:
                self.own(job, attempt, owner)
                return path
        partial = directory / f".{KEY_FILE}.tmp"
        partial.unlink(missing_ok=True)
        fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            if owner is not None:
                os.fchown(fd, owner.uid, owner.gid)
            os.write(fd, key.encode())
        finally:
            os.close(fd)
        os.replace(partial, path)
        return path

    def secrets_dir(self, job: str, attempt: int) -> Path:
        """Where the attempt's secret volumes' files are: ``<dir>/<volume>/<key>``."""
        return self.directory(job, attempt) / SECRETS_DIR

    def write_secrets(self, job: str, attempt: int, volumes: dict[str, dict[str, bytes]],
                      owner: PodUser | None) -> Path:
        """The attempt's secret files, ``<dir>/secrets/<volume>/<key>``, written afresh and
        owned by ``owner`` (None: this process's user)."""
        owned_dir(self.root, f"{job}.{attempt}", owner, shared=self.shared)
        top = self.secrets_dir(job, attempt)
        shutil.rmtree(top, ignore_errors=True)  # a repeated launch writes the same again
        top.mkdir(mode=0o700)
        for volume, files in volumes.items():
            where = top / volume
            where.mkdir(mode=0o700)
            for key, value in files.items():
                fd = os.open(where / key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o400)
                try:
                    os.write(fd, value)
                finally:
                    os.close(fd)
        self._own_secrets(top, owner)
        return top

    def own(self, job: str, attempt: int, owner: PodUser | None) -> None:
        """Hand the attempt's directory, key and secret files to ``owner`` (an attempt that
        waited for its uid got them before it had one)."""
        if owner is None:
            return
        directory = self.directory(job, attempt)
        for path in (directory, directory / KEY_FILE):
            with contextlib.suppress(FileNotFoundError):
                os.chown(path, owner.uid, owner.gid)
        self._own_secrets(self.secrets_dir(job, attempt), owner)

    @staticmethod
    def _own_secrets(top: Path, owner: PodUser | None) -> None:
        if owner is None or not top.is_dir():
            return
        for root, _, files in os.walk(top):
            os.chown(root, owner.uid, owner.gid)
            for name in files:
                os.chown(os.path.join(root, name), owner.uid, owner.gid)

    def remove(self, job: str, attempt: int) -> None:
        shutil.rmtree(self.directory(job, attempt), ignore_errors=True)
        if self.legacy is not None:
            shutil.rmtree(self.legacy / f"{job}.{attempt}", ignore_errors=True)
