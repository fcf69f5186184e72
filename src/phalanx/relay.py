"""Running a command inside a pod and relaying its input, output and exit: one wire format.

Standard library only: the local pod supervisor (``compute/local/shim.py``) loads
this file by path, as it does the log writer, so it keeps starting in milliseconds.

Three parties speak it. The local supervisor serves it on a Unix socket beside
the pod's bookkeeping (``phalanx exec`` reaches a local pod through it); an MPI
worker's agent serves it on a TCP port for the launcher's rsh agent
(``phalanx.kinds.mpi_agent``); and the control plane's exec route carries the
same frames, one per WebSocket message, between ``phalanx exec`` and the pod.

A frame is one type byte, a four-byte big-endian length, then the payload:

- ``O`` open (client first, once): JSON ``{"argv": [...], "tty": bool, "cols": n,
  "rows": n, "secret": "..."}``; ``secret`` only where the server asks for one;
- ``I`` standard input (client); an empty payload closes the command's stdin;
- ``R`` terminal size (client): JSON ``{"cols": n, "rows": n}``;
- ``1``/``2`` standard output/error (server); a terminal's output is all ``1``;
- ``X`` the end (server, last): JSON ``{"exitCode": n}``, ``{"signal": n}`` or
  ``{"error": "...", "exitCode": n}`` when the command could not start.

The server runs the command as its own child with the environment, working
directory and user it is given: without a terminal, in the server's process group
(the pod's, so stopping the pod stops it); with one, as the leader of a session
whose controlling terminal is a new pseudo-terminal (so ^C and job control work),
which the server kills when its pod ends (``kill_sessions``).
"""

from __future__ import annotations

import contextlib
import fcntl
import hmac
import json
import os
import pty
import signal
import socket
import struct
import subprocess
import termios
import threading
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

OPEN, STDIN, RESIZE, STDOUT, STDERR, EXIT = b"O", b"I", b"R", b"1", b"2", b"X"
HEADER = struct.Struct(">cI")
MAX_FRAME = 1 << 20  # bigger frames are a broken or hostile peer
READ_SIZE = 64 * 1024
LINGER_SECONDS = 5.0
# What a shell answers when it cannot start a command, for the same reasons.
EXIT_NOT_FOUND, EXIT_NOT_EXECUTABLE = 127, 126


class RelayError(Exception):
    """The peer broke the protocol (or went away mid-frame)."""


def pack(kind: bytes, payload: bytes = b"") -> bytes:
    return HEADER.pack(kind, len(payload)) + payload


def send_frame(sock: socket.socket, kind: bytes, payload: bytes = b"",
               lock: threading.Lock | None = None) -> None:
    data = pack(kind, payload)
    if lock is None:
        sock.sendall(data)
        return
    with lock:
        sock.sendall(data)


def _read_exactly(sock: socket.socket, size: int) -> bytes | None:
    chunks, left = [], size
    while left:
        chunk = sock.recv(left)
        if not chunk:
            if left == size:
                return None
            raise RelayError("the connection ended inside a frame")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def recv_frame(sock: socket.socket) -> tuple[bytes, bytes] | None:
    """The next frame, or None when the peer closed the connection between frames."""
    header = _read_exactly(sock, HEADER.size)
    if header is None:
        return None
    kind, size = HEADER.unpack(header)
    if size > MAX_FRAME:
        raise RelayError(f"a frame of {size} bytes is above the limit of {MAX_FRAME}")
    payload = _read_exactly(sock, size) if size else b""
    if payload is None:
        raise RelayError("the connection ended inside a frame")
    return kind, payload


def split_frame(data: bytes) -> tuple[bytes, bytes]:
    """One whole frame received as a message (the WebSocket leg carries one per message)."""
    if len(data) < HEADER.size:
        raise RelayError("a message shorter than a frame header")
    kind, size = HEADER.unpack_from(data)
    if size != len(data) - HEADER.size:
        raise RelayError("a message whose frame length does not match its size")
    return kind, data[HEADER.size:]


def open_request(argv: list[str], *, tty: bool = False, cols: int = 80, rows: int = 24,
                 secret: str | None = None) -> bytes:
    body: dict[str, Any] = {"argv": argv, "tty": tty, "cols": cols, "rows": rows}
    if secret is not None:
        body["secret"] = secret
    return pack(OPEN, json.dumps(body).encode())


