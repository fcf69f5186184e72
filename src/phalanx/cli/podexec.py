"""``phalanx exec`` (a command inside a job's running pod) and ``phalanx attach``.

``exec`` speaks ``/v1/jobs/{name}/exec`` (``server/podexec.py``): a WebSocket whose
messages are ``phalanx.relay`` frames. With ``-t`` the local terminal is put
in raw mode and its size follows the window; with ``-i`` this process's input goes
to the command. The exit code is the command's. ``attach`` follows one pod's output
(its log), as ``kubectl attach`` shows a container's.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import sys
import termios
import threading
import tty as terminal
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from types import FrameType
from typing import Annotated
from urllib.parse import urlencode

import httpx
import typer
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import ClientConnection, connect

from phalanx import relay
from phalanx.cli.output import reports_errors
from phalanx.errors import ConnectionFailed, PhalanxError, SpecError
from phalanx.sdk.client import Client, error_from_response
from phalanx.sdk.config import Endpoint

READ_SIZE = 32 * 1024


@dataclass(frozen=True, slots=True)
class ExecResult:
    exit_code: int
    stdout: bytes
    stderr: bytes


def exec_url(endpoint: Endpoint, job: str, argv: list[str], *, pod: str | None = None,
             tty: bool = False, cols: int = 80, rows: int = 24) -> str:
    base = endpoint.url.rstrip("/")
    scheme, _, rest = base.partition("://")
    params: list[tuple[str, str]] = [("command", word) for word in argv]
    if pod is not None:
        params.append(("pod", pod))
    if tty:
        params += [("tty", "true"), ("cols", str(cols)), ("rows", str(rows))]
    ws = "wss" if scheme == "https" else "ws"
    return f"{ws}://{rest}/v1/jobs/{job}/exec?{urlencode(params)}"


def _bearer(client: Client, *, fresh: bool = False) -> str | None:
    """What the WebSocket's handshake sends: the token the client's key is exchanged for,
    as every other call sends (a member's key itself is no bearer), or a token as given."""
    if client.auth is None:
        return client.endpoint.token
    try:
        return client.auth.token(force=fresh)
    except httpx.TransportError:
        raise ConnectionFailed(f"cannot reach the control plane at {client.url}",
                               fix="start it with `phalanx up`, or pass --url") from None


def _connect(client: Client, url: str, *, fresh: bool) -> ClientConnection:
    token = _bearer(client, fresh=fresh)
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return connect(url, additional_headers=headers, compression=None, proxy=None,
                   max_size=relay.MAX_FRAME + relay.HEADER.size)


@contextlib.contextmanager
def open_exec(client: Client, job: str, argv: list[str], *, pod: str | None = None,
              tty: bool = False, cols: int = 80, rows: int = 24) -> Iterator[ClientConnection]:
    """A WebSocket to the command, which runs from now on; refusals raise their error."""
    endpoint = client.endpoint
    url = exec_url(endpoint, job, argv, pod=pod, tty=tty, cols=cols, rows=rows)
    try:
        try:
            conn = _connect(client, url, fresh=False)
        except InvalidStatus as exc:
            if exc.response.status_code != 401 or client.auth is None:
                raise
            conn = _connect(client, url, fresh=True)  # a token the server no longer takes
    except InvalidStatus as exc:
        answer = exc.response
        raise error_from_response(httpx.Response(
            answer.status_code, content=bytes(answer.body or b""),
            headers={"content-type": "application/json"})) from None
    except (OSError, TimeoutError) as exc:
        raise ConnectionFailed(f"cannot reach the control plane at {endpoint.url}: {exc}",
                               fix="start it with `phalanx up`, or pass --url") from None
    with conn:
        yield conn


def relay_session(conn: ClientConnection, *, stdin: int | None,
                  write: Callable[[bytes, bytes], None]) -> int:
    """Relay ``stdin`` (None: no input) to the command and its output to ``write(kind, data)``
    until it ends; its exit code (128 + signal when killed)."""
    if stdin is None:
        with contextlib.suppress(ConnectionClosed):  # a quick command may be done already
            conn.send(relay.pack(relay.STDIN))
    else:
        threading.Thread(target=_send_input, args=(conn, stdin), daemon=True).start()
    try:
        for message in conn:
            if isinstance(message, str):
                continue
            kind, payload = relay.split_frame(message)
            if kind == relay.EXIT:
                record = json.loads(payload)
                if record.get("error"):
                    write(relay.STDERR, f"phalanx: {record['error']}\n".encode())
                return relay.exit_code(record)
            write(kind, payload)
    except ConnectionClosed:
        pass
    raise PhalanxError("the connection to the pod ended before the command did",
                       fix="check that the job still runs (phalanx describe)")


def _send_input(conn: ClientConnection, stdin: int) -> None:
    with contextlib.suppress(OSError, ConnectionClosed):
        while chunk := os.read(stdin, READ_SIZE):
            conn.send(relay.pack(relay.STDIN, chunk))
        conn.send(relay.pack(relay.STDIN))


def exec_in_pod(client: Client, job: str, argv: list[str], *, pod: str | None = None,
                stdin: bytes | None = None) -> ExecResult:
    """Run ``argv`` in the pod to its end; its exit code and output."""
    out: dict[bytes, list[bytes]] = {relay.STDOUT: [], relay.STDERR: []}
    with open_exec(client, job, argv, pod=pod) as conn:
        if stdin is not None:
            conn.send(relay.pack(relay.STDIN, stdin))
        code = relay_session(conn, stdin=None, write=lambda k, d: out[k].append(d))
    return ExecResult(code, b"".join(out[relay.STDOUT]), b"".join(out[relay.STDERR]))


# --------------------------------------------------------------------------- verbs
def _client(ctx: typer.Context) -> Client:
    settings = ctx.obj
    client: Client = settings.client() if settings is not None else Client()
    return client


def _write(kind: bytes, data: bytes) -> None:
    relay.write_all(2 if kind == relay.STDERR else 1, data)


@contextlib.contextmanager
def _raw_terminal(fd: int) -> Iterator[None]:
    """The local terminal in raw mode (keys go to the pod as typed), restored after."""
    saved = termios.tcgetattr(fd)
    try:
        terminal.setraw(fd, termios.TCSANOW)  # keeps what was typed ahead
        yield
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)


