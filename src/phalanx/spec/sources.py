"""Where a job's code comes from: the submitter's directory (``workdir``) or a git commit.

Users write ``workdir: ./src`` (a path on their machine) or ``git: {repo, ref}``. The CLI
and SDK turn a path into the content hash of its packed archive, which they upload once
(``PUT /v1/workdirs/{sha256}``), and resolve a git ref to its commit, so what reaches the
control plane is ``workdir: {sha256, size}`` or ``git: {repo, ref, commit}``: every
attempt of the job then runs the same code. The control plane refuses a path or a git
source without a commit at submit (``check_resolved``): it cannot read its clients' disks.
A git source that names an ssh key secret (``sshKeySecret``) is the exception: its key is
the control plane's to use, not the client's to read, so the control plane resolves the
ref with it at submit.
"""

from __future__ import annotations

import re
import secrets
from typing import Annotated

from pydantic import BeforeValidator, Field, WithJsonSchema, model_validator

from phalanx.errors import SpecError
from phalanx.spec.base import Model
from phalanx.spec.secrets import SecretRef

SHA256 = re.compile(r"[0-9a-f]{64}")
GIT_COMMIT = re.compile(r"[0-9a-f]{40}([0-9a-f]{24})?")  # SHA-1 or SHA-256 object names
# Where a pod of a job with a code source starts (Kubernetes: the emptyDir's mount).
WORKDIR_MOUNT = "/workdir"


class WorkdirArchive(Model):
    """A packed directory the control plane holds: the wire form of ``workdir``."""

    sha256: str = Field(pattern=f"^{SHA256.pattern}$",
                        description="The SHA-256 of the archive (a gzipped tar), lower-case hex")
    size: int = Field(default=0, ge=0, description="The archive's size in bytes")


class PrunedWorkdir(Model):
    sha256: str
    size: int = Field(description="Bytes freed")
    idle_seconds: float = Field(description="Since its last upload, HEAD or submit")


class WorkdirPruneResult(Model):
    """What a pruning pass of the uploaded workdirs removed, and what it kept."""

    removed: list[PrunedWorkdir]
    removed_bytes: int
    kept_in_use: int = Field(description="Archives a job that has not ended names")
    kept_recent: int = Field(description="Archives used within olderThan")
    older_than: float = Field(description="Seconds of disuse after which an archive goes")
    dry_run: bool = Field(description="Nothing was removed: what would have been")


def _path_or_archive(value: object) -> object:
    if isinstance(value, str) and not value.strip():
        raise ValueError("workdir is empty; name a directory, e.g. workdir: .")
    return value


# The user's form is a path (the CLI and SDK upload it); the wire form is the archive.
Workdir = Annotated[
    str | WorkdirArchive,
    BeforeValidator(_path_or_archive),
    WithJsonSchema({
        "anyOf": [{"type": "string", "description": "A directory on the submitter's "
                   "machine; the CLI and SDK pack and upload it and send its hash"},
                  {"$ref": "#/components/schemas/WorkdirArchive"}],
    }),
]


class GitSource(Model):
    """A git repository at one commit, cloned into each pod's working directory."""

    repo: str = Field(min_length=1, description="A URL git clones from (https://, ssh://, "
                      "git@host:path, file://)")
    ref: str = Field(default="HEAD", min_length=1,
                     description="A branch, tag or commit; resolved to a commit at submit")
    commit: str | None = Field(
        default=None, pattern=f"^{GIT_COMMIT.pattern}$",
        description="The commit every attempt runs; the CLI and SDK resolve ref to it (the "
                    "control plane does, with the key, for a repository that needs one)")
    ssh_key_secret: SecretRef | None = Field(
        default=None, description="A secret of type ssh (NAME or TEAM/NAME) whose "
        "ssh-privatekey git uses to resolve the ref and to clone, for a private repository "
        "reached over ssh (ssh:// or user@host:path)")

    @model_validator(mode="after")
    def _key_needs_ssh(self) -> GitSource:
        if self.ssh_key_secret is not None and not is_ssh_url(self.repo):
            raise ValueError(f"sshKeySecret is given but repo {self.repo[:200]!r} is not "
                             "reached over ssh; write ssh://host/path or user@host:path, or "
                             "remove sshKeySecret")
        return self


def is_ssh_url(repo: str) -> bool:
    """Whether git reaches ``repo`` over ssh: ``ssh://`` (or ``git+ssh://``) or the scp-like
    ``[user@]host:path`` (a colon before any slash, no scheme)."""
    if repo.startswith(("ssh://", "git+ssh://", "ssh+git://")):
        return True
    head, colon, _ = repo.partition(":")
    return bool(colon) and bool(head) and "/" not in head and "://" not in repo \
        and not head.startswith("-")


def check_resolved(workdir: object, git: GitSource | None) -> None:
    """SpecError unless the sources are in the form the control plane takes (a git source
    with a key may come unresolved: the control plane resolves it with the key)."""
    if isinstance(workdir, str):
        raise SpecError(
            f"workdir {workdir!r} is a path on the submitter's machine", field="workdir",
            fix="submit with the phalanx CLI or SDK, which upload the directory and send "
                "{sha256: ...}")
    if git is not None and git.commit is None and git.ssh_key_secret is None:
        raise SpecError(
            f"git ref {git.ref!r} is not resolved to a commit", field="git.commit",
            fix="submit with the phalanx CLI or SDK, which resolve it, or give the commit")


# A prefix to which 5 characters are added makes a name (a DNS label of at most 63).
GENERATE_NAME = re.compile(r"[a-z0-9][-a-z0-9]{0,57}")
_SUFFIX_ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789"
SUFFIX_LENGTH = 5


def generated_name(prefix: str) -> str:
    """``prefix`` and 5 random lowercase letters and digits, as Kubernetes' generateName."""
    suffix = "".join(secrets.choice(_SUFFIX_ALPHABET) for _ in range(SUFFIX_LENGTH))
    return f"{prefix[:63 - SUFFIX_LENGTH]}{suffix}"
