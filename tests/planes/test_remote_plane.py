"""The control plane's side of a worker, on an injected clock: timers and desired state."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from phalanx.compute.base import ExecSession, PodPhase
from phalanx.compute.federation import PlaneSet
from phalanx.compute.remote import PLANE_LOST, PlaneState, PlaneTimers, RemotePlane
from phalanx.errors import NotFound, PhalanxError, Unavailable
from phalanx.scheduler.types import Admission, PodSetAssignment
from phalanx.spec.planes import PlaneReport, PodReport
from phalanx.spec.resources import JobSpec, Node


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def spec(name: str) -> JobSpec:
    return JobSpec.model_validate({"name": name, "podSets": [{
        "name": "main", "replicas": 2, "resources": {"cpu": "1"}, "command": ["true"]}]})


def admission(name: str) -> Admission:
    return Admission(job=name, cluster_queue="default", borrowing=False, pod_sets=(
        PodSetAssignment(name="main", count=2, flavors={"cpu": "default"},
                         nodes=("n1", "n1")),))


def report(*pods: PodReport, nodes: bool = True) -> PlaneReport:
    return PlaneReport(worker="w", nodes=[Node(name="n1", allocatable={"cpu": "4"})]
                       if nodes else None, pods=list(pods))


def pod(job: str, index: int, phase: str = "Running") -> PodReport:
    return PodReport(job=job, attempt=1, pod_set="main", index=index, rank=index, node="n1",
                     phase=phase)


def test_timers_move_strictly_one_after_the_other_from_the_control_planes_start() -> None:
    clock = Clock()
    plane = RemotePlane("east", timers=PlaneTimers(worker_grace=60, worker_lost_after=900),
                        clock=clock)
    assert plane.state is PlaneState.WAITING and not plane.sees("n1")
    clock.now += 30
    plane.report(report(pod("a", 0), pod("a", 1)))
    assert plane.state is PlaneState.CONNECTED and plane.sees("n1")
    assert not any(n.unschedulable for n in plane.inventory())
    clock.now += 61
    plane.observe()
    assert plane.state is PlaneState.SILENT
    assert all(n.unschedulable for n in plane.inventory())  # no new placements
    assert all(p.phase is PodPhase.RUNNING for p in plane.observe())  # its jobs run on
    clock.now += 900
    pods = plane.observe()
    assert plane.state is PlaneState.LOST
    assert {(p.phase, p.reason, p.failure) for p in pods} == {
        (PodPhase.FAILED, PLANE_LOST, "system")}


def test_a_restarted_control_plane_starts_every_silence_clock_at_its_own_start() -> None:
    clock = Clock()
    plane = RemotePlane("east", timers=PlaneTimers(worker_grace=60, worker_lost_after=900),
                        clock=clock)
    plane.last_seen = clock.now - 20 * 60  # as stored before a 20-minute outage
    plane.observe()
    assert plane.state is not PlaneState.LOST
    assert plane.silent_for() == 0.0


def test_after_a_restart_only_a_report_shows_the_planes_pods_gone() -> None:
    # A worker that says hello and has not reported, or one slower to come back than the
    # grace, says nothing of its pods: a job there is not gone for showing none, until the
    # plane is lost (after the worker's fence has stopped them).
    from phalanx.spec.planes import PlaneHello
    clock = Clock()
    plane = RemotePlane("east", timers=PlaneTimers(worker_grace=60, worker_lost_after=900),
                        clock=clock)
    plane.hello(PlaneHello(worker="w", compute="local", fence_after=600, version="0"))
    plane.observe()
    assert not plane.sees("n1") and plane.state is PlaneState.WAITING
    assert "first report" in plane.describe_state()
    clock.now += 120  # past the grace, still no report
    plane.observe()
    assert not plane.sees("n1") and plane.state is PlaneState.WAITING
    assert all(n.unschedulable for n in plane.inventory())
    plane.report(report(pod("a", 0)))
    assert plane.sees("n1") and plane.state is PlaneState.CONNECTED
    other = RemotePlane("west", timers=PlaneTimers(worker_grace=60, worker_lost_after=900),
                        clock=clock)
    clock.now += 901
    other.observe()
    assert other.state is PlaneState.LOST and other.sees("n1")


def test_a_plane_takes_no_report_of_an_attempt_placed_on_another() -> None:
    # "b" attempt 2 runs on west: east's key cannot end it, fail it or write its logs.
    from phalanx.spec.planes import LogChunk
    placed = {"b": (2, "west"), "a": (1, "east")}
    logs = []

    class Logs:
        def append(self, job: str, pod: str, data: bytes) -> None:
            logs.append((job, pod, data))

    planes = PlaneSet()
    planes.placement_of = placed.get
    east = RemotePlane("east", logs=Logs(), owns=lambda job, attempt: planes.owns(
        "east", job, attempt))  # type: ignore[arg-type]
    forged = PodReport(job="b", attempt=2, pod_set="main", index=0, rank=0, node="n1",
                       phase="Failed", exit_code=1)
    old = PodReport(job="b", attempt=1, pod_set="main", index=0, rank=0, node="n1",
                    phase="Running")  # an earlier attempt still here: the loop stops it
    east.report(PlaneReport(worker="w", nodes=None, pods=[pod("a", 0), forged], logs=[
        LogChunk(job="a", pod="a-main-0", data="mine\n"),
        LogChunk(job="b", pod="b-main-0", data="forged\n")]))
    assert {(p.ref.job, p.ref.attempt) for p in east.observe()} == {("a", 1)}
    assert logs == [("a", "a-main-0", b"mine\n")]
    east.report(PlaneReport(worker="w", nodes=None, pods=[pod("a", 0), old]))
    assert {(p.ref.job, p.ref.attempt) for p in east.observe()} == {("a", 1), ("b", 1)}


def test_launched_attempts_are_pending_until_reported_then_leave_the_desired_state() -> None:
    clock = Clock()
    plane = RemotePlane("east", clock=clock)
    plane.report(report())
    plane.launch(spec("a"), 1, admission("a"))
    desired = plane.desired(-1, 0)
    assert [(a.job, a.attempt, a.epoch) for a in desired.attempts] == [("a", 1, 1)]
    assert {p.phase for p in plane.observe()} == {PodPhase.PENDING}  # not gone
    plane.report(report(pod("a", 0), pod("a", 1), nodes=False))
    assert plane.desired(-1, 0).attempts == []
    plane.terminate("a", 1, 5.0)
    stops = plane.desired(-1, 0).stops
    assert [(s.job, s.attempt, s.grace) for s in stops] == [("a", 1, 5.0)]
    plane.forget("a", 1)
    assert [(k.job, k.attempt) for k in plane.desired(-1, 0).forget] == [("a", 1)]
    plane.report(report(nodes=False))  # the worker dropped it: the acknowledgement is done
    assert plane.desired(-1, 0).forget == []


def test_a_lost_plane_refuses_what_it_never_started_back_to_pending() -> None:
    clock = Clock()
    plane = RemotePlane("east", timers=PlaneTimers(worker_grace=1, worker_lost_after=5),
                        clock=clock)
    plane.report(report())
    plane.launch(spec("b"), 1, admission("b"))
    clock.now += 6
    plane.observe()
    refused = plane.refusals()
    assert [(r.job, r.error) for r in refused] == [("b", False)]
    assert "lost" in refused[0].reason
    assert plane.desired(-1, 0).attempts == []


# --------------------------------------------------------------------------- exec
class Channel:
    """Stands in for the worker's end of a command."""

    def send(self, frame: bytes) -> None: ...

    def receive(self) -> bytes | None:
        return None

    def close(self) -> None: ...


