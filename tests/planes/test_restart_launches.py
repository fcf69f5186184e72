"""A launch that never reached a worker before the control plane restarted is sent again.

The attempt is Starting in the store, but the plane's desired state (what the worker
polls) lived in the old process: the restarted control plane sends the same attempt
again, so the job runs (or its refusal sends it back to pending) instead of being read
as gone once the worker reports no pods of it.

The first tests step the control loop by hand over a ``PlaneSet`` with a ``RemotePlane``
(the worker played by the test); the last runs real processes over HTTP.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from phalanx.compute.federation import PlaneSet
from phalanx.compute.remote import RemotePlane
from phalanx.control import Controller
from phalanx.server.jobkeys import JobKeys
from phalanx.server.keys import KeyHasher
from phalanx.server.main import pod_credentials
from phalanx.spec.planes import PlacementRefusal, PlaneReport, PodReport
from phalanx.spec.resources import JobSpec, Node
from phalanx.spec.status import JobStatus
from phalanx.store import Store
from tests.planes.harness import Federation, job_spec, wait_until

JOB = JobSpec.model_validate({"name": "train", "queue": "default", "podSets": [{
    "name": "main", "replicas": 2, "resources": {"cpu": "1"}, "command": ["true"]}]})
NODES = [Node(name="n1", allocatable={"cpu": "4", "memory": "8Gi", "pods": "110"})]
GONE = ("PodsLost", "Failed", "Requeued")  # what a job read as gone shows


def east_plane() -> tuple[PlaneSet, RemotePlane]:
    """A control plane's planes as at its start: member east, its worker not heard yet."""
    planes = PlaneSet()
    east = RemotePlane("east")
    planes.add("east", east)
    return planes, east


def running(attempt: int) -> list[PodReport]:
    return [PodReport(job="train", attempt=attempt, pod_set="main", index=i, rank=i,
                      node="n1", phase="Running") for i in range(2)]


def controller(home: Path, planes: PlaneSet) -> Controller:
    """A control plane on ``home``'s store, its pods' credentials derived as the server's."""
    keys = JobKeys(KeyHasher.for_home(home))
    return Controller(Store.for_home(home), planes,
                      credentials=pod_credentials(keys, "http://127.0.0.1:7780"))


def started_then_restarted(home: Path) -> tuple[Controller, RemotePlane, str | None]:
    """Job train admitted and launched on east (Starting), which the worker never polled;
    then the control plane restarts. The restarted one and its east, and the credential
    the first launch carried."""
    planes, east = east_plane()
    east.report(PlaneReport(worker="w", nodes=NODES, pods=[]))
    first = controller(home, planes)
    first.submit(JOB)
    first.step()
    assert first.get("train").status is JobStatus.STARTING
    [sent] = east.desired(-1, 0).attempts
    first.stop()
    first.store.close()
    planes, east = east_plane()
    return controller(home, planes), east, sent.credential


def events(control: Controller) -> list[str]:
    control.state.persist()
    return [e.reason for e in control.store.list_events("train")]


def test_a_starting_launch_the_worker_never_took_is_sent_again_and_runs(
        tmp_path: Path) -> None:
    restarted, east, credential = started_then_restarted(tmp_path)
    try:
        # The same attempt, with the very key its pods would have had (none has a second).
        [again] = east.desired(-1, 0).attempts
        assert (again.job, again.attempt) == ("train", 1)
        assert again.credential == credential and credential is not None
        restarted.step()  # the worker has not reported: pending, not gone
        assert restarted.get("train").status is JobStatus.STARTING
        # The worker reports, before and after it started the attempt.
        east.report(PlaneReport(worker="w", nodes=NODES, pods=[]))
        restarted.step()
        assert restarted.get("train").status is JobStatus.STARTING
        east.report(PlaneReport(worker="w", nodes=None, pods=running(1)))
        restarted.step()
        record = restarted.get("train")
        assert (record.status, record.attempt, record.system_restarts) == (
            JobStatus.RUNNING, 1, 0)
        assert east.desired(-1, 0).attempts == []  # started: out of the desired state
        assert not set(GONE) & set(events(restarted))
    finally:
        restarted.stop()
        restarted.store.close()


def test_a_refusal_of_the_launch_sent_again_sends_the_job_back_to_pending(
        tmp_path: Path) -> None:
    restarted, east, _ = started_then_restarted(tmp_path)
    try:
        # The worker's nodes changed while the control plane was down: it refuses.
        east.report(PlaneReport(worker="w", nodes=[NODES[0].model_copy(update={"name": "n2"})],
                                pods=[], refusals=[PlacementRefusal(
                                    job="train", attempt=1,
                                    reason="node(s) n1 are no longer in this plane")]))
        restarted.step()  # pending again, then placed on the node the plane has now
        record = restarted.get("train")
        assert (record.attempt, record.system_restarts) == (2, 0)  # not a failure
        assert record.admission is not None
        assert record.admission.pod_sets[0].nodes == ["east.n2", "east.n2"]
        restarted.state.persist()
        requeued = [e.message for e in restarted.store.list_events("train")
                    if e.reason == "Requeued"]
        assert len(requeued) == 1
        assert "refused the placement: node(s) n1 are no longer" in requeued[0]
        assert "PodsLost" not in events(restarted)
    finally:
        restarted.stop()
        restarted.store.close()


def test_a_starting_job_the_reporting_worker_does_not_run_is_still_gone(
        tmp_path: Path) -> None:
    # Once the worker has reported since this start, no pods is gone: nothing sent again.
    planes, east = east_plane()
    east.report(PlaneReport(worker="w", nodes=NODES, pods=[]))
    first = controller(tmp_path, planes)
    first.submit(JOB)
    first.step()
    first.stop()
    first.store.close()
    planes, east = east_plane()
    east.report(PlaneReport(worker="w", nodes=NODES, pods=[]))
    restarted = controller(tmp_path, planes)
    try:
        assert east.desired(-1, 0).attempts == []
        restarted.step()
        assert "PodsLost" in events(restarted)
    finally:
        restarted.stop()
        restarted.store.close()


@pytest.mark.timeout(120)
def test_a_job_launched_while_its_worker_was_cut_off_runs_once_after_a_restart(
        tmp_path: Path) -> None:
    # Cut off from the worker (a grace long enough to admit a job the while), the control
    # plane launches attempt 1 and restarts; healed, the worker takes it from the restarted
    # one. Neither side's timer acts: the fence and lost-after are far away.
    out = tmp_path / "ran"
    code = f"import os, time; time.sleep(1); open({str(out)!r}, 'a').write(" \
           "os.environ['PHALANX_EPOCH'] + '\\n')"
    with Federation(tmp_path, grace="20s", lost_after="60s") as fed:
        gate = fed.gate()
        fed.start_worker("east", "--fence-after", "40s", via=gate)
        gate.cut()
        fed.submit(job_spec("late", code, system_restarts=2))
        fed.wait_status("late", "Starting", timeout=15)
        fed.server.stop()
        fed.server.start()
        gate.target = ("127.0.0.1", int(fed.server.url.rsplit(":", 1)[1]))
        gate.heal()
        done = fed.wait_status("late", "Succeeded", "Failed", timeout=40)
        with fed.api() as api:
            events = api.get("/v1/jobs/late/events").json()["items"]
        reasons = [(e["reason"], e["message"]) for e in events]
        assert done["status"] == "Succeeded" and done["attempt"] == 1, reasons
        assert not set(GONE) & {reason for reason, _ in reasons}, reasons
        assert done["systemRestarts"] == 0
        assert wait_until(lambda: out.exists() and out.read_text(), timeout=5) == "1\n"
