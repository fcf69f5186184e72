"""The Kubernetes plane's Lease and the fence in its pods, against the API mock over HTTP.

The fence runs as a real process (the script a pod runs, from its own file), its
rank a real child process; the Lease is renewed by a real process through
``KubeLease``, and killed with SIGKILL as a worker would be.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from phalanx.compute.factory import plane_lease
from phalanx.compute.kubernetes import KubernetesPlane, Settings, fence, fencing
from phalanx.compute.kubernetes.client import KubeClient, configure
from phalanx.compute.kubernetes.lease import KubeLease, expiry_of, lease_name
from phalanx.compute.kubernetes.status import observe_pod
from phalanx.errors import SpecError
from tests.k8s_plane.conftest import RUNS, PlaneFactory, wait_until
from tests.k8s_plane.fake_apiserver import FakeAPIServer
from tests.k8s_plane.helpers import admit, gang, pods

FENCE_SCRIPT = Path(fence.__file__)
FENCE_IMAGE = "registry.example.com/phalanx:1"


@pytest.fixture
def client(kubeconfig: Path) -> Iterator[KubeClient]:
    configuration, _ = configure(kubeconfig=kubeconfig)
    kube = KubeClient(configuration)
    yield kube
    kube.close()


def test_the_lease_reads_back_what_was_renewed(api: FakeAPIServer, client: KubeClient) -> None:
    lease = KubeLease(client, RUNS, lease_name("gcp-a"), holder="gcp-a@worker-1")
    assert lease.where == f"{RUNS}/phalanx-plane-gcp-a"
    assert lease.expires_at() is None  # never written: lapsed
    expires = time.time() + 30.5
    lease.renew(expires)
    stored = api.get("leases", "phalanx-plane-gcp-a", RUNS)
    assert stored is not None
    assert stored["spec"]["holderIdentity"] == "gcp-a@worker-1"
    assert stored["spec"]["leaseDurationSeconds"] == 31
    # renewTime + leaseDurationSeconds is exactly the expiry asked for (to the microsecond).
    assert lease.expires_at() == pytest.approx(expires, abs=1e-5)
    later = expires + 60
    lease.renew(later)  # the second renewal patches the same object
    assert lease.expires_at() == pytest.approx(later, abs=1e-5)
    assert len(api.list("leases", RUNS)) == 1
    lease.release()
    released = lease.expires_at()
    assert released is not None and released <= time.time()


RENEWER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from phalanx.compute.kubernetes.client import KubeClient, configure
    from phalanx.compute.kubernetes.lease import KubeLease
    configuration, _ = configure(kubeconfig=Path(sys.argv[1]))
    lease = KubeLease(KubeClient(configuration), sys.argv[2], sys.argv[3], holder="renewer")
    ttl = float(sys.argv[4])
    while True:
        lease.renew(time.time() + ttl)
        print("renewed", flush=True)
        time.sleep(ttl / 8)
""")

CHILD = textwrap.dedent("""
    import os, sys, time
    from pathlib import Path
    Path(sys.argv[1]).write_text(str(os.getpid()))
    while True:
        with open(sys.argv[2], "a") as beats:
            beats.write(f"{time.time()}\\n")
        time.sleep(0.05)
""")


def _fence(api: FakeAPIServer, tmp_path: Path, lease: str, *extra: str
           ) -> subprocess.Popen[bytes]:
    token = tmp_path / "token"
    token.write_text("fake-token\n")
    child = tmp_path / "child.py"
    child.write_text(CHILD)
    # The script alone, as the pod runs it: no package import, no PYTHONPATH.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.Popen(
        [sys.executable, "-I", str(FENCE_SCRIPT), "--lease", f"{RUNS}/{lease}",
         "--api", api.url, "--token-file", str(token), "--poll", "0.1", "--grace", "2",
         "--termination-log", str(tmp_path / "termination-log"), *extra, "--", sys.executable, str(child), str(tmp_path / "pid"),
         str(tmp_path / "beats")],
        env=env, stderr=subprocess.PIPE)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _beats(tmp_path: Path) -> list[float]:
    path = tmp_path / "beats"
    return [float(x) for x in path.read_text().split()] if path.exists() else []


