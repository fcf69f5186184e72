"""A worker acts on no desired state of an older leader's term than one it has acted on.

Replicas of the control plane (``phalanx up --ha``) answer the worker's poll with the term
they lead under. A replica that led, was paused, and answers a poll once resumed (before it
finds that another leads) speaks for an old term: its desired state may list an attempt the
new leader stopped, and acting on it would run that attempt's ranks twice. The worker polls
over real HTTP a control plane that answers in turn for term 2, term 1 (the old leader) and
term 2 again, and converges a real simulated plane.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from phalanx.compute.simulated import SimulatedPlane
from phalanx.compute.terms import TermGate
from phalanx.spec.planes import DesiredState
from phalanx.spec.resources import Node
from phalanx.worker.agent import TERM_FILE, Worker, WorkerOptions
from phalanx.worker.client import PlaneClient
from tests.planes.harness import wait_until
from tests.planes.test_worker_converge import wanted

pytestmark = pytest.mark.timeout(60)


class Answers:
    """The desired states a control plane hands out, one per poll, in order."""

    def __init__(self, states: list[DesiredState]) -> None:
        self.states = states
        self.served = 0
        self.done = threading.Event()

    def next(self) -> DesiredState | None:
        if self.served == len(self.states):
            self.done.set()
            return None
        state = self.states[self.served]
        self.served += 1
        return state


@pytest.fixture
def answers() -> Answers:
    return Answers([])


@pytest.fixture
def control_plane(answers: Answers) -> Iterator[str]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *_: object) -> None:
            pass

        def _json(self, status: int, body: object) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self) -> None:  # the key exchanged for a token
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self._json(200, {"token": "t", "expiresIn": 3600})

        def do_GET(self) -> None:
            state = answers.next()
            if state is None:  # nothing more: the long poll ends with no change
                answers.done.wait(0.2)
                self._json(503, {"error": {"message": "no more", "field": None}})
                return
            self._json(200, state.to_dict())

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _worker(url: str, state_dir: Path) -> tuple[Worker, SimulatedPlane]:
    plane = SimulatedPlane([Node(name="n1", allocatable={"cpu": "8"})])
    key = state_dir / "key"
    key.write_text("plane-key")
    client = PlaneClient(url, "east", key)
    return Worker(plane, client, state_dir, WorkerOptions(compute="simulated",
                                                          poll_seconds=0.1)), plane


def _running(plane: SimulatedPlane) -> set[tuple[str, int]]:
    return {(p.ref.job, p.ref.attempt) for p in plane.observe()}


def test_a_desired_state_of_an_older_term_is_not_acted_on(
    tmp_path: Path, control_plane: str, answers: Answers,
) -> None:
    answers.states = [
        DesiredState(version=1, term=2, attempts=[wanted("kept", 1, "n1")]),
        # The old leader, resumed: it still lists an attempt the new leader stopped.
        DesiredState(version=7, term=1, attempts=[wanted("kept", 1, "n1"),
                                                  wanted("stopped", 1, "n1")]),
        DesiredState(version=2, term=2, attempts=[wanted("kept", 1, "n1"),
                                                  wanted("later", 1, "n1")]),
    ]
    worker, plane = _worker(control_plane, tmp_path)
    poller = threading.Thread(target=worker._poll_loop, daemon=True)
    poller.start()
    try:
        assert answers.done.wait(30), f"served {answers.served} of 3"
        wait_until(lambda: ("later", 1) in _running(plane), what="term 2's second state")
    finally:
        worker.stop.set()
        poller.join(10)
    assert _running(plane) == {("kept", 1), ("later", 1)}
    # Kept across a restart of the worker: the term it acted on is in its state directory.
    assert TermGate(tmp_path / TERM_FILE).term == 2
    restarted = TermGate(tmp_path / TERM_FILE)
    assert not restarted.admits(1)
    assert restarted.admits(2) and restarted.admits(None)


def test_a_lone_control_plane_without_terms_is_always_acted_on(
    tmp_path: Path, control_plane: str, answers: Answers,
) -> None:
    answers.states = [DesiredState(version=1, attempts=[wanted("a", 1, "n1")]),
                      DesiredState(version=2, attempts=[wanted("a", 1, "n1"),
                                                        wanted("b", 1, "n1")])]
    worker, plane = _worker(control_plane, tmp_path)
    poller = threading.Thread(target=worker._poll_loop, daemon=True)
    poller.start()
    try:
        wait_until(lambda: _running(plane) == {("a", 1), ("b", 1)}, what="both attempts")
    finally:
        worker.stop.set()
        poller.join(10)
    assert not (tmp_path / TERM_FILE).exists()