# --------------------------------------------------------------------------- server side
@dataclass
class Launch:
    """How the server starts a command: the pod's environment, directory and user."""

    env: Mapping[str, str]
    cwd: str | None = None
    popen: dict[str, Any] = field(default_factory=dict)  # user/group/umask for Popen
    secret: str | None = None  # required in the open frame when set
    sessions: set[int] = field(default_factory=set)  # terminal sessions still running
    lock: threading.Lock = field(default_factory=threading.Lock)

    def kill_sessions(self) -> None:
        """SIGKILL the terminal sessions started here (they left the pod's process group)."""
        with self.lock:
            leaders = list(self.sessions)
        for leader in leaders:
            with contextlib.suppress(OSError):
                os.killpg(leader, signal.SIGKILL)


def group_members(group: int, spare: Collection[int] = ()) -> list[int]:
    """The live processes (zombies aside) of process group ``group``, but ``spare``, read
    from /proc: what a pod's process still has running beside it."""
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) in spare:
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
            if fields[0] != b"Z" and int(fields[2]) == group:
                found.append(int(entry.name))
        except (OSError, IndexError, ValueError):
            continue  # exited meanwhile
    return found


def serve_connection(conn: socket.socket, launch: Launch) -> None:
    """Serve one client: its command, from open frame to exit frame. Never raises."""
    out_lock = threading.Lock()
    try:
        first = recv_frame(conn)
        if first is None:
            return
        kind, payload = first
        if kind != OPEN:
            raise RelayError("the first frame must open a command")
        request = json.loads(payload)
        argv = request.get("argv")
        if launch.secret is not None and not hmac.compare_digest(
                str(request.get("secret", "")), launch.secret):
            _finish(conn, out_lock, {"error": "wrong secret", "exitCode": 1})
            return
        if not isinstance(argv, list) or not argv or not all(
                isinstance(a, str) for a in argv):
            _finish(conn, out_lock, {"error": "argv must be a non-empty list of strings",
                                     "exitCode": 2})
            return
        if request.get("tty"):
            _run_tty(conn, out_lock, launch, argv, request)
        else:
            _run_pipes(conn, out_lock, launch, argv)
    except (OSError, RelayError, ValueError):
        return  # the client went away or spoke nonsense: nobody is left to tell
    finally:
        _linger(conn)


def _linger(conn: socket.socket) -> None:
    """Close after the client does: the exit is sent, but the client may still be sending
    (the end of its input, say), and closing under it would reset the connection, which
    can take the exit with it before the client reads it. A client that never closes is
    waited for ``LINGER_SECONDS``."""
    with contextlib.suppress(OSError):
        conn.shutdown(socket.SHUT_WR)
        conn.settimeout(LINGER_SECONDS)
        while conn.recv(READ_SIZE):
            pass  # late input, for a command that has ended
    with contextlib.suppress(OSError):
        # Wakes a thread still reading the client's input (closing alone would not).
        conn.shutdown(socket.SHUT_RDWR)
    conn.close()


def _spawn_error(exc: OSError, argv: list[str]) -> dict[str, Any]:
    code = EXIT_NOT_FOUND if isinstance(exc, FileNotFoundError) else EXIT_NOT_EXECUTABLE
    return {"error": f"cannot start {argv[0]!r}: {exc.strerror or exc}", "exitCode": code}


def _exit_record(code: int) -> dict[str, Any]:
    return {"exitCode": code} if code >= 0 else {"signal": -code}


def _finish(conn: socket.socket, lock: threading.Lock, record: dict[str, Any]) -> None:
    send_frame(conn, EXIT, json.dumps(record).encode(), lock)


def _pump_out(source: int, conn: socket.socket, kind: bytes, lock: threading.Lock) -> None:
    """Relay what ``source`` gives as frames until it ends; the client leaving only stops it."""
    try:
        while True:
            try:
                chunk = os.read(source, READ_SIZE)
            except OSError:  # a terminal whose last holder closed it reads EIO
                return
            if not chunk:
                return
            with contextlib.suppress(OSError):
                send_frame(conn, kind, chunk, lock)
    finally:
        os.close(source)