def in_thread(call: Callable[[], ExecSession]) -> tuple[threading.Thread, list[object]]:
    """``call`` on a thread of its own (``exec`` blocks); what it returned or raised."""
    out: list[object] = []

    def run() -> None:
        try:
            out.append(call())
        except PhalanxError as exc:
            out.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, out


def running_plane() -> RemotePlane:
    plane = RemotePlane("east")
    plane.report(report(pod("a", 0), pod("a", 1)))
    return plane


def test_a_command_is_handed_out_once_taken_once_and_returns_the_workers_channel() -> None:
    plane = running_plane()
    thread, out = in_thread(lambda: plane.exec("a", "1", ["sh"], tty=True, cols=100))
    [request] = plane.exec_requests(5)
    assert (request.job, request.pod, request.argv, request.tty, request.cols) == (
        "a", "1", ["sh"], True, 100)
    assert plane.exec_requests(0) == []  # handed out once
    assert plane.take_exec("not-" + request.session) is None
    assert plane.take_exec(request.session) == request
    assert plane.take_exec(request.session) is None  # taken once
    channel = Channel()
    assert plane.exec_ready(request.session, channel)
    thread.join(5)
    assert out == [channel]
    assert not plane.exec_ready(request.session, Channel())  # nobody waits any more


def test_the_planes_refusal_reaches_the_caller() -> None:
    plane = running_plane()
    thread, out = in_thread(lambda: plane.exec("a", None, ["true"]))
    [request] = plane.exec_requests(5)
    plane.take_exec(request.session)
    plane.exec_ready(request.session, error=NotFound("no such pod", field="pod"))
    thread.join(5)
    assert isinstance(out[0], NotFound) and out[0].message == "no such pod"


