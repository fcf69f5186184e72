"""A job's code sources, made ready to send: a directory packed and hashed, a git ref resolved.

``pack(directory)`` makes a gzipped tar of the directory without what its ``.gitignore``
files and its ``.phalanxignore`` leave out (gitignore's rules, through ``pathspec``), and
never the ``.git`` directory itself. The archive is the same bytes for the same files (names
sorted, times, owners and gzip's header zeroed), so an unchanged directory has the same
SHA-256 and is not uploaded again (``Client`` asks ``HEAD /v1/workdirs/{sha256}`` first).
A directory whose files add up to more than ``max_bytes`` is refused, naming its largest
files: data belongs in a volume, not in the code.

``resolve_commit(repo, ref)`` (``spec/gitrepo.py``) asks git for the commit ``ref`` names
(``git rev-parse`` in a local repository, ``git ls-remote`` otherwise), so every attempt of
the job runs that commit; a source with an ssh key secret is left to the control plane.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from phalanx.defaults import phalanx_home, replace_private
from phalanx.errors import SpecError

if TYPE_CHECKING:
    import pathspec
    from pydantic import BaseModel

    from phalanx.spec.manifests import Translation
    from phalanx.spec.resources import JobSpec
    from phalanx.spec.sources import WorkdirArchive, WorkdirPruneResult

M = TypeVar("M", bound="BaseModel")
WORKDIR_PATH = "/v1/workdirs/"

MAX_WORKDIR_BYTES = 256 * 2**20  # the files of a workdir, before packing
CACHE_FILE = "workdir-hashes.json"
IGNORE_FILES = (".gitignore", ".phalanxignore")
_BIGGEST_SHOWN = 5


@dataclass(frozen=True, slots=True)
class Packed:
    """A directory's archive: its bytes, their SHA-256 and how many files it holds."""

    data: bytes
    sha256: str
    files: int


def _ignored(directory: Path) -> pathspec.PathSpec:
    """The patterns of every ignore file in ``directory``'s tree, each anchored where it
    lies (as git reads nested .gitignore files)."""
    import pathspec  # here: submitting a job without a workdir does not load it

    lines: list[str] = []
    for root, dirs, files in os.walk(directory):
        dirs[:] = [d for d in dirs if d != ".git"]
        where = Path(root).relative_to(directory).as_posix()
        for name in IGNORE_FILES:
            if name not in files:
                continue
            for line in (Path(root) / name).read_text(errors="replace").splitlines():
                text = line.strip()
                if not text or text.startswith("#"):
                    continue
                if where != ".":
                    negate = "!" if text.startswith("!") else ""
                    text = text.removeprefix("!")
                    # A pattern with a slash (not at its end) is relative to its file's
                    # directory; one without matches at any depth below it.
                    inner = text.rstrip("/")
                    text = (f"{where}/{text.lstrip('/')}" if "/" in inner
                            else f"{where}/**/{text}")
                    text = negate + text
                lines.append(text)
    return pathspec.GitIgnoreSpec.from_lines(lines)


def workdir_files(directory: Path) -> list[tuple[str, Path]]:
    """The files (and symlinks) a pack of ``directory`` holds: (archive name, path), sorted."""
    ignored = _ignored(directory)
    found: list[tuple[str, Path]] = []
    for root, dirs, files in os.walk(directory):
        base = Path(root)
        rel_root = base.relative_to(directory).as_posix()
        prefix = "" if rel_root == "." else rel_root + "/"
        dirs[:] = sorted(d for d in dirs if d != ".git"
                         and not ignored.match_file(prefix + d + "/"))
        for name in files:
            rel = prefix + name
            if not ignored.match_file(rel):
                found.append((rel, base / name))
    return sorted(found)


def pack(directory: str | Path, max_bytes: int = MAX_WORKDIR_BYTES) -> Packed:
    """The archive of ``directory`` (SpecError naming the field ``workdir`` when it cannot)."""
    root = Path(directory).expanduser()
    if not root.is_dir():
        raise SpecError(f"{str(directory)!r} is not a directory", field="workdir",
                        fix="name the directory the job's pods start in, e.g. workdir: .")
    files = workdir_files(root)
    sizes = [(path.lstat().st_size, rel) for rel, path in files]
    total = sum(size for size, _ in sizes)
    if total > max_bytes:
        biggest = ", ".join(f"{rel} ({size / 2**20:.1f} MiB)"
                            for size, rel in sorted(sizes, reverse=True)[:_BIGGEST_SHOWN])
        raise SpecError(
            f"{root} holds {total / 2**20:.1f} MiB of files, above the {max_bytes / 2**20:.0f} "
            f"MiB a workdir may; the largest: {biggest}", field="workdir",
            fix="leave data and build output out with .phalanxignore or .gitignore (data "
                "belongs in a volume), or pack a smaller directory")
    import gzip  # with tarfile, only when a directory is packed: a CLI call that packs
    import tarfile  # none (most) does without them

    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for rel, path in files:
            info = tar.gettarinfo(str(path), arcname=rel)
            info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
            if info.isreg():
                info.mode = 0o755 if info.mode & stat.S_IXUSR else 0o644
                with open(path, "rb") as content:
                    tar.addfile(info, content)
            elif info.issym():
                tar.addfile(info)
    # Level 1: code compresses well at once; data (which should not be here) does not at all.
    data = gzip.compress(raw.getvalue(), compresslevel=1, mtime=0)
    return Packed(data=data, sha256=hashlib.sha256(data).hexdigest(), files=len(files))


