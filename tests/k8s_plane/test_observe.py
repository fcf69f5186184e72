"""Pod states as the plane reports them: failure kinds, timeouts, lost nodes, logs."""

from __future__ import annotations

from pathlib import Path

from phalanx.compute.base import PodPhase, PodState
from phalanx.compute.kubernetes import KubernetesPlane
from tests.k8s_plane.conftest import RUNS, PlaneFactory, wait_until
from tests.k8s_plane.fake_apiserver import FakeAPIServer
from tests.k8s_plane.helpers import admit, gang, pods


def _launch(api: FakeAPIServer, plane: KubernetesPlane, replicas: int = 2) -> list[str]:
    for name in ("n1", "n2"):
        if api.get("nodes", name) is None:
            api.add_node(name, cpu="16", memory="64Gi", gpus=4)
    job = gang("obs", replicas)
    plane.launch(job, 1, admit(job, ["n1", "n2"][:replicas] * (replicas // 2 or 1)))
    return [p["metadata"]["name"] for p in pods(api, "obs")]


def _settled(plane: KubernetesPlane, rank: int, check) -> PodState:  # type: ignore[no-untyped-def]
    return wait_until(lambda: next((s for s in plane.observe()
                                    if s.ref.rank == rank and check(s)), None),
                      what=f"rank {rank}")


def test_failure_kinds(api: FakeAPIServer, make_plane: PlaneFactory) -> None:
    plane = make_plane()
    job = gang("kinds", 4)
    for name in ("n1", "n2"):
        api.add_node(name, cpu="16", memory="64Gi", gpus=4)
    plane.launch(job, 1, admit(job, ["n1", "n1", "n2", "n2"]))
    names = [p["metadata"]["name"] for p in pods(api, "kinds")]
    for name in names:
        api.start_pod(RUNS, name)
    running = _settled(plane, 0, lambda s: s.phase is PodPhase.RUNNING)
    assert running.node == "n1" and running.started_at is not None
    api.finish_pod(RUNS, names[0], exit_code=0)
    api.finish_pod(RUNS, names[1], exit_code=2)
    api.finish_pod(RUNS, names[2], exit_code=137, reason="OOMKilled")
    api.finish_pod(RUNS, names[3], exit_code=137, pod_reason="Evicted")
    done = _settled(plane, 0, lambda s: s.phase.done)
    assert (done.phase, done.exit_code, done.failure) == (PodPhase.SUCCEEDED, 0, None)
    user = _settled(plane, 1, lambda s: s.phase.done)
    assert (user.phase, user.exit_code, user.failure) == (PodPhase.FAILED, 2, "user")
    oom = _settled(plane, 2, lambda s: s.phase.done)
    assert (oom.reason, oom.failure, oom.signal) == ("OOMKilled", "system", 9)
    evicted = _settled(plane, 3, lambda s: s.phase.done)
    assert (evicted.reason, evicted.failure) == ("Evicted", "system")
    # Final states stay final, whatever the API says afterwards.
    api.remove("pods", names[1], RUNS)
    assert _settled(plane, 1, lambda s: s.phase.done).failure == "user"


def test_deleted_by_someone_else_and_node_lost(
    api: FakeAPIServer, make_plane: PlaneFactory,
) -> None:
    plane = make_plane()
    first, second = _launch(api, plane)
    api.start_pod(RUNS, first)
    api.start_pod(RUNS, second)
    _settled(plane, 1, lambda s: s.phase is PodPhase.RUNNING)
    api.remove("pods", first, RUNS)
    deleted = _settled(plane, 0, lambda s: s.phase.done)
    assert (deleted.reason, deleted.failure) == ("Deleted", "system")
    api.remove("nodes", "n2")
    lost = _settled(plane, 1, lambda s: s.phase.done)
    assert (lost.reason, lost.failure) == ("NodeLost", "system")


def test_gang_start_timeout(api: FakeAPIServer, make_plane: PlaneFactory) -> None:
    plane = make_plane(start_timeout=0.5)
    first, _ = _launch(api, plane)
    api.start_pod(RUNS, first)  # one pod starts, the other never does
    pending = _settled(plane, 1, lambda s: s.phase.done)
    assert (pending.reason, pending.failure) == ("PodsNotReady", "system")
    assert [s.phase for s in plane.observe() if s.ref.rank == 0] == [PodPhase.RUNNING]


def test_image_pull_failure_after_timeout(api: FakeAPIServer, make_plane: PlaneFactory) -> None:
    plane = make_plane(image_pull_timeout=0.3)
    first, _ = _launch(api, plane)
    api.set_waiting(RUNS, first, "ImagePullBackOff")
    waiting = _settled(plane, 0, lambda s: s.reason == "ImagePullBackOff")
    assert waiting.phase is PodPhase.PENDING  # not yet: it may still come
    failed = _settled(plane, 0, lambda s: s.phase.done)
    assert (failed.reason, failed.failure) == ("ImagePullBackOff", "system")


def test_terminate_reports_pods_until_gone(api: FakeAPIServer, make_plane: PlaneFactory) -> None:
    api.kill_delay = 0.5
    plane = make_plane()
    first, second = _launch(api, plane)
    api.start_pod(RUNS, first)
    _settled(plane, 0, lambda s: s.phase is PodPhase.RUNNING)
    plane.terminate("obs", 1, grace_seconds=5)
    assert api.get("pods", first, RUNS)["metadata"]["deletionGracePeriodSeconds"] == 5
    assert api.get("pods", second, RUNS) is None  # never bound: deleted at once
    # still running while its grace lasts, then stopped on request: nothing to charge
    assert [s.phase for s in plane.observe() if s.ref.rank == 0] == [PodPhase.RUNNING]
    stopped = _settled(plane, 0, lambda s: s.phase.done)
    assert (stopped.reason, stopped.failure) == ("Terminated", None)
    assert _settled(plane, 1, lambda s: s.phase.done).failure is None
    assert not api.list("services", RUNS)
    anchor = api.list("configmaps", RUNS)[0]
    assert "phalanx.dev/terminate-requested-at" in anchor["metadata"]["annotations"]
    plane.forget("obs", 1)
    assert plane.observe() == []
    assert not api.list("configmaps", RUNS)


def test_logs_resume_without_duplicates(
    api: FakeAPIServer, make_plane: PlaneFactory, tmp_path: Path,
) -> None:
    plane = make_plane()
    first, _ = _launch(api, plane)
    api.start_pod(RUNS, first)
    log = tmp_path / "home" / "logs" / "obs" / "obs-worker-0.log"
    api.write_log(RUNS, first, b"one\n")
    wait_until(lambda: log.exists() and log.read_bytes() == b"one\n", what="line one")
    api.write_log(RUNS, first, b"two\n")
    wait_until(lambda: log.read_bytes() == b"one\ntwo\n", what="line two")
    # a dropped stream and a restarted plane both resume where the copy stopped
    plane.close()
    api.write_log(RUNS, first, b"three\n")
    again = make_plane()
    wait_until(lambda: log.read_bytes() == b"one\ntwo\nthree\n", what="line three")
    api.write_log(RUNS, first, b"four\n")
    api.finish_pod(RUNS, first)
    wait_until(lambda: log.read_bytes() == b"one\ntwo\nthree\nfour\n", what="line four")
    assert again.logs.following(first)


def test_deletion_missed_by_the_watch_is_found_by_the_relist(
    api: FakeAPIServer, make_plane: PlaneFactory,
) -> None:
    plane = make_plane()
    first, _ = _launch(api, plane)
    api.start_pod(RUNS, first)
    _settled(plane, 0, lambda s: s.phase is PodPhase.RUNNING)
    lists = plane.pod_informer.lists
    api.set_hold_watches(True)  # the watch is down...
    api.remove("pods", first, RUNS)  # ...when the pod goes, and the history with it
    api.compact()
    assert [s.phase for s in plane.observe() if s.ref.rank == 0] == [PodPhase.RUNNING]
    api.set_hold_watches(False)
    deleted = _settled(plane, 0, lambda s: s.phase.done)
    assert (deleted.reason, deleted.failure) == ("Deleted", "system")
    assert plane.pod_informer.lists > lists
