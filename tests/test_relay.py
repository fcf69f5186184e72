"""The exec wire format: a command's input, output and exit between two sockets."""

from __future__ import annotations

import json
import os
import socket
import struct
import threading
import time
from pathlib import Path

import pytest

from phalanx import relay


def served(launch: relay.Launch) -> socket.socket:
    """A client socket whose peer is served by ``launch`` in a thread."""
    client, server = socket.socketpair()
    threading.Thread(target=relay.serve_connection, args=(server, launch), daemon=True).start()
    return client


def run(launch: relay.Launch, argv: list[str], stdin: bytes | None = None,
        secret: str | None = None) -> tuple[dict, bytes, bytes]:
    client = served(launch)
    out_read, out_write = os.pipe()
    err_read, err_write = os.pipe()
    in_fd = None
    if stdin is not None:
        in_fd, writer = os.pipe()
        os.write(writer, stdin)
        os.close(writer)
    try:
        record = relay.run_client(client, argv, stdin=in_fd, stdout=out_write,
                                  stderr=err_write, secret=secret)
    finally:
        os.close(out_write)
        os.close(err_write)
        client.close()
    with os.fdopen(out_read, "rb") as out, os.fdopen(err_read, "rb") as err:
        return record, out.read(), err.read()


def test_runs_with_the_given_environment_and_relays_everything(tmp_path) -> None:
    launch = relay.Launch(env={**os.environ, "WHO": "the pod"}, cwd=str(tmp_path))
    record, out, err = run(launch, ["sh", "-c", "echo $WHO in $(pwd); cat; echo e >&2; exit 4"],
                           stdin=b"input\n")
    assert record == {"exitCode": 4}
    assert out == f"the pod in {tmp_path}\ninput\n".encode() and err == b"e\n"


def test_a_wrong_secret_runs_nothing(tmp_path) -> None:
    marker = tmp_path / "ran"
    launch = relay.Launch(env=dict(os.environ), secret="right")
    record, _, _ = run(launch, ["touch", str(marker)], secret="wrong")
    assert record["error"] == "wrong secret" and record["exitCode"] == 1
    assert not marker.exists()
    record, _, _ = run(launch, ["touch", str(marker)], secret="right")
    assert record == {"exitCode": 0} and marker.exists()


def test_bad_requests_are_answered_not_run() -> None:
    launch = relay.Launch(env=dict(os.environ))
    assert run(launch, [])[0]["exitCode"] == 2
    record, _, _ = run(launch, ["/no/such/program"])
    assert record["exitCode"] == 127 and "cannot start" in record["error"]


def test_a_killed_command_reports_its_signal() -> None:
    record, _, _ = run(relay.Launch(env=dict(os.environ)), ["sh", "-c", "kill -TERM $$"])
    assert record == {"signal": 15} and relay.exit_code(record) == 143


@pytest.mark.parametrize("script", ["echo $$; exec sleep 60",
                                    # ignores the hang-up: killed after the grace
                                    "trap '' HUP; echo $$; exec sleep 60"])
def test_a_client_that_goes_away_hangs_up_the_command(script: str) -> None:
    client = served(relay.Launch(env=dict(os.environ)))
    client.sendall(relay.open_request(["sh", "-c", script]))
    frame = relay.recv_frame(client)
    assert frame is not None and frame[0] == relay.STDOUT
    pid = int(frame[1])
    client.close()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if not _running(pid):
            break
        time.sleep(0.02)
    else:
        pytest.fail("the command outlived its client")


def _running(pid: int) -> bool:
    """Whether ``pid`` still runs: a zombie (ended, not yet reaped by its parent) does not."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def test_a_terminal_session_gets_a_controlling_terminal_and_its_size() -> None:
    launch = relay.Launch(env=dict(os.environ))
    client = served(launch)
    client.sendall(relay.open_request(["sh", "-c", "tty; stty size"], tty=True, cols=123, rows=45))
    client.sendall(relay.pack(relay.STDIN))
    output = b""
    while (frame := relay.recv_frame(client)) is not None:
        if frame[0] == relay.EXIT:
            assert json.loads(frame[1]) == {"exitCode": 0}
            break
        output += frame[1]
    assert b"/dev/pts/" in output and b"45 123" in output
    assert not launch.sessions  # ended sessions are forgotten


def test_frames_are_bounded_and_whole() -> None:
    left, right = socket.socketpair()
    left.sendall(struct.pack(">cI", b"I", relay.MAX_FRAME + 1))
    with pytest.raises(relay.RelayError, match="above the limit"):
        relay.recv_frame(right)
    left.sendall(struct.pack(">cI", b"I", 10) + b"short")
    left.close()
    with pytest.raises(relay.RelayError, match="inside a frame"):
        relay.recv_frame(right)
    with pytest.raises(relay.RelayError):
        relay.split_frame(relay.pack(relay.STDIN, b"abc")[:-1])


def test_a_session_forwards_only_input_and_sizes() -> None:
    left, right = socket.socketpair()
    session = relay.SocketSession(left)
    session.send(relay.pack(relay.STDIN, b"x"))
    with pytest.raises(relay.RelayError, match="not b'O'"):
        session.send(relay.open_request(["rm", "-rf", "/"]))
    assert relay.recv_frame(right) == (relay.STDIN, b"x")
    session.close()
    assert relay.recv_frame(right) is None


def test_long_socket_paths_are_reached_through_their_directory(tmp_path) -> None:
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)
    path = str(deep / "pod.sock")
    assert len(path) > 108
    listener = relay.listen_unix(path)
    assert oct(os.stat(path).st_mode & 0o777) == "0o600"
    threading.Thread(target=relay.serve_forever,
                     args=(listener, relay.Launch(env=dict(os.environ))), daemon=True).start()
    sock = relay.connect_unix(path)
    out_read, out_write = os.pipe()
    record = relay.run_client(sock, ["echo", "deep"], stdin=None, stdout=out_write, stderr=2)
    os.close(out_write)
    assert record == {"exitCode": 0} and os.read(out_read, 100) == b"deep\n"
    listener.close()
