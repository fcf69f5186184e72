"""An MPI worker pod's process: runs what the launcher's rsh agent asks, inside this pod.

``python -m phalanx.kinds.mpi_agent`` listens on ``PHALANX_MPI_AGENT_PORT`` (on
``PHALANX_MPI_BIND``, every address when empty) and serves the relay protocol
(``phalanx/relay.py``) to clients that know ``PHALANX_MPI_SECRET``: each command (``orted``,
in practice) runs as the agent's child, with the pod's environment and working
directory and in the pod's process group, so stopping the pod stops it. The agent
idles until the pod is stopped; on SIGTERM it waits for what it started (which got
the SIGTERM too) to end, then exits 0.

Where worker pods share one machine (the local plane, ``PHALANX_MPI_SHARED_HOST``),
each agent gives its commands a shared-memory directory of its own: OpenMPI names
its segments by host name and local rank, so two workers' rank 0 would otherwise
map the same file (and crash).
"""

from __future__ import annotations

import os
import select
import shutil
import signal
import socket
import sys
import tempfile
import threading
import time
from types import FrameType

from phalanx import relay
from phalanx.kinds.mpi import BIND_ENV, PORT_ENV, SECRET_ENV, SHARED_HOST_ENV

SHM = "/dev/shm"
GROUP_POLL_SECONDS = 0.05
# Where OpenMPI 4 (vader) and 5 (sm) put their shared-memory segments.
SEGMENT_DIRS = ("OMPI_MCA_btl_vader_backing_directory", "OMPI_MCA_btl_sm_backing_directory")


def private_segments(env: dict[str, str]) -> str | None:
    """Give ``env``'s commands a shared-memory directory of their own; the directory."""
    if any(name in env for name in SEGMENT_DIRS):
        return None  # the pod set chose one
    directory = tempfile.mkdtemp(prefix="phalanx-mpi-",
                                 dir=SHM if os.path.isdir(SHM) else None)
    for name in SEGMENT_DIRS:
        env[name] = directory
    return directory


def listen(bind: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in bind else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((bind, port))
    sock.listen(64)
    return sock


def main() -> int:
    secret = os.environ.get(SECRET_ENV, "")
    port = os.environ.get(PORT_ENV, "")
    if not secret or not port.isdigit():
        print(f"phalanx mpi agent: {SECRET_ENV} and {PORT_ENV} must be set (Phalanx sets "
              "them on the workers of a kind: mpi job)", file=sys.stderr)
        return 2
    bind = os.environ.get(BIND_ENV, "")
    env = dict(os.environ)
    segments = private_segments(env) if os.environ.get(SHARED_HOST_ENV) else None
    launch = relay.Launch(env=env, cwd=os.getcwd(), secret=secret)
    try:
        listener = listen(bind, int(port))
    except OSError as exc:
        print(f"phalanx mpi agent: cannot listen on {bind or '*'}:{port}: {exc}",
              file=sys.stderr)
        return 1

    def stop(signum: int, frame: FrameType | None) -> None:
        launch.kill_sessions()
        # The pod's group got the SIGTERM too: its commands (orted, the ranks) end in their
        # own time, within the pod's grace; the pod's end would SIGKILL what is left.
        wait_for_group()
        if segments is not None:
            shutil.rmtree(segments, ignore_errors=True)
        os._exit(0)

    signal.signal(signal.SIGTERM, stop)
    print(f"phalanx mpi agent: waiting for the launcher on {bind or '*'}:{port}", flush=True)
    serve(listener, launch)
    return 0


def wait_for_group() -> None:
    """Wait until nothing but this agent (and whoever started it) is left in its process
    group; the plane's SIGKILL at the end of the grace bounds the wait."""
    group = os.getpgid(0)
    spare = {os.getpid(), os.getppid(), group}
    while os.path.isdir("/proc") and relay.group_members(group, spare):
        time.sleep(GROUP_POLL_SECONDS)


def serve(listener: socket.socket, launch: relay.Launch) -> None:
    """Accept clients, each served in a thread, until a signal's handler ends the process.

    A signal may land on any thread, and Python runs its handler in the main thread only
    once that thread runs again: the main thread waits on the signal's wakeup descriptor
    as well as the listener, so SIGTERM is handled at once.
    """
    wake_read, wake_write = socket.socketpair()
    wake_write.setblocking(False)
    signal.set_wakeup_fd(wake_write.fileno(), warn_on_full_buffer=False)
    while True:
        ready, _, _ = select.select([listener, wake_read], [], [])
        if wake_read in ready:
            wake_read.recv(512)  # the handler runs as this returns
        if listener in ready:
            try:
                conn, _ = listener.accept()
            except OSError:
                continue
            threading.Thread(target=relay.serve_connection, args=(conn, launch),
                             daemon=True).start()


if __name__ == "__main__":
    sys.exit(main())
