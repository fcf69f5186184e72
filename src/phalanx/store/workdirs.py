"""Packed working directories (gzipped tars) by content hash, and who may read each.

An archive is stored once, as ``<root>/blobs/<sha256>.tar.gz``, however many teams upload
the same bytes. Who may read it is recorded per uploader: a marker
``<root>/owners/team/<team>/<sha256>`` for each of the uploader's teams and
``<root>/owners/user/<user>/<sha256>`` for the uploader. A team that never uploaded an
archive cannot learn that it exists: to the routes it is absent until that team uploads
the same bytes itself, which proves it holds them. The control plane keeps the store in
``<home>/workdirs``; a worker whose pods run on its own machine keeps a copy of the
archives its pods need in its own home, without owners (it runs what it is told to).

Archives are pruned (``prune_unused``) once no job that has not ended names them and they
have not been used for a retention period: an archive's modification time is the last time
it was uploaded, asked about (``HEAD``) or named by a submitted job (``touch``), so a
directory a user keeps submitting stays, and one between its upload and its job's submit
is young. Its owners' markers go with it; a later submit of the same directory uploads it
again.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
import time
from collections.abc import Collection, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from phalanx.errors import SpecError
from phalanx.spec.sources import SHA256

CHUNK = 1 << 20
WORKDIRS = "workdirs"  # the store's directory in a home
# The largest archive the control plane takes (the CLI and SDK refuse a directory above
# their own, smaller cap first, naming its biggest files).
MAX_ARCHIVE_BYTES = 2 * 2**30


def check_digest(sha256: str) -> str:
    if not SHA256.fullmatch(sha256):
        raise SpecError(f"{sha256[:80]!r} is not a SHA-256 digest", field="sha256",
                        fix="give the 64 lower-case hex digits of the archive's SHA-256")
    return sha256


@dataclass(frozen=True, slots=True)
class PrunedArchive:
    sha256: str
    size: int
    idle_seconds: float  # since its last upload, HEAD or submit


@dataclass(slots=True)
class PruneReport:
    """What a pruning pass removed and why it kept the rest."""

    removed: list[PrunedArchive] = field(default_factory=list)
    kept_in_use: int = 0  # named by a job that has not ended
    kept_recent: int = 0  # used within the retention

    @property
    def removed_bytes(self) -> int:
        return sum(a.size for a in self.removed)


class WorkdirStore:
    """Archives under ``root`` (made owner-only on first write)."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    @classmethod
    def for_home(cls, home: Path) -> WorkdirStore:
        return cls(Path(home) / WORKDIRS)

    def path(self, sha256: str) -> Path:
        return self.root / "blobs" / f"{check_digest(sha256)}.tar.gz"

    def has(self, sha256: str) -> bool:
        return self.path(sha256).is_file()

    def readable_by(self, sha256: str, user: str, teams: Iterable[str]) -> bool:
        """Whether ``user`` (or one of ``teams``) uploaded the archive, and it is here."""
        check_digest(sha256)
        owners = [self._marker("user", user, sha256),
                  *(self._marker("team", team, sha256) for team in teams)]
        return self.has(sha256) and any(m is not None and m.is_file() for m in owners)

    def grant(self, sha256: str, user: str, teams: Iterable[str]) -> None:
        for marker in [self._marker("user", user, sha256),
                       *(self._marker("team", team, sha256) for team in teams)]:
            if marker is not None:
                marker.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
                marker.touch()

    def upload(self, sha256: str, max_bytes: int) -> Upload:
        """An upload of the archive ``sha256``: ``write`` its bytes, then ``commit``."""
        return Upload(self.path(sha256), sha256, max_bytes)

    def prune(self, keep: Iterable[str]) -> list[str]:
        """Remove every archive but ``keep``'s (a worker's copies, once no attempt it is to
        start names them: its pods have their own unpacked copies); the removed."""
        kept = set(keep)
        removed = []
        for blob in (self.root / "blobs").glob("*.tar.gz"):
            sha256 = blob.name.removesuffix(".tar.gz")
            if sha256 not in kept:
                blob.unlink(missing_ok=True)
                removed.append(sha256)
        return removed

    def touch(self, sha256: str) -> None:
        """Mark the archive used now (its retention counts from here)."""
        with contextlib.suppress(FileNotFoundError):
            os.utime(self.path(sha256))

    def prune_unused(self, needed: Collection[str], older_than: float,
                     now: float | None = None, *, dry_run: bool = False) -> PruneReport:
        """Remove the archives no job in ``needed`` names and unused for ``older_than``
        seconds, with their owners' markers (``dry_run``: only say which), and uploads left
        half-done as long ago."""
        cutoff = (time.time() if now is None else now) - older_than
        report = PruneReport()
        blobs = self.root / "blobs"
        for blob in sorted(blobs.glob("*.tar.gz")):
            sha256 = blob.name.removesuffix(".tar.gz")
            if sha256 in needed:
                report.kept_in_use += 1
                continue
            try:
                info = blob.stat()
            except FileNotFoundError:
                continue
            if info.st_mtime >= cutoff:
                report.kept_recent += 1
                continue
            if not dry_run:
                blob.unlink(missing_ok=True)
            report.removed.append(PrunedArchive(sha256, info.st_size,
                                                max(0.0, cutoff + older_than - info.st_mtime)))
        if dry_run:
            return report
        gone = {a.sha256 for a in report.removed}
        for marker in self.root.glob("owners/*/*/*"):
            if marker.name in gone:
                marker.unlink(missing_ok=True)
        for partial in blobs.glob(".upload-*"):
            try:
                if partial.stat().st_mtime < cutoff:
                    partial.unlink(missing_ok=True)
            except FileNotFoundError:
                pass
        return report

    def read(self, sha256: str) -> Iterator[bytes]:
        with open(self.path(sha256), "rb") as archive:
            while chunk := archive.read(CHUNK):
                yield chunk

    def _marker(self, kind: str, owner: str, sha256: str) -> Path | None:
        # Names of users and teams are checked where they are made; a name that could
        # leave its directory owns nothing here.
        if not owner or "/" in owner or owner.startswith("."):
            return None
        return self.root / "owners" / kind / owner / check_digest(sha256)


