"""The file that holds an attempt's API credential, for its pods alone.

``<root>/<job>.<attempt>/api-key``: the directory 0700 and the file 0600, both owned by
the user the pods run as, under the state directory, or ``/var/tmp`` when pods run as
another user (``poddirs.py``). Pods find it through ``PHALANX_API_KEY_FILE``; the key is
never in their environment, which ``/proc/<pid>/environ`` and crash reports show more
readily than a file. It goes when the plane forgets the attempt.

The secrets a job mounts as files go beside it, in ``secrets/<volume>/<key>`` (0400, the
pods' user's), pointed at by ``PHALANX_SECRETS_DIR``, and go with it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from pathlib import Path

from phalanx.compute.local.poddirs import owned_dir, reachable_root
from phalanx.compute.local.users import PodUser

KEY_FILE = "api-key"
SECRETS_DIR = "secrets"


class CredentialFiles:
    def __init__(self, home: Path, run_as: PodUser | None) -> None:
        self.root = reachable_root(home, run_as, "credentials")
        self.shared = not self.root.is_relative_to(home)
        self.run_as = run_as

    def directory(self, job: str, attempt: int) -> Path:
        return self.root / f"{job}.{attempt}"

    def write(self, job: str, attempt: int, key: str) -> Path:
        """The attempt's key file, written once (a repeated launch finds it in place)."""
        directory = owned_dir(self.root, f"{job}.{attempt}", self.run_as, shared=self.shared)
        path = directory / KEY_FILE
        with contextlib.suppress(FileNotFoundError):
            if path.read_text() == key:
                return path
        partial = directory / f".{KEY_FILE}.tmp"
        partial.unlink(missing_ok=True)
        fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            if self.run_as is not None:
                os.fchown(fd, self.run_as.uid, self.run_as.gid)
            os.write(fd, key.encode())
        finally:
            os.close(fd)
        os.replace(partial, path)
        return path

    def write_secrets(self, job: str, attempt: int, volumes: dict[str, dict[str, bytes]],
                      ) -> Path:
        """The attempt's secret files, ``<dir>/secrets/<volume>/<key>``, written afresh."""
        directory = owned_dir(self.root, f"{job}.{attempt}", self.run_as, shared=self.shared)
        top = directory / SECRETS_DIR
        shutil.rmtree(top, ignore_errors=True)  # a repeated launch writes the same again
        for volume, files in volumes.items():
            where = top / volume
            where.mkdir(mode=0o700, parents=True)
            for key, value in files.items():
                fd = os.open(where / key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o400)
                try:
                    if self.run_as is not None:
                        os.fchown(fd, self.run_as.uid, self.run_as.gid)
                    os.write(fd, value)
                finally:
                    os.close(fd)
        if self.run_as is not None:
            for path in (top, *(top / v for v in volumes)):
                os.chown(path, self.run_as.uid, self.run_as.gid)
        return top

    def remove(self, job: str, attempt: int) -> None:
        shutil.rmtree(self.directory(job, attempt), ignore_errors=True)