def test_a_command_nobody_takes_fails_after_the_pickup_time() -> None:
    plane = running_plane()
    plane.exec_pickup = 0.2
    thread, out = in_thread(lambda: plane.exec("a", None, ["true"]))
    [late] = plane.exec_requests(5)  # handed out, never taken
    thread.join(5)
    assert isinstance(out[0], Unavailable)
    assert "did not take the command within 0.2s" in out[0].message
    assert plane.take_exec(late.session) is None  # a worker that dials in now finds it gone


def test_commands_are_refused_at_once_without_a_running_pod_or_a_connected_worker() -> None:
    with pytest.raises(Unavailable, match="waiting for its worker"):
        RemotePlane("east").exec("a", None, ["true"])
    plane = running_plane()
    for job, pod_name in (("b", None), ("a", "7")):
        with pytest.raises(NotFound, match="has no running pod"):
            plane.exec(job, pod_name, ["true"])
    assert plane.exec_requests(0) == []


def test_the_plane_set_sends_a_command_where_the_job_runs_now() -> None:
    east, west = RemotePlane("east"), RemotePlane("west")
    east.report(report(pod("a", 0, "Failed")))  # an earlier attempt, kept until forgotten
    west.report(report(pod("a", 0)))
    west.exec_pickup = 0.1
    planes = PlaneSet()
    planes.add("east", east)
    planes.add("west", west)
    with pytest.raises(Unavailable, match="compute plane west did not take"):
        planes.exec("a", None, ["true"])
    with pytest.raises(NotFound, match="has no running pod"):
        planes.exec("b", None, ["true"])


def test_one_worker_drives_a_plane_the_last_to_say_hello() -> None:
    from phalanx.errors import Conflict
    from phalanx.spec.planes import PlaneHello
    plane = RemotePlane("east", clock=Clock())
    plane.hello(PlaneHello(worker="w1", compute="local", fence_after=600, version="0"))
    plane.report(PlaneReport(worker="w1", nodes=None, pods=[pod("a", 0)]))
    with pytest.raises(Conflict, match="driven by worker w1"):
        plane.report(PlaneReport(worker="w2", nodes=None, pods=[]))
    with pytest.raises(Conflict):
        plane.desired(-1, 0, "w2")
    assert {p.ref.job for p in plane.observe()} == {"a"}  # w2's empty report changed nothing
    plane.hello(PlaneHello(worker="w2", compute="local", fence_after=600, version="0"))
    with pytest.raises(Conflict, match="driven by worker w2"):
        plane.report(PlaneReport(worker="w1", nodes=None, pods=[pod("a", 0)]))
    assert plane.desired(-1, 0, "w2").version >= 0


def test_a_report_older_than_one_taken_is_dropped() -> None:
    # The worker's first try timed out and its retry was taken; the first is answered late.
    plane = RemotePlane("east", clock=Clock())
    plane.report(PlaneReport(worker="w", seq=2, nodes=None, pods=[pod("a", 0, "Succeeded")]))
    plane.report(PlaneReport(worker="w", seq=1, nodes=None, pods=[pod("a", 0)]))
    assert [p.phase for p in plane.observe()] == [PodPhase.SUCCEEDED]
    plane.report(PlaneReport(worker="w", seq=3, nodes=None, pods=[]))
    assert plane.observe() == []


def test_a_report_sent_again_keeps_its_logs_once_and_counts_as_heard() -> None:
    # Its answer was lost: the worker sends it again under its number, with the same logs.
    from phalanx.spec.planes import LogChunk
    logs = []

    class Logs:
        def append(self, job: str, pod: str, data: bytes) -> None:
            logs.append((job, pod, data))

    clock = Clock()
    plane = RemotePlane("east", timers=PlaneTimers(worker_grace=60, worker_lost_after=900),
                        logs=Logs(), clock=clock)  # type: ignore[arg-type]
    first = PlaneReport(worker="w", seq=1, nodes=None, pods=[pod("a", 0)],
                        logs=[LogChunk(job="a", pod="a-main-0", data="line 1\n")])
    plane.report(first)
    clock.now += 50
    plane.report(first)
    assert logs == [("a", "a-main-0", b"line 1\n")]
    clock.now += 50  # 100 s after the first, 50 s after the second: within the grace
    plane.observe()
    assert plane.state is PlaneState.CONNECTED


