"""``phalanx exec`` on Kubernetes: ``pods/exec`` over a real WebSocket to the API mock,
whose kubelet runs the command with the pod's env."""

from __future__ import annotations

import json

import pytest

from phalanx import relay
from phalanx.errors import NotFound
from tests.k8s_plane.conftest import RUNS, PlaneFactory, wait_until
from tests.k8s_plane.fake_apiserver import FakeAPIServer
from tests.k8s_plane.helpers import admit, gang, pods


def collect(session) -> tuple[bytes, bytes, dict]:
    out: dict[bytes, bytes] = {relay.STDOUT: b"", relay.STDERR: b""}
    while (frame := session.receive()) is not None:
        kind, payload = relay.split_frame(frame)
        if kind == relay.EXIT:
            return out[relay.STDOUT], out[relay.STDERR], json.loads(payload)
        out[kind] += payload
    raise AssertionError("no exit frame")


def running_job(api: FakeAPIServer, make_plane: PlaneFactory):
    api.add_node("node-1", cpu="16", memory="64Gi", gpus=4)
    plane = make_plane()
    job = gang(name="ddp", replicas=2, env={"GREETING": "hello from the pod"})
    plane.launch(job, 1, admit(job, ["node-1", "node-1"]))
    for pod in pods(api, "ddp"):
        api.start_pod(RUNS, pod["metadata"]["name"])
    wait_until(lambda: all(s.phase.value == "Running" for s in plane.observe()) and
               len(plane.observe()) == 2, what="both pods running")
    return plane


def test_exec_runs_in_the_pod_with_its_env_and_input(
    api: FakeAPIServer, make_plane: PlaneFactory,
) -> None:
    plane = running_job(api, make_plane)
    session = plane.exec("ddp", "1", ["sh", "-c", "echo $GREETING $RANK; tr a-z A-Z; "
                                      "echo oops >&2; exit 3"])
    try:
        session.send(relay.pack(relay.STDIN, b"typed in\n"))
        session.send(relay.pack(relay.STDIN))  # the end of input (v5's close)
        out, err, record = collect(session)
    finally:
        session.close()
    assert out == b"hello from the pod 1\nTYPED IN\n"
    assert err == b"oops\n" and record == {"exitCode": 3}
    # It went through the API server's pods/exec, upgraded to a WebSocket.
    assert any(method == "GET" and path.endswith("/exec") and code == 101
               for method, path, code in api.requests)


def test_exec_success_and_a_missing_command(api: FakeAPIServer, make_plane: PlaneFactory) -> None:
    plane = running_job(api, make_plane)
    session = plane.exec("ddp", None, ["true"])
    session.send(relay.pack(relay.STDIN))
    assert collect(session)[2] == {"exitCode": 0}
    session.close()
    session = plane.exec("ddp", None, ["no-such-command"])
    record = collect(session)[2]
    session.close()
    assert record["exitCode"] == relay.EXIT_NOT_EXECUTABLE and "not found" in record["error"]


def test_exec_needs_a_running_pod(api: FakeAPIServer, make_plane: PlaneFactory) -> None:
    api.add_node("node-1", cpu="16", memory="64Gi", gpus=4)
    plane = make_plane()
    job = gang(name="waiting", replicas=1)
    plane.launch(job, 1, admit(job, ["node-1"]))
    with pytest.raises(NotFound) as missing:
        plane.exec("waiting", None, ["true"])
    assert missing.value.field == "pod"
