"""Telling whether a recorded process is still the one we started, and signalling its group.

A pid alone is not an identity: after a process exits its pid may be reused.
A pid plus the process's start time is. On Linux the start time is read from
``/proc/PID/stat`` in clock ticks since boot, an exact integer that does not
drift with the wall clock (psutil's ``create_time`` adds a boot time that can
shift by a second between readers); elsewhere psutil's create time is used.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Mapping, Sequence

import psutil

_PROC = os.path.isdir("/proc/self")


def probe(pid: int) -> tuple[float, bool] | None:
    """(start time, is a zombie) of process ``pid``, or None when there is no such process."""
    if _PROC:
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except (FileNotFoundError, ProcessLookupError):
            return None
        return float(fields[19]), fields[0] == b"Z"
    try:
        process = psutil.Process(pid)
        with process.oneshot():
            return process.create_time(), process.status() == psutil.STATUS_ZOMBIE
    except psutil.Error:
        return None


def start_time(pid: int) -> float | None:
    found = probe(pid)
    return None if found is None else found[0]


def is_running(pid: int, start: float) -> bool:
    """Whether the process we recorded as (pid, start) still runs (zombies do not)."""
    found = probe(pid)
    return found is not None and found[0] == start and not found[1]


def signal_group(leader: int, start: float, sig: signal.Signals) -> bool:
    """Send ``sig`` to the process group led by the process we recorded as (leader, start).

    The group may outlive its leader (a supervisor killed on its own), and the
    system never reuses a number while a group of that id exists; so the group is
    signalled unless the leader's pid now belongs to a different process, which
    proves our group is gone. Returns whether a signal was delivered.
    """
    found = probe(leader)
    if found is not None and found[0] != start:
        return False
    try:
        os.killpg(leader, sig)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def spawn_session(argv: Sequence[str], env: Mapping[str, str]) -> tuple[int, int]:
    """Start ``argv`` with ``env`` as the leader of a new session, stdin a pipe, stdout/stderr
    discarded.

    Returns its pid and the pipe's write end. posix_spawn rather than subprocess: no
    fork of a large multi-threaded server, and no Popen object that warns when it is
    dropped while the process (deliberately) outlives it.
    """
    read_end, write_end = os.pipe()  # both close-on-exec; dup2 makes stdin inheritable
    try:
        pid = os.posix_spawn(
            argv[0], list(argv), dict(env),
            file_actions=[
                (os.POSIX_SPAWN_DUP2, read_end, 0),
                (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0),
                (os.POSIX_SPAWN_OPEN, 2, os.devnull, os.O_WRONLY, 0),
            ],
            setsid=True,
        )
    except BaseException:
        os.close(write_end)
        raise
    finally:
        os.close(read_end)
    return pid, write_end


def reap(pid: int) -> bool:
    """Collect our child ``pid`` if it has exited; whether it had.

    Raises ChildProcessError when ``pid`` is not (or no longer) a child to collect.
    """
    done, _ = os.waitpid(pid, os.WNOHANG)
    return done == pid