def test_nodes_carried_by_a_report_taken_as_a_duplicate_are_asked_for_again() -> None:
    # Report 2 was taken, its answer lost; the plane's nodes changed before the retry,
    # which carries them under number 2: not taken, so the answer asks for them again.
    plane = RemotePlane("east", clock=Clock())
    assert plane.report(PlaneReport(worker="w", seq=1, nodes=[
        Node(name="n1", allocatable={"cpu": "4"})])) is False
    assert plane.report(PlaneReport(worker="w", seq=2, nodes=None)) is False
    assert plane.report(PlaneReport(worker="w", seq=2, nodes=[
        Node(name="n1", allocatable={"cpu": "4"}),
        Node(name="n2", allocatable={"cpu": "4"})])) is True
    assert [n.name for n in plane.inventory()] == ["n1"]
    plane.report(PlaneReport(worker="w", seq=3, nodes=[
        Node(name="n1", allocatable={"cpu": "4"}), Node(name="n2", allocatable={"cpu": "4"})]))
    assert sorted(n.name for n in plane.inventory()) == ["n1", "n2"]


def test_a_worker_whose_fence_needs_longer_keeps_its_plane_from_being_lost_early() -> None:
    # The control plane restarted with --worker-lost-after 10 s; the worker, connected all
    # along, fences after 60 s and its pods take 5.5 s to stop: its plane is lost only
    # after 60 + 5.5 + 10 s of margin of silence, when no rank of its can still run.
    from phalanx.compute.lease import lost_after_needed

    clock = Clock()
    plane = RemotePlane("east", timers=PlaneTimers(worker_grace=1, worker_lost_after=10),
                        clock=clock)
    plane.report(PlaneReport(worker="w", seq=1, nodes=None, pods=[pod("a", 0)],
                             fence_after=60, fence_stops_within=5.5))
    assert plane.lost_after == lost_after_needed(60, 5.5) == 75.5
    assert plane.fence_after == 60
    clock.now += 75
    assert not plane.observe()[0].phase.done
    assert plane.state is PlaneState.SILENT
    clock.now += 1
    assert plane.observe()[0].reason == PLANE_LOST


def test_the_lease_file_carries_the_fences_grace_to_the_pods_supervisors(
        tmp_path: Path) -> None:
    from phalanx.compute.lease import LEASE_POLL, FileLease, fence_grace
    from phalanx.compute.local.shim import lease_expiry

    lease = FileLease(tmp_path / "lease.json", "east", grace=fence_grace(3))
    lease.renew(2000.0)
    assert lease_expiry(str(tmp_path / "lease.json")) == (2000.0, 0.3)
    assert lease.stops_within == LEASE_POLL + 0.3
    assert fence_grace(600) == 5.0
    (tmp_path / "lease.json").write_text('{"expiresAt": 5}')  # (written by an older worker)
    assert lease_expiry(str(tmp_path / "lease.json")) == (5.0, 5.0)


def test_a_step_of_the_system_clock_finds_no_plane_lost() -> None:
    # The timers run on the monotonic clock; the wall clock only dates "last seen".
    tick, wall = Clock(), Clock()
    plane = RemotePlane("east", timers=PlaneTimers(worker_grace=60, worker_lost_after=900),
                        clock=tick, wall=wall)
    plane.report(report(pod("a", 0)))
    assert plane.last_seen == wall.now
    wall.now += 20 * 60  # NTP steps the system clock 20 minutes on
    plane.observe()
    assert plane.state is PlaneState.CONNECTED and plane.silent_for() == 0.0
    tick.now += 61
    plane.observe()
    assert plane.state is PlaneState.SILENT


def test_a_message_from_a_newer_worker_or_control_plane_is_read_without_its_new_fields(
) -> None:
    # One version apart during an upgrade: fields this side does not know are ignored in
    # the worker protocol, while what users write (a plane's creation) refuses them.
    from pydantic import ValidationError

    from phalanx.spec.planes import DesiredState, PlaneCreate, PlaneHello

    hello = PlaneHello.model_validate({"worker": "w", "compute": "local", "fenceAfter": 60,
                                       "fenceRestartsWithin": 3})
    assert hello.fence_after == 60
    report = PlaneReport.model_validate({"worker": "w", "seq": 4, "pods": [
        {"job": "a", "attempt": 1, "podSet": "main", "index": 0, "rank": 0, "node": "n1",
         "phase": "Running", "gpuMemory": "80Gi"}], "clock": 12.5})
    assert report.pods[0].phase == "Running"
    assert DesiredState.model_validate({"version": 3, "drain": True}).version == 3
    with pytest.raises(ValidationError):
        PlaneCreate.model_validate({"name": "east", "nmae": "typo"})
