"""A planned handover among three replicas on PostgreSQL: SIGTERM to the leader while a
client submits in a loop through every replica's URL. The leader refuses new writes
(clients retry them elsewhere), finishes those under way, releases the lease, and a
follower leads: the client sees no error, and every acknowledged job is stored once."""

from __future__ import annotations

import signal
import threading
from pathlib import Path

import pytest

from phalanx.errors import PhalanxError
from tests.e2e.test_replicas import replicas

pytestmark = [pytest.mark.slow, pytest.mark.postgres]


def _quick_job(name: str) -> dict[str, object]:
    return {"name": name, "podSets": [{"name": "main", "replicas": 1, "command": ["true"],
                                       "resources": {"cpu": "100m"}}]}


def test_sigterm_hands_over_with_no_failed_request(tmp_path: Path) -> None:
    with replicas(tmp_path) as group:
        old = group.leader()
        group.all_up()  # followers to hand over to
        acknowledged: list[str] = []
        failures: list[str] = []
        stop = threading.Event()
        submitted_some = threading.Event()

        def submit_loop() -> None:
            with group.client() as client:
                i = 0
                while not stop.is_set():
                    name = f"loop-{i}"
                    try:
                        client.submit(_quick_job(name))
                        acknowledged.append(name)
                    except PhalanxError as exc:
                        failures.append(f"{name}: {exc}")
                    i += 1
                    if i == 5:
                        submitted_some.set()

        loop = threading.Thread(target=submit_loop)
        loop.start()
        try:
            assert submitted_some.wait(60), failures
            before = len(acknowledged)
            assert old.proc is not None
            old.proc.send_signal(signal.SIGTERM)
            new = group.leader(besides=old)
            assert old.proc.wait(60) == 0
            # The loop goes on against the new leader for a while.
            deadline_count = len(acknowledged) + 5
            while len(acknowledged) < deadline_count and not failures and loop.is_alive():
                threading.Event().wait(0.05)
        finally:
            stop.set()
            loop.join(120)
        assert not loop.is_alive()
        assert failures == []
        assert len(acknowledged) > before + 5  # submits went on across the handover
        assert new is not old and new.ready() is not None

        with group.client() as client:
            stored = [record.name for record in client.list()]
        assert sorted(n for n in stored if n.startswith("loop-")) == sorted(acknowledged)
        assert len(stored) == len(set(stored))
        assert "leadership handed over" in old.log.read_text()
