"""The directory each pod of the local plane starts in: never the control plane's own.

Every pod of every attempt gets a fresh directory of its own,
``<root>/<job>.<attempt>/<pod>``, owned by the pod's user and owner-only (as is the
attempt's directory above it): a copy of the job's ``workdir`` archive unpacked into it,
a clone of its ``git`` commit, or, with neither, empty. A relative ``workingDir`` of the
pod set is taken inside it (and made), an absolute one is used as it is. The directories
of an attempt go when the plane forgets it.

``root`` is ``<home>/work``, or under ``/var/tmp`` when pods run as another user
(``poddirs.py``). Under ``--pod-uids`` the attempt's directory is the one ``uids.py``
makes and hands, with everything in it, to the attempt's uid before any pod starts; each
pod's HOME is then its own directory. The archives come from the plane's
``WorkdirStore``: the control plane's own when it drives the plane, a worker's copy
(fetched by hash) behind a worker.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tarfile
from collections.abc import Mapping
from pathlib import Path

from phalanx.compute.local.poddirs import attempt_workdir, own_tree, owned_dir
from phalanx.compute.local.users import PodUser
from phalanx.errors import SpecError
from phalanx.spec.resources import JobSpec, PodSet
from phalanx.spec.sources import WorkdirArchive
from phalanx.store.workdirs import WorkdirStore

GIT_TIMEOUT = 300.0


class PodWorkdirs:
    def __init__(self, root: Path, shared: bool, archives: WorkdirStore) -> None:
        """``shared``: pods run as another user than this process's (``root`` is then
        one they traverse)."""
        self.root = root
        self.shared = shared
        self.archives = archives

    def pod_dir(self, job: str, attempt: int, pod: str) -> Path:
        return attempt_workdir(self.root, job, attempt) / pod

    def check(self, job: JobSpec) -> None:
        """SpecError if the job's archive is not here (a launch then starts nothing)."""
        if isinstance(job.workdir, WorkdirArchive) and not self.archives.has(job.workdir.sha256):
            raise SpecError(f"workdir archive {job.workdir.sha256[:12]} is not on this machine",
                            field="workdir.sha256",
                            fix="submit the job again with the CLI or SDK, which upload it")

    def prepare(self, job: JobSpec, attempt: int, pod: str, pod_set: PodSet,
                owner: PodUser | None, git_env: Mapping[str, str] | None = None) -> str:
        """The pod's fresh directory, filled from the job's source and owned by ``owner``
        (None: this process's user, or under --pod-uids a uid handed it later); the
        directory the pod starts in (an absolute workingDir was checked by the plan).
        ``git_env``: the environment git clones in (``spec/gitrepo.py``'s ssh_key_env)."""
        attempt_dir = attempt_workdir(self.root, job.name, attempt)
        owned_dir(attempt_dir.parent, attempt_dir.name, owner, shared=self.shared)
        directory = attempt_dir / pod
        if directory.exists():  # a launch completed again after a restart: start clean
            shutil.rmtree(directory)
        directory.mkdir(mode=0o700)
        if isinstance(job.workdir, WorkdirArchive):
            with tarfile.open(self.archives.path(job.workdir.sha256), "r:gz") as tar:
                tar.extractall(directory, filter="data")  # no path leaves the directory
        elif job.git is not None and job.git.commit is not None:
            _clone(job.git.repo, job.git.commit, directory, git_env)
        working = pod_set.working_dir
        cwd = directory if working is None else directory / working
        if working is not None and os.path.isabs(working):
            cwd = Path(working)
        elif working is not None:
            cwd.mkdir(parents=True, exist_ok=True)
        if owner is not None and owner.uid != os.getuid():
            own_tree(directory, owner.uid, owner.gid)
        return str(cwd)

    def remove(self, job: str, attempt: int) -> None:
        shutil.rmtree(attempt_workdir(self.root, job, attempt), ignore_errors=True)


def _clone(repo: str, commit: str, directory: Path, env: Mapping[str, str] | None) -> None:
    """``commit`` of ``repo`` checked out in ``directory``: fetched alone where the server
    allows fetching a commit by name (most do), else with every branch and tag."""
    env = env or {**os.environ, "GIT_TERMINAL_PROMPT": "0"}
    _git(["init", "--quiet", str(directory)], repo, commit, env)
    if not _git(["-C", str(directory), "fetch", "--quiet", "--depth", "1", repo, commit],
                repo, commit, env, check=False):
        _git(["-C", str(directory), "fetch", "--quiet", repo,
              "+refs/heads/*:refs/remotes/origin/*", "+refs/tags/*:refs/tags/*"], repo, commit,
             env)
        _git(["-C", str(directory), "checkout", "--quiet", commit], repo, commit, env)
        return
    _git(["-C", str(directory), "checkout", "--quiet", "FETCH_HEAD"], repo, commit, env)


def _git(args: list[str], repo: str, commit: str, env: Mapping[str, str], *,
         check: bool = True) -> bool:
    try:
        done = subprocess.run(["git", *args], capture_output=True, text=True,
                              timeout=GIT_TIMEOUT, env=env, check=False,
                              stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SpecError(f"cannot clone {repo}: {exc}", field="git.repo",
                        fix="check that git is installed and the repository answers") from None
    if done.returncode != 0 and check:
        raise SpecError(f"cannot clone {repo} at {commit[:12]}: {done.stderr.strip()[:300]}",
                        field="git", fix="check the URL, that this machine may read it, and "
                                         "the commit")
    return done.returncode == 0