@reports_errors
def exec_command(
    ctx: typer.Context,
    job: Annotated[str, typer.Argument(help="Job name")],
    command: Annotated[list[str], typer.Argument(help="The command and its arguments (after --)")],
    pod: Annotated[
        str | None, typer.Option("--pod", "--rank", help="One pod: its rank or name (default 0)")
    ] = None,
    stdin: Annotated[
        bool, typer.Option("--stdin", "-i", help="Pass this terminal's input to the command")
    ] = False,
    tty: Annotated[
        bool, typer.Option("--tty", "-t", help="Give the command a terminal (with -i: an "
                           "interactive shell)")
    ] = False,
) -> None:
    """Run a command inside a running pod of a job, e.g. `phalanx exec JOB -it -- bash`."""
    if tty and not os.isatty(0):
        raise SpecError("-t needs this command's input to be a terminal", field="--tty",
                        fix="run it from a terminal, or leave out -t")
    cols, rows = shutil.get_terminal_size()
    with _client(ctx) as client, open_exec(client, job, list(command), pod=pod,
                                           tty=tty, cols=cols, rows=rows) as conn:
        if not tty:
            code = relay_session(conn, stdin=0 if stdin else None, write=_write)
        else:
            def resize(signum: int, frame: FrameType | None) -> None:
                size = shutil.get_terminal_size()
                with contextlib.suppress(ConnectionClosed):
                    conn.send(relay.pack(relay.RESIZE, json.dumps(
                        {"cols": size.columns, "rows": size.lines}).encode()))

            previous = signal.signal(signal.SIGWINCH, resize)
            try:
                with _raw_terminal(0):
                    code = relay_session(conn, stdin=0 if stdin else None, write=_write)
            finally:
                signal.signal(signal.SIGWINCH, previous)
    sys.stdout.flush()
    raise typer.Exit(code)


@reports_errors
def attach(
    ctx: typer.Context,
    job: Annotated[str, typer.Argument(help="Job name")],
    pod: Annotated[
        str | None, typer.Option("--pod", "--rank", help="One pod: its rank or name (default 0)")
    ] = None,
) -> None:
    """Follow a running pod's output (its log) until the job ends."""
    with _client(ctx) as client:
        for line in client.logs(job, pod=pod if pod is not None else "0", follow=True):
            sys.stdout.write(line + "\n")
            sys.stdout.flush()
