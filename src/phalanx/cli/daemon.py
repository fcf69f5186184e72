"""Starting the control plane in the background and stopping it again.

``phalanx up -d`` runs ``phalanx up`` (same arguments) in a new session with its
output in ``$PHALANX_HOME/server.log`` and returns once ``/healthz`` answers.
``phalanx down`` signals the pid the server wrote to ``server.json``.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

import httpx
import psutil

from phalanx.cli.output import ERROR_PREFIX, FIX_PREFIX
from phalanx.defaults import HOME_ENV, LOG_FILE, SERVER_FILE, make_private_dir, open_private
from phalanx.errors import ServerError
from phalanx.sdk.config import read_server_info


class ServerStartFailed(ServerError):
    """The detached server died or did not answer; ``log`` holds the end of its output."""

    def __init__(self, message: str, log: str, *, fix: str | None = None) -> None:
        super().__init__(message, fix=fix)
        self.log = log


class StopResult(StrEnum):
    NOT_RUNNING = "not running"
    STOPPED = "stopped"
    KILLED = "killed"


@dataclass(frozen=True, slots=True)
class ServerInfo:
    url: str
    pid: int
    raw: dict[str, Any]


def process_alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie child is reaped and counts as gone)."""
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _is_phalanx(pid: int) -> bool:
    """Guards against signalling an unrelated process that reused a stale pid."""
    try:
        return "phalanx" in " ".join(psutil.Process(pid).cmdline())
    except psutil.Error:
        return False


def healthz(url: str, timeout: float = 1.0) -> bool:
    try:
        return httpx.get(f"{url}/healthz", timeout=timeout).status_code == 200
    except httpx.HTTPError:
        return False


def server_info(home: Path) -> ServerInfo | None:
    """The server running on ``home``, according to its server.json, if its process lives."""
    info = read_server_info(home)
    if not info or not isinstance(info.get("pid"), int) or not isinstance(info.get("url"), str):
        return None
    if not process_alive(info["pid"]) or not _is_phalanx(info["pid"]):
        return None
    return ServerInfo(url=info["url"], pid=info["pid"], raw=info)


def log_tail(path: Path, offset: int = 0, lines: int = 25) -> str:
    """The last ``lines`` lines written to ``path`` after byte ``offset``."""
    try:
        with path.open("rb") as handle:
            handle.seek(offset)
            data = handle.read()
    except OSError:
        return ""
    return "\n".join(data.decode(errors="replace").splitlines()[-lines:])


def stated_error(output: str) -> tuple[str, str | None] | None:
    """The last error ``phalanx up`` printed as its one red line (``output.print_error``),
    and its fix; None if it printed none (it crashed)."""
    lines = output.splitlines()
    for i in range(len(lines) - 1, -1, -1):
        if lines[i].startswith(ERROR_PREFIX):
            after = lines[i + 1] if i + 1 < len(lines) else ""
            fix = after.strip()[len(FIX_PREFIX):] if after.strip().startswith(FIX_PREFIX) else None
            return lines[i][len(ERROR_PREFIX):], fix
    return None


def start_detached(
    home: Path,
    up_args: Sequence[str],
    timeout: float = 30.0,
    on_progress: Callable[[str], None] | None = None,
) -> ServerInfo:
    """Spawn ``phalanx up UP_ARGS`` in its own session and wait until it answers."""
    make_private_dir(home)
    log_path = home / LOG_FILE
    with os.fdopen(open_private(log_path, os.O_WRONLY | os.O_APPEND), "ab") as log:
        offset = log.tell()
        proc = subprocess.Popen(
            [sys.executable, "-m", "phalanx.cli.main", "up", *up_args],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={**os.environ, HOME_ENV: str(home)},
        )
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        code = proc.poll()
        if code is not None:
            tail = log_tail(log_path, offset)
            said = stated_error(tail)
            if said is not None:  # it said why in one line: that line, not the log
                message, fix = said
                raise ServerStartFailed(message, "", fix=fix)
            raise ServerStartFailed(
                f"the control plane exited with code {code} before it answered", tail,
                fix=f"see the log above (all of it in {log_path})",
            )
        info = read_server_info(home)
        if info and info.get("pid") == proc.pid and isinstance(info.get("url"), str):
            if on_progress is not None:
                on_progress(f"waiting for {info['url']} to answer")
            if healthz(info["url"]):
                return ServerInfo(url=info["url"], pid=proc.pid, raw=info)
        time.sleep(0.1)
    # It never answered: stop it rather than leave a half-started server behind.
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=10)
    raise ServerStartFailed(
        f"the control plane did not answer within {timeout:g}s and was stopped",
        log_tail(log_path, offset),
        fix=f"see the log above (all of it in {log_path})",
    )


def _wait_gone(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not process_alive(pid):
            return True
        time.sleep(0.1)
    return not process_alive(pid)


def stop_server(home: Path, timeout: float = 30.0) -> StopResult:
    """SIGTERM the server running on ``home``, SIGKILL it if still there after ``timeout``."""
    info = server_info(home)
    if info is None:
        return StopResult.NOT_RUNNING
    with contextlib.suppress(ProcessLookupError):
        os.kill(info.pid, signal.SIGTERM)
    result = StopResult.STOPPED
    if not _wait_gone(info.pid, timeout):
        with contextlib.suppress(ProcessLookupError):
            os.kill(info.pid, signal.SIGKILL)
        _wait_gone(info.pid, 5.0)
        result = StopResult.KILLED
    _forget_dead_server(home, info.pid)
    return result


def _forget_dead_server(home: Path, pid: int) -> None:
    """Remove server.json if it still names ``pid``, which is gone (a server that died or was
    killed cannot remove it itself), so clients don't try a URL nothing listens on."""
    if (read_server_info(home) or {}).get("pid") == pid and not process_alive(pid):
        with contextlib.suppress(FileNotFoundError):
            (home / SERVER_FILE).unlink()