def stat_signature(directory: Path) -> str:
    """A digest of what ``pack`` would read, by name and stat (size, mtime, ctime, inode):
    any write to a file changes its ctime, which no tool sets back."""
    digest = hashlib.sha256(str(directory.resolve()).encode())
    for rel, path in workdir_files(directory):
        info = path.lstat()
        digest.update(f"\0{rel}\0{info.st_size}:{info.st_mtime_ns}:{info.st_ctime_ns}:"
                      f"{info.st_ino}:{info.st_mode}".encode())
    return digest.hexdigest()


def resolve_commit(repo: str, ref: str, *, key: Mapping[str, bytes] | None = None,
                   local: bool = True) -> str:
    """``spec.gitrepo.resolve_commit``, loaded when first used: the client's other calls
    do without the spec's models it imports."""
    from phalanx.spec.gitrepo import resolve_commit as resolve

    return resolve(repo, ref, key=key, local=local)


class HashCache:
    """Which archive a directory packed to, by ``stat_signature``: a small owner-only file
    in the client's state directory (``$PHALANX_HOME``), so an unchanged directory is
    neither packed nor uploaded again, even by another process."""

    def __init__(self, path: Path, keep: int = 256) -> None:
        self.path = path
        self.keep = keep  # the newest entries kept

    @classmethod
    def default(cls) -> HashCache:
        return cls(phalanx_home() / CACHE_FILE)

    def _load(self) -> dict[str, dict[str, Any]]:
        try:
            loaded = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return {}
        return loaded if isinstance(loaded, dict) else {}

    def get(self, signature: str) -> WorkdirArchive | None:
        from phalanx.spec.sources import WorkdirArchive

        found = self._load().get(signature)
        try:
            return WorkdirArchive.model_validate(found) if found else None
        except ValueError:
            return None

    def put(self, signature: str, archive: WorkdirArchive) -> None:
        entries = self._load()
        entries.pop(signature, None)
        entries[signature] = archive.to_dict()
        kept = dict(list(entries.items())[-self.keep:])
        try:
            self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            replace_private(self.path, json.dumps(kept),
                            self.path.with_name(f".{self.path.name}.{os.getpid()}"))
        except OSError:
            pass  # a cache: without it the next submit packs again


class SourceCalls:
    """Mixed into ``Client``, which provides ``_request`` and ``_held``."""

    def _request(self, model: type[M], method: str, path: str, **kwargs: Any) -> M:
        raise NotImplementedError

    def _held(self, path: str) -> bool:
        raise NotImplementedError

    def upload_workdir(self, directory: str | Path,
                       max_bytes: int = MAX_WORKDIR_BYTES) -> WorkdirArchive:
        """Pack ``directory`` and upload it unless the control plane holds it for the
        caller already; what a job's ``workdir`` sends. A directory whose files have not
        changed since it was last packed here (``HashCache``) is not packed again."""
        from phalanx.spec.sources import WorkdirArchive

        root = Path(directory).expanduser()
        cache = HashCache.default()
        signature = stat_signature(root) if root.is_dir() else None
        known = cache.get(signature) if signature is not None else None
        if known is not None and self._held(f"{WORKDIR_PATH}{known.sha256}"):
            return known
        packed = pack(root, max_bytes)
        path = f"{WORKDIR_PATH}{packed.sha256}"
        if self._held(path):
            archive = WorkdirArchive(sha256=packed.sha256, size=len(packed.data))
        else:
            archive = self._request(WorkdirArchive, "PUT", path, content=packed.data,
                                    headers={"Content-Type": "application/gzip"})
        if signature is not None:
            cache.put(signature, archive)
        return archive

    def prune_workdirs(self, older_than: str | None = None, *,
                       dry_run: bool = False) -> WorkdirPruneResult:
        """(Admin) Remove the uploaded workdirs no job that has not ended names and no one
        used for ``older_than`` (e.g. "12h"; default: the control plane's retention)."""
        from phalanx.spec.sources import WorkdirPruneResult

        params = {"dryRun": "true" if dry_run else "false"}
        if older_than is not None:
            params["olderThan"] = older_than
        return self._request(WorkdirPruneResult, "POST", "/v1/workdirs:prune", params=params)

    def with_sources(self, spec: JobSpec, base: str | Path | None = None) -> JobSpec:
        """``spec`` as the control plane takes it: a ``workdir`` path (relative to ``base``,
        default the current directory) packed and uploaded, a git ref resolved to its
        commit. A spec whose sources are ready is returned as it is."""
        update: dict[str, Any] = {}
        if isinstance(spec.workdir, str):
            directory = Path(spec.workdir).expanduser()
            if not directory.is_absolute():
                directory = Path(base if base is not None else Path.cwd()) / directory
            update["workdir"] = self.upload_workdir(directory)
        # A git source with a key is resolved by the control plane, which holds the key.
        if spec.git is not None and spec.git.commit is None and spec.git.ssh_key_secret is None:
            update["git"] = spec.git.model_copy(
                update={"commit": resolve_commit(spec.git.repo, spec.git.ref)})
        return spec.model_copy(update=update) if update else spec

    def manifest_with_sources(self, item: Translation, base: str | Path | None = None,
                              ) -> Translation:
        """A manifest as the control plane takes it: the directory its workdir annotation
        names packed and uploaded as ``with_sources`` does, and the annotation naming the
        archive instead."""
        from phalanx.spec.sources import WorkdirArchive

        if not isinstance(item.spec.workdir, str):
            return item
        try:
            archive = self.with_sources(item.spec, base).workdir
        except SpecError as exc:  # about `workdir`: the annotation, in the manifest
            raise item.error_at_manifest(exc) from None
        assert isinstance(archive, WorkdirArchive)  # with_sources uploads a path
        return item.with_archive(archive)