def test_a_rank_outlives_renewals_and_stops_when_the_renewer_is_killed(
    api: FakeAPIServer, kubeconfig: Path, tmp_path: Path,
) -> None:
    ttl = 1.5
    renewer = subprocess.Popen(
        [sys.executable, "-c", RENEWER, str(kubeconfig), RUNS, "plane-lease", str(ttl)],
        stdout=subprocess.PIPE, text=True)
    try:
        assert renewer.stdout is not None
        assert renewer.stdout.readline().strip() == "renewed"
        fenced = _fence(api, tmp_path, "plane-lease")
        pid = int(wait_until(lambda: (tmp_path / "pid").exists()
                             and (tmp_path / "pid").read_text(), what="the rank to start"))
        # Run for several lease durations while the renewer renews: the rank keeps running.
        wait_until(lambda: len(_beats(tmp_path)) > 1
                   and _beats(tmp_path)[-1] - _beats(tmp_path)[0] > 3 * ttl,
                   timeout=60, what="the rank to run for three lease durations")
        assert fenced.poll() is None and _alive(pid)
        os.kill(renewer.pid, signal.SIGKILL)  # the worker, killed: nothing renews any more
        renewer.wait()
        killed_at = time.time()
        status = fenced.wait(timeout=60)
    finally:
        if renewer.poll() is None:
            renewer.kill()
    assert status == fence.FENCED_EXIT
    assert fenced.stderr is not None and b"lease was not renewed" in fenced.stderr.read()
    # The plane reads the end as the fence's, not the job's (a system failure).
    message = (tmp_path / "termination-log").read_text()
    assert fence.was_fenced(status, message)
    observed = observe_pod({"status": {"phase": "Failed", "containerStatuses": [{
        "name": "main", "state": {"terminated": {"exitCode": status, "reason": "Error",
                                                 "message": message}}}]}})
    assert (observed.reason, observed.failure) == ("Fenced", "system")
    own = observe_pod({"status": {"phase": "Failed", "containerStatuses": [{
        "name": "main", "state": {"terminated": {"exitCode": 75, "reason": "Error"}}}]}})
    assert own.failure == "user"  # a job's own exit 75, without the fence's message
    assert not _alive(pid)
    # The rank ran until the lease lapsed, not beyond it by more than a lease duration.
    stored = api.get("leases", "plane-lease", RUNS)
    assert stored is not None
    expires = expiry_of(stored)
    assert expires is not None and expires > killed_at - ttl
    last_beat = _beats(tmp_path)[-1]
    assert last_beat - expires < 2 * ttl


def test_a_lease_that_lapses_or_cannot_be_read_fences_the_rank(
    api: FakeAPIServer, client: KubeClient, tmp_path: Path,
) -> None:
    KubeLease(client, RUNS, "cut-off", holder="w").renew(time.time() + 3600)
    fenced = _fence(api, tmp_path, "cut-off")
    pid = int(wait_until(lambda: (tmp_path / "pid").exists()
                         and (tmp_path / "pid").read_text(), what="the rank to start"))
    # Renewed once more, to lapse in a second, and never again: the rank must stop.
    KubeLease(client, RUNS, "cut-off", holder="w").renew(time.time() + 1)
    wait_until(lambda: fenced.poll() is not None, timeout=60, what="the fence")
    assert fenced.returncode == fence.FENCED_EXIT and not _alive(pid)
    api.stop()
    # Fail closed: a fence that can never read its lease stops its rank after first-read.
    again = _fence(api, tmp_path, "cut-off", "--first-read", "1")
    assert again.wait(timeout=60) == fence.FENCED_EXIT
    assert b"cannot read the lease" in (again.stderr.read() if again.stderr else b"")