def _pump_in(conn: socket.socket, stdin: int | None, on_resize: Callable[[bytes], None],
             on_gone: Callable[[], None], *, tty: bool = False) -> None:
    """Relay the client's input to the command; the client leaving ends the command.

    The end of input closes a pipe; on a terminal it is typed, as ^D.
    """
    try:
        while (frame := recv_frame(conn)) is not None:
            kind, payload = frame
            if kind == RESIZE:
                on_resize(payload)
            elif kind == STDIN and stdin is not None:
                if not payload and tty:
                    write_all(stdin, b"\x04")
                elif not payload:
                    os.close(stdin)
                    stdin = None
                else:
                    write_all(stdin, payload)
    except (OSError, RelayError, ValueError):
        pass
    finally:
        if stdin is not None:
            with contextlib.suppress(OSError):
                os.close(stdin)
    on_gone()


def _run_pipes(conn: socket.socket, lock: threading.Lock, launch: Launch,
               argv: list[str]) -> None:
    in_read, in_write = os.pipe()
    out_read, out_write = os.pipe()
    err_read, err_write = os.pipe()
    try:
        child = subprocess.Popen(argv, env=dict(launch.env), cwd=launch.cwd, stdin=in_read,
                                 stdout=out_write, stderr=err_write, **launch.popen)
    except OSError as exc:
        for fd in (in_read, in_write, out_read, out_write, err_read, err_write):
            os.close(fd)
        _finish(conn, lock, _spawn_error(exc, argv))
        return
    for fd in (in_read, out_write, err_write):
        os.close(fd)
    pumps = [threading.Thread(target=_pump_out, args=(fd, conn, kind, lock), daemon=True)
             for fd, kind in ((out_read, STDOUT), (err_read, STDERR))]
    for pump in pumps:
        pump.start()
    threading.Thread(target=_pump_in, daemon=True, args=(
        conn, in_write, lambda _: None, lambda: _hang_up(child.pid, child.poll))).start()
    code = child.wait()
    for pump in pumps:
        pump.join()
    _finish(conn, lock, _exit_record(code))


HANG_UP_GRACE = 2.0  # seconds a command has to end on SIGHUP before it is killed


def _hang_up(pid: int, poll: Callable[[], int | None]) -> None:
    """The client went away: the command goes too, as a remote shell's does (SIGHUP), and
    one that ignores the hang-up (started under nohup, say) is killed after a grace.

    ``poll`` answers None until the command is reaped, so the pid is still the command's."""
    if poll() is not None:
        return
    with contextlib.suppress(OSError):
        os.kill(pid, signal.SIGHUP)
    deadline = time.monotonic() + HANG_UP_GRACE
    while poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    if poll() is None:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


def set_window(fd: int, cols: int, rows: int) -> None:
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))


def _run_tty(conn: socket.socket, lock: threading.Lock, launch: Launch, argv: list[str],
             request: dict[str, Any]) -> None:
    controller, terminal = pty.openpty()
    set_window(controller, int(request.get("cols", 80)), int(request.get("rows", 24)))
    try:
        child = subprocess.Popen(
            argv, env={**launch.env, "TERM": launch.env.get("TERM", "xterm")},
            cwd=launch.cwd, stdin=terminal, stdout=terminal, stderr=terminal,
            preexec_fn=lambda: _take_terminal(terminal), **launch.popen,
        )
    except OSError as exc:
        os.close(controller)
        os.close(terminal)
        _finish(conn, lock, _spawn_error(exc, argv))
        return
    os.close(terminal)
    with launch.lock:
        launch.sessions.add(child.pid)
    try:
        writer = os.dup(controller)

        def resize(payload: bytes) -> None:
            size = json.loads(payload)
            set_window(writer, int(size["cols"]), int(size["rows"]))

        pump = threading.Thread(target=_pump_out, args=(controller, conn, STDOUT, lock),
                                daemon=True)
        pump.start()
        threading.Thread(target=_pump_in, daemon=True, args=(
            conn, writer, resize, lambda: _hang_up(child.pid, child.poll)),
            kwargs={"tty": True}).start()
        code = child.wait()
        pump.join()
    finally:
        with launch.lock:
            launch.sessions.discard(child.pid)
    _finish(conn, lock, _exit_record(code))