class Upload:
    """An archive being received: kept only once all of it came and hashes to its name."""

    def __init__(self, target: Path, sha256: str, max_bytes: int) -> None:
        target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(target.parent.parent, 0o700)
        self.target, self.sha256, self.max_bytes = target, sha256, max_bytes
        self.size = 0
        self._digest = hashlib.sha256()
        fd, self._temporary = tempfile.mkstemp(dir=target.parent, prefix=".upload-")
        self._out = os.fdopen(fd, "wb")

    def write(self, chunk: bytes) -> None:
        self.size += len(chunk)
        if self.size > self.max_bytes:
            self.abort()
            raise SpecError(
                f"the archive is larger than {self.max_bytes} bytes", field="body",
                fix="leave large files out with .phalanxignore (data belongs in a volume)")
        self._digest.update(chunk)
        self._out.write(chunk)

    def commit(self) -> int:
        """Keep the archive; its size. SpecError (nothing kept) if the bytes are not its."""
        self._out.close()
        if self._digest.hexdigest() != self.sha256:
            self.abort()
            raise SpecError("the body's SHA-256 is not the one in the path", field="sha256",
                            fix="send the archive's bytes to /v1/workdirs/<its sha256>")
        os.replace(self._temporary, self.target)  # atomic: readers see all of it or nothing
        return self.size

    def abort(self) -> None:
        self._out.close()
        if os.path.exists(self._temporary):
            os.unlink(self._temporary)

    def put(self, chunks: Iterable[bytes]) -> int:
        """Write ``chunks`` and commit (or abort on any error)."""
        try:
            for chunk in chunks:
                self.write(chunk)
        except BaseException:
            self.abort()
            raise
        return self.commit()