def test_a_deleted_lease_fences_and_a_finished_rank_keeps_its_status(
    api: FakeAPIServer, client: KubeClient, tmp_path: Path,
) -> None:
    KubeLease(client, RUNS, "gone", holder="w").renew(time.time() + 3600)
    token = tmp_path / "token"
    token.write_text("fake-token")
    done = subprocess.run(
        [sys.executable, "-I", str(FENCE_SCRIPT), "--lease", f"{RUNS}/gone", "--api", api.url,
         "--token-file", str(token), "--poll", "0.1", "--", sys.executable, "-c",
         "import sys; sys.exit(3)"], timeout=60, check=False)
    assert done.returncode == 3  # the rank's own status passes through
    fenced = _fence(api, tmp_path, "gone")
    wait_until(lambda: (tmp_path / "pid").exists(), what="the rank to start")
    assert api.delete("leases", "gone", RUNS) is not None  # the plane was removed
    assert fenced.wait(timeout=60) == fence.FENCED_EXIT


def test_a_fenced_plane_wraps_every_rank_and_renews_its_lease(
    api: FakeAPIServer, make_plane: PlaneFactory, tmp_path: Path,
) -> None:
    api.add_node("gpu-1", cpu="32", memory="256Gi", gpus=8)
    plane: KubernetesPlane = make_plane(plane="gcp-a", fence_image=FENCE_IMAGE)
    job = gang("ddp", replicas=2)
    plane.launch(job, 1, admit(job, ["gpu-1", "gpu-1"]))
    created = wait_until(lambda: len(pods(api, "ddp")) == 2 and pods(api, "ddp"))
    for pod in created:
        container = pod["spec"]["containers"][0]
        assert container["command"] == ["python3", fencing.SCRIPT, "--", "torchrun",
                                        "train.py"]
        env = {e["name"]: e["value"] for e in container["env"]}
        assert env[fence.LEASE_ENV] == f"{RUNS}/phalanx-plane-gcp-a"
        init = pod["spec"]["initContainers"][0]
        assert init["image"] == FENCE_IMAGE
        assert {"name": fencing.VOLUME, "emptyDir": {}} in pod["spec"]["volumes"]
        assert pod["spec"]["automountServiceAccountToken"] is True
    # The worker renews the plane's Lease through the factory's lease of that plane.
    lease = plane_lease(plane, tmp_path / "unused.json", holder="w", fence_after=600)
    assert isinstance(lease, KubeLease)
    # No fence given to the plane: the ranks' fence reads every 10 s and gives 10 s of
    # grace: the pods stop within two reads (12 s late, 5 s slow each), 1 s of rounding
    # and 10 s of grace of the Lease lapsing.
    assert (env[fence.POLL_ENV], env[fence.GRACE_ENV]) == ("10", "10")
    assert lease.stops_within == 45.0
    lease.renew(time.time() + 600)
    assert api.get("leases", "phalanx-plane-gcp-a", RUNS) is not None
    # The init container's copy is the script itself: what it copies is what runs.
    assert "import shutil, phalanx.compute.kubernetes.fence" in init["command"][2]


def test_an_in_process_plane_does_not_fence(api: FakeAPIServer,
                                            make_plane: PlaneFactory) -> None:
    api.add_node("gpu-1", cpu="32", memory="256Gi", gpus=8)
    plane = make_plane()
    assert plane.plane_lease is None
    job = gang("plain", replicas=1)
    plane.launch(job, 1, admit(job, ["gpu-1"]))
    pod = wait_until(lambda: pods(api, "plain"))[0]
    assert pod["spec"]["containers"][0]["command"] == ["torchrun", "train.py"]
    assert "initContainers" not in pod["spec"]


def test_a_fenced_plane_needs_the_fence_image(kubeconfig: Path, tmp_path: Path) -> None:
    with pytest.raises(SpecError) as caught:
        KubernetesPlane.connect(home=tmp_path, kubeconfig=kubeconfig, namespace=RUNS,
                                settings=Settings(namespace=RUNS), plane="gcp-a")
    assert caught.value.field == "PHALANX_K8S_FENCE_IMAGE"


def test_a_rank_without_a_command_cannot_be_fenced() -> None:
    pod = {"spec": {"containers": [{"name": "main", "image": "x"}]}}
    with pytest.raises(SpecError) as caught:
        fencing.wrap(pod, fencing.Fence(RUNS, "l", FENCE_IMAGE), "podSets[0]")
    assert caught.value.field == "podSets[0].command"