def _take_terminal(fd: int) -> None:
    """In the child: lead a new session whose controlling terminal is ``fd``."""
    os.setsid()
    fcntl.ioctl(fd, termios.TIOCSCTTY, 0)


def serve_forever(listener: socket.socket, launch: Launch) -> None:
    """Accept clients until the listener is closed, each in a thread of its own."""
    while True:
        try:
            conn, _ = listener.accept()
        except OSError:
            return
        threading.Thread(target=serve_connection, args=(conn, launch), daemon=True).start()


# --------------------------------------------------------------------------- paths
def unix_address(path: str) -> tuple[str, int | None]:
    """An address ``bind``/``connect`` take for ``path``, however long it is.

    A Unix socket's path is capped at about 107 bytes; a long one is reached through
    an open descriptor of its directory (``/proc/self/fd/N/name``). The descriptor,
    if any, is for the caller to close once bound or connected.
    """
    if len(os.fsencode(path)) < 100 or not os.path.isdir("/proc/self/fd"):
        return path, None
    directory, name = os.path.split(path)
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    return f"/proc/self/fd/{fd}/{name}", fd


def connect_unix(path: str) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    address, fd = unix_address(path)
    try:
        sock.connect(address)
    except OSError:
        sock.close()
        raise
    finally:
        if fd is not None:
            os.close(fd)
    return sock


def listen_unix(path: str) -> socket.socket:
    """An owner-only Unix socket listening at ``path`` (replacing a stale one)."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    address, fd = unix_address(path)
    old = os.umask(0o177)
    try:
        sock.bind(address)
    finally:
        os.umask(old)
        if fd is not None:
            os.close(fd)
    sock.listen(16)
    return sock


# --------------------------------------------------------------------------- client side
def run_client(sock: socket.socket, argv: list[str], *, stdin: int | None,
               stdout: int, stderr: int, tty: bool = False, cols: int = 80, rows: int = 24,
               secret: str | None = None) -> dict[str, Any]:
    """Run ``argv`` through the server at ``sock``, relaying this process's descriptors.

    Returns the exit frame's record. ``stdin`` None sends none (the command's input ends
    at once).
    """
    sock.sendall(open_request(argv, tty=tty, cols=cols, rows=rows, secret=secret))
    if stdin is None:
        with contextlib.suppress(OSError):  # a refused or quick command may be done already
            sock.sendall(pack(STDIN))
    else:
        threading.Thread(target=_send_input, args=(sock, stdin), daemon=True).start()
    while (frame := recv_frame(sock)) is not None:
        kind, payload = frame
        if kind == STDOUT:
            write_all(stdout, payload)
        elif kind == STDERR:
            write_all(stderr, payload)
        elif kind == EXIT:
            record: dict[str, Any] = json.loads(payload)
            return record
    raise RelayError("the connection ended before the command's exit was told")


def _send_input(sock: socket.socket, stdin: int) -> None:
    with contextlib.suppress(OSError):
        while chunk := os.read(stdin, READ_SIZE):
            sock.sendall(pack(STDIN, chunk))
        sock.sendall(pack(STDIN))


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def exit_code(record: Mapping[str, Any]) -> int:
    """The exit code a shell would give for the exit record (128 + signal when killed)."""
    if record.get("signal") is not None:
        return 128 + int(record["signal"])
    return int(record.get("exitCode", 1))


class SocketSession:
    """A command opened on a relay server, as whole frames: what the control plane's exec
    route forwards between the client's WebSocket and the pod."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock

    def send(self, frame: bytes) -> None:
        """Forward one frame from the client: input or a terminal size, nothing else."""
        kind, _ = split_frame(frame)
        if kind not in (STDIN, RESIZE):
            raise RelayError(f"a client may send input or a terminal size, not {kind!r}")
        self.sock.sendall(frame)

    def receive(self) -> bytes | None:
        """The next frame for the client, None once the server closed the connection."""
        frame = recv_frame(self.sock)
        return None if frame is None else pack(*frame)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()
