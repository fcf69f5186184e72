"""Talking to a git source's repository: a ref resolved to its commit, an ssh key handed to git.

The CLI and SDK resolve a ``git`` source's ref before they submit (``resolve_commit``); the
control plane does it for a source that names an ssh key secret, whose value only it may
read. Wherever git runs with such a key (resolving at submit, cloning on the local plane
or behind a worker), the key is written to a private directory of its own for that one
use (``ssh_key_env``: the directory 0700, the key 0600) and removed as soon as git is done;
``GIT_SSH_COMMAND`` points ssh at it. A ``known_hosts`` key of the secret, if any, is the
only host key ssh then accepts; without one ssh accepts the host's key it is first shown
(``StrictHostKeyChecking=accept-new``, against the machine's own known hosts).
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from phalanx.errors import SpecError
from phalanx.spec.secrets import SSH_KEY
from phalanx.spec.sources import GIT_COMMIT

if TYPE_CHECKING:
    from phalanx.spec.resources import JobSpec

KNOWN_HOSTS = "known_hosts"  # an ssh secret's optional key: the hosts ssh may trust
GIT_TIMEOUT = 60.0


def ssh_command(key_file: str, known_hosts: str | None) -> str:
    """The ``GIT_SSH_COMMAND`` that makes ssh use ``key_file`` and only it."""
    hosts = (["-o", f"UserKnownHostsFile={known_hosts}", "-o", "StrictHostKeyChecking=yes"]
             if known_hosts else ["-o", "StrictHostKeyChecking=accept-new"])
    return shlex.join(["ssh", "-i", key_file, "-o", "IdentitiesOnly=yes",
                       "-o", "BatchMode=yes", *hosts])


@contextmanager
def ssh_key_env(key: Mapping[str, bytes] | None, parent: Path | None = None,
                ) -> Iterator[dict[str, str]]:
    """The environment git runs in: with ``key`` (an ssh secret's files), the key written
    to a fresh owner-only directory under ``parent`` (default the system's temporary
    directory) and ``GIT_SSH_COMMAND`` set to use it; the directory is removed on exit,
    whatever git did. Never prompts for a password."""
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0"}
    if not key:
        yield env
        return
    if parent is not None:
        parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    directory = Path(tempfile.mkdtemp(prefix="git-ssh-", dir=parent))  # 0700
    try:
        key_file = directory / "id"
        _write_private(key_file, key[SSH_KEY])
        hosts = None
        if KNOWN_HOSTS in key:
            hosts = directory / KNOWN_HOSTS
            _write_private(hosts, key[KNOWN_HOSTS])
        env["GIT_SSH_COMMAND"] = ssh_command(str(key_file), str(hosts) if hosts else None)
        env.pop("GIT_SSH", None)  # one way to run ssh: the command above
        yield env
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def _write_private(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        # ssh reads a key only up to a final newline; a pasted key often lacks it.
        os.write(fd, data if data.endswith(b"\n") else data + b"\n")
    finally:
        os.close(fd)


def resolve_commit(repo: str, ref: str, *, key: Mapping[str, bytes] | None = None,
                   local: bool = True) -> str:
    """The commit ``ref`` names in ``repo`` (SpecError naming ``git.ref`` if none), asked
    with ``key`` (an ssh secret's files) if given. ``local``: a repository that is a
    directory here is read with ``git rev-parse`` (the client's case); otherwise, and
    always on the control plane, ``git ls-remote`` asks it as a remote."""
    if GIT_COMMIT.fullmatch(ref):
        return ref
    directory = Path(repo.removeprefix("file://")).expanduser() if local else None
    in_place = directory is not None and directory.is_dir()
    if in_place:
        argv = ["git", "-C", str(directory), "rev-parse", "--verify", "--quiet",
                f"{ref}^{{commit}}"]
    else:
        argv = ["git", "ls-remote", "--", repo, ref]
    with ssh_key_env(key) as env:
        if not local:
            # The control plane asks with a key only over ssh: never a path of its machine.
            env["GIT_ALLOW_PROTOCOL"] = "ssh"
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=GIT_TIMEOUT,
                                  env=env, check=False, stdin=subprocess.DEVNULL)
        except FileNotFoundError:
            raise SpecError("git is not installed here", field="git",
                            fix="install git, or give git.commit yourself") from None
        except subprocess.TimeoutExpired:
            raise SpecError(f"git did not answer about {repo} within {GIT_TIMEOUT:g}s",
                            field="git.repo", fix="check the URL and the network") from None
    lines = done.stdout.split("\n")
    if in_place:
        commit = lines[0].strip() if done.returncode == 0 else ""
    else:
        # ls-remote lists the ref and, for an annotated tag, the commit it points at (^{}).
        found: dict[str, str] = {}
        for line in lines:
            sha, tab, name = line.partition("\t")
            if tab:
                found[name.strip()] = sha.strip()
        commit = next((found[name] for name in (f"refs/tags/{ref}^{{}}", f"refs/heads/{ref}",
                                                  f"refs/tags/{ref}", ref) if name in found),
                      next(iter(found.values()), ""))
        if done.returncode != 0:
            raise SpecError(f"git cannot read {repo}: {done.stderr.strip()[:300]}",
                            field="git.repo", fix="check the URL and that "
                            + ("the key of git.sshKeySecret may read it" if key
                               else "you may read it"))
    if not GIT_COMMIT.fullmatch(commit):
        raise SpecError(f"{repo} has no branch, tag or commit {ref!r}", field="git.ref",
                        fix="name a branch, tag or commit the repository has")
    return commit


def with_commit(spec: JobSpec, key: Mapping[str, bytes]) -> JobSpec:
    """``spec`` with its git source's ref resolved, with ``key``, as the control plane
    resolves a source that names an ssh key secret (as a remote: never a directory of the
    control plane's machine read in place). A spec with its commit is returned as it is."""
    git = spec.git
    if git is None or git.commit is not None:
        return spec
    commit = resolve_commit(git.repo, git.ref, key=key, local=False)
    return spec.model_copy(update={"git": git.model_copy(update={"commit": commit})})
