"""The control loop driving the plane: success, failures and their budgets, cancel, restart."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from phalanx.compute.kubernetes import KubernetesPlane
from phalanx.control import Controller
from phalanx.spec.resources import JobSpec
from phalanx.spec.status import JobStatus
from phalanx.store import Store
from tests.k8s_plane.conftest import RUNS, PlaneFactory, wait_until
from tests.k8s_plane.fake_apiserver import FakeAPIServer
from tests.k8s_plane.helpers import gang, pods


class Loop:
    """A controller stepped by the test (no thread), over a plane and a store in ``home``."""

    def __init__(self, plane: KubernetesPlane, home: Path) -> None:
        self.store = Store.for_home(home)
        self.controller = Controller(self.store, plane, grace_seconds=1.0)

    def until(self, condition: Callable[[], Any], what: str, timeout: float = 10.0) -> Any:
        def stepped() -> Any:
            self.controller.step()
            return condition()

        return wait_until(stepped, timeout, what)

    def status(self, name: str) -> JobStatus:
        return self.controller.get(name).status

    def close(self) -> None:
        self.store.close()


@pytest.fixture
def loops(tmp_path: Path) -> Iterator[list[Loop]]:
    made: list[Loop] = []
    yield made
    for loop in made:
        loop.close()


@pytest.fixture
def start(api: FakeAPIServer, make_plane: PlaneFactory, loops: list[Loop],
          tmp_path: Path) -> Callable[..., Loop]:
    for name in ("gpu-1", "gpu-2"):
        api.add_node(name, cpu="32", memory="256Gi", gpus=8)

    def make(**settings: Any) -> Loop:
        loop = Loop(make_plane(**settings), tmp_path / "home")
        loops.append(loop)
        return loop

    return make


def _job(name: str = "ddp", replicas: int = 4, **restart: Any) -> JobSpec:
    job = gang(name, replicas)
    return job.model_copy(update={"restart": job.restart.model_copy(update=restart)})


def _start_all(api: FakeAPIServer, job: str) -> list[str]:
    names = [p["metadata"]["name"] for p in pods(api, job)]
    for name in names:
        api.start_pod(RUNS, name)
    return names


def test_running_then_succeeded(api: FakeAPIServer, start: Callable[..., Loop],
                                tmp_path: Path) -> None:
    loop = start()
    loop.controller.submit(_job())
    loop.until(lambda: len(pods(api, "ddp")) == 4, "four pods")
    assert loop.status("ddp") is JobStatus.STARTING
    names = _start_all(api, "ddp")
    for rank, name in enumerate(names):
        api.write_log(RUNS, name, f"rank {rank} step 1\n".encode())
    loop.until(lambda: loop.status("ddp") is JobStatus.RUNNING, "running")
    for rank, name in enumerate(names):
        api.write_log(RUNS, name, f"rank {rank} done\n".encode())
        api.finish_pod(RUNS, name)
    loop.until(lambda: loop.status("ddp") is JobStatus.SUCCEEDED, "succeeded")
    logs = tmp_path / "home" / "logs" / "ddp"
    wait_until(lambda: (logs / "ddp-worker-3.log").exists()
               and (logs / "ddp-worker-3.log").read_text() == "rank 3 step 1\nrank 3 done\n",
               what="the log copied")
    # The attempt is forgotten: its anchor is deleted and everything it owned with it.
    wait_until(lambda: not api.list("configmaps", RUNS) and not api.list("services", RUNS)
               and not api.list("pods", RUNS), what="objects gone")


def test_oom_killed_is_a_system_failure(api: FakeAPIServer, start: Callable[..., Loop]) -> None:
    loop = start()
    loop.controller.submit(_job(replicas=2, backoff=0))
    loop.until(lambda: len(pods(api, "ddp")) == 2, "pods")
    first, _ = _start_all(api, "ddp")
    loop.until(lambda: loop.status("ddp") is JobStatus.RUNNING, "running")
    api.finish_pod(RUNS, first, exit_code=137, reason="OOMKilled")
    # the gang is released (its other pod deleted) and started again as attempt 2
    loop.until(lambda: loop.controller.get("ddp").attempt == 2, "a second attempt", 15)
    record = loop.controller.get("ddp")
    assert (record.system_restarts, record.user_restarts) == (1, 0)
    events = [e.reason for e in loop.store.list_events("ddp")]
    assert "Requeued" in events
    assert any("OOMKilled" in e.message for e in loop.store.list_events("ddp"))
    loop.until(lambda: len(pods(api, "ddp")) == 2 and all(
        p["metadata"]["labels"]["phalanx.dev/attempt"] == "2" for p in pods(api, "ddp")),
        "attempt 2's pods only")


def test_non_zero_exit_is_the_users(api: FakeAPIServer, start: Callable[..., Loop]) -> None:
    loop = start()
    loop.controller.submit(_job(replicas=2))  # maxRestarts 0
    loop.until(lambda: len(pods(api, "ddp")) == 2, "pods")
    first, _ = _start_all(api, "ddp")
    api.finish_pod(RUNS, first, exit_code=3)
    loop.until(lambda: loop.status("ddp") is JobStatus.FAILED, "failed")
    record = loop.store.get_job("ddp")
    assert record.exit_code == 3 and record.system_restarts == 0


def test_cancel_deletes_everything(api: FakeAPIServer, start: Callable[..., Loop]) -> None:
    api.pod_groups = True
    loop = start()
    loop.controller.submit(_job())
    loop.until(lambda: len(pods(api, "ddp")) == 4, "pods")
    _start_all(api, "ddp")
    loop.until(lambda: loop.status("ddp") is JobStatus.RUNNING, "running")
    assert api.list("podgroups", RUNS)
    loop.controller.cancel("ddp")
    loop.controller.step()
    # pods are deleted gracefully: marked, then stopped by the kubelet, then gone
    assert all(p["metadata"].get("deletionTimestamp") for p in pods(api, "ddp"))
    loop.until(lambda: loop.status("ddp") is JobStatus.CANCELLED, "cancelled")
    for plural in ("pods", "services", "configmaps", "podgroups"):
        wait_until(lambda plural=plural: not api.list(plural, RUNS), what=f"{plural} gone")


def test_restart_adopts_and_never_duplicates(
    api: FakeAPIServer, start: Callable[..., Loop],
) -> None:
    loop = start()
    loop.controller.submit(_job())
    loop.until(lambda: len(pods(api, "ddp")) == 4, "pods")
    names = _start_all(api, "ddp")
    loop.until(lambda: loop.status("ddp") is JobStatus.RUNNING, "running")
    # A job the next control plane will not know about (its store is gone with it).
    ghost = gang("ghost", 1)
    from tests.k8s_plane.helpers import admit

    loop.controller.plane.launch(ghost, 1, admit(ghost, ["gpu-2"]))
    api.start_pod(RUNS, pods(api, "ghost")[0]["metadata"]["name"])
    loop.controller.plane.close()
    loop.close()

    posts = api.count("POST", f"/api/v1/namespaces/{RUNS}/pods")
    again = start()
    again.controller.step()
    assert again.status("ddp") is JobStatus.RUNNING
    assert "Adopted" in [e.reason for e in again.store.list_events("ddp")]
    # the orphan is stopped and removed; the known job's pods are untouched
    again.until(lambda: not pods(api, "ghost") and not [
        c for c in api.list("configmaps", RUNS) if c["data"]["job"] == "ghost"], "ghost gone")
    assert [p["metadata"]["name"] for p in pods(api, "ddp")] == names
    for name in names:
        api.finish_pod(RUNS, name)
    again.until(lambda: again.status("ddp") is JobStatus.SUCCEEDED, "succeeded")
    assert api.count("POST", f"/api/v1/namespaces/{RUNS}/pods") == posts


def test_interrupted_launch_is_completed(api: FakeAPIServer, make_plane: PlaneFactory) -> None:
    api.add_node("gpu-1", cpu="32", memory="256Gi", gpus=8)
    from phalanx.compute.kubernetes import objects
    from phalanx.compute.kubernetes.attempts import with_spec
    from tests.k8s_plane.helpers import admit

    job = gang("half", 3)
    admission = admit(job, ["gpu-1"] * 3)
    plan = objects.plan_attempt(job, 1, admission, RUNS, b"key")
    anchor = api.add("configmaps", with_spec(objects.anchor(plan, admission, 1.0, b"key"), job),
                     RUNS)
    owner = objects.owner_reference(anchor)
    api.add("pods", objects.pod(plan, plan.pods[0], job, owner), RUNS)  # then the crash
    plane = make_plane()
    assert len(pods(api, "half")) == 3
    assert api.count("POST", f"/api/v1/namespaces/{RUNS}/pods", 409) == 1
    assert api.get("configmaps", plan.name, RUNS)["metadata"]["annotations"][
        objects.LAUNCHED] == "true"
    assert len(plane.observe()) == 3


def test_node_changes_reach_the_scheduler(api: FakeAPIServer, start: Callable[..., Loop]) -> None:
    loop = start()
    api.update("nodes", "gpu-1", {"spec": {"unschedulable": True}})
    loop.until(lambda: any(n.name == "gpu-1" and n.unschedulable for n in loop.controller.state.nodes),
               "the cordon seen by the controller")
    loop.controller.submit(_job("whole", replicas=1).model_copy(update={"pod_sets": [
        gang("whole", 1).pod_sets[0].model_copy(update={"resources": {"nvidia.com/gpu": 8000}}),
    ]}))
    loop.until(lambda: len(pods(api, "whole")) == 1, "the pod")
    assert pods(api, "whole")[0]["metadata"]["annotations"]["phalanx.dev/node"] == "gpu-2"
    # a node that joins later is offered too
    api.add_node("gpu-3", cpu="32", memory="256Gi", gpus=8)
    loop.until(lambda: "gpu-3" in {n.name for n in loop.controller.state.nodes}, "the new node")
