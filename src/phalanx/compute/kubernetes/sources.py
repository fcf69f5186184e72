"""A job's code on Kubernetes: an init container fills an emptyDir the pod starts in.

With ``workdir``, the init container (a Python image) exchanges the attempt's credential
(``credentials.py``, the same Secret the job's container mounts) for a token, fetches the
archive from the control plane (``GET /v1/workdirs/{sha256}``), checks its SHA-256 and
unpacks it; with ``git``, one (a git image) clones the recorded commit (with the key of
``git.sshKeySecret``, if named, from a Secret of the attempt that only the init container
mounts). Either way the
main container's working directory is the emptyDir at ``/workdir`` (a relative
``workingDir`` inside it), so every pod of every attempt starts in its own copy.
"""

from __future__ import annotations

from typing import Any

from phalanx.compute.kubernetes.credentials import KEY, MOUNT_PATH, VOLUME
from phalanx.errors import SpecError
from phalanx.spec.resources import JobSpec
from phalanx.spec.sources import WORKDIR_MOUNT, WorkdirArchive

Object = dict[str, Any]
SOURCE_VOLUME = "phalanx-workdir"
GIT_KEY_VOLUME = "phalanx-git-ssh"
GIT_KEY_MOUNT = "/var/run/secrets/phalanx-git"
INIT_CONTAINER = "phalanx-workdir"
DEFAULT_FETCH_IMAGE = "python:3.12-slim"
DEFAULT_GIT_IMAGE = "alpine/git:2.47.2"

# Standard library only, Python 3.12: the token exchange, the fetch, the check, the unpack.
_FETCH = """\
import hashlib, io, json, os, tarfile, urllib.request
url, sha = os.environ["PHALANX_URL"].rstrip("/"), os.environ["PHALANX_WORKDIR_SHA256"]
key = open(os.environ["PHALANX_API_KEY_FILE"]).read().strip()
ask = urllib.request.Request(url + "/v1/auth/token", data=json.dumps({"key": key}).encode(),
                             headers={"Content-Type": "application/json"})
token = json.load(urllib.request.urlopen(ask, timeout=60))["token"]
get = urllib.request.Request(url + "/v1/workdirs/" + sha,
                             headers={"Authorization": "Bearer " + token})
data = urllib.request.urlopen(get, timeout=600).read()
if hashlib.sha256(data).hexdigest() != sha:
    raise SystemExit("the workdir archive's SHA-256 is not " + sha)
tarfile.open(fileobj=io.BytesIO(data), mode="r:gz").extractall(os.environ["WORKDIR"],
                                                               filter="data")
print("unpacked workdir", sha[:12])
"""

# Fetch the commit alone where the server allows it (most do), else every branch and tag.
# With a key (git.sshKeySecret), ssh uses it alone, and the secret's known_hosts if it has one.
_CLONE = """\
set -e
if [ -n "$GIT_SSH_KEY_DIR" ]; then
  hosts="-o StrictHostKeyChecking=accept-new"
  if [ -f "$GIT_SSH_KEY_DIR/known_hosts" ]; then
    hosts="-o UserKnownHostsFile=$GIT_SSH_KEY_DIR/known_hosts -o StrictHostKeyChecking=yes"
  fi
  export GIT_SSH_COMMAND="ssh -i $GIT_SSH_KEY_DIR/ssh-privatekey -o IdentitiesOnly=yes \\
-o BatchMode=yes $hosts"
fi
git init -q "$WORKDIR"
cd "$WORKDIR"
if git fetch -q --depth 1 "$GIT_REPO" "$GIT_COMMIT"; then
  git checkout -q FETCH_HEAD
else
  git fetch -q "$GIT_REPO" '+refs/heads/*:refs/remotes/origin/*' '+refs/tags/*:refs/tags/*'
  git checkout -q "$GIT_COMMIT"
fi
echo "checked out $GIT_COMMIT"
"""


def check_working_dirs(job: JobSpec) -> None:
    """A relative workingDir is inside the job's code; without a source there is none to
    be inside (a container's working directory is the image's then)."""
    if job.workdir is not None or job.git is not None:
        return
    for i, pod_set in enumerate(job.pod_sets):
        if pod_set.working_dir is not None and not pod_set.working_dir.startswith("/"):
            raise SpecError(
                f"workingDir {pod_set.working_dir!r} is relative and the job has no workdir "
                "or git source to be relative to", field=f"podSets[{i}].workingDir",
                fix="give an absolute directory of the image, or a workdir or git source")


def working_dir(working: str | None) -> str:
    """The container's workingDir: the source's emptyDir, or a relative one inside it."""
    if working is None:
        return WORKDIR_MOUNT
    return working if working.startswith("/") else f"{WORKDIR_MOUNT}/{working}"


def git_key_secret(attempt_name: str) -> str:
    """The attempt's Secret holding the key of its git source (``secretdata.py``)."""
    return f"{attempt_name}-git"


def add_source(spec: Object, container: Object, job: JobSpec, working: str | None, *,
               api_url: str | None, attempt_name: str,
               fetch_image: str = DEFAULT_FETCH_IMAGE,
               git_image: str = DEFAULT_GIT_IMAGE) -> None:
    """Give the pod (``spec``, its main ``container``) the job's code, if it has a source;
    ``working`` is the pod set's workingDir."""
    if job.workdir is None and job.git is None:
        return
    env = [{"name": "WORKDIR", "value": WORKDIR_MOUNT}]
    mounts: list[Object] = [{"name": SOURCE_VOLUME, "mountPath": WORKDIR_MOUNT}]
    if isinstance(job.workdir, WorkdirArchive):
        if api_url is None:
            raise SpecError("the job's workdir is fetched with the attempt's credential, and "
                            "this launch has none", field="workdir",
                            fix="run the control plane with an API URL its pods reach "
                                "(phalanx up --pod-api-url)")
        image, command = fetch_image, ["python3", "-c", _FETCH]
        env += [{"name": "PHALANX_URL", "value": api_url},
                {"name": "PHALANX_API_KEY_FILE", "value": f"{MOUNT_PATH}/{KEY}"},
                {"name": "PHALANX_WORKDIR_SHA256", "value": job.workdir.sha256}]
        mounts.append({"name": VOLUME, "mountPath": MOUNT_PATH, "readOnly": True})
    elif job.git is not None and job.git.commit is not None:
        image, command = git_image, ["sh", "-c", _CLONE]
        env += [{"name": "GIT_REPO", "value": job.git.repo},
                {"name": "GIT_COMMIT", "value": job.git.commit},
                {"name": "GIT_TERMINAL_PROMPT", "value": "0"}]
        if job.git.ssh_key_secret is not None:
            # The key reaches the init container alone, never the job's own containers.
            if api_url is None:
                raise SpecError("the key of git.sshKeySecret travels in the attempt's "
                                "Secrets, and this launch has none", field="git.sshKeySecret",
                                fix="run the control plane with an API URL its pods reach "
                                    "(phalanx up --pod-api-url)")
            env.append({"name": "GIT_SSH_KEY_DIR", "value": GIT_KEY_MOUNT})
            mounts.append({"name": GIT_KEY_VOLUME, "mountPath": GIT_KEY_MOUNT,
                           "readOnly": True})
            spec.setdefault("volumes", []).append({"name": GIT_KEY_VOLUME, "secret": {
                "secretName": git_key_secret(attempt_name), "defaultMode": 0o400}})
    else:
        raise SpecError("the job's git source has no commit", field="git.commit",
                        fix="submit with the CLI or SDK, which resolve the ref")
    # The pod's QoS class counts init containers too: the same cpu and memory as the main
    # container keeps a Guaranteed pod (cpuPinning: exclusive) Guaranteed.
    amounts = {kind: {name: value for name, value in container.get("resources", {})
                      .get(kind, {}).items() if name in ("cpu", "memory")}
               for kind in ("requests", "limits")}
    init: Object = {"name": INIT_CONTAINER, "image": image, "command": command, "env": env,
                    "volumeMounts": mounts}
    if any(amounts.values()):
        init["resources"] = {kind: value for kind, value in amounts.items() if value}
    spec.setdefault("initContainers", []).append(init)
    spec.setdefault("volumes", []).append({"name": SOURCE_VOLUME, "emptyDir": {}})
    container.setdefault("volumeMounts", []).append(
        {"name": SOURCE_VOLUME, "mountPath": WORKDIR_MOUNT})
    container["workingDir"] = working_dir(working)
