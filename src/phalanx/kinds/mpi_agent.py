"""An MPI worker pod's process: runs what the launcher's rsh agent asks, inside this pod.

``python -m phalanx.kinds.mpi_agent`` listens on ``PHALANX_MPI_AGENT_PORT`` (on
``PHALANX_MPI_BIND``, every address when empty) and serves the relay protocol
(``relay.py``) to clients that know ``PHALANX_MPI_SECRET``: each command (``orted``,
in practice) runs as the agent's child, with the pod's environment and working
directory and in the pod's process group, so stopping the pod stops it. The agent
idles until the pod is stopped; SIGTERM ends it cleanly (exit 0).
"""

from __future__ import annotations

import os
import signal
import socket
import sys
from types import FrameType

from phalanx.kinds import relay
from phalanx.kinds.mpi import BIND_ENV, PORT_ENV, SECRET_ENV


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
    launch = relay.Launch(env=dict(os.environ), cwd=os.getcwd(), secret=secret)
    try:
        listener = listen(bind, int(port))
    except OSError as exc:
        print(f"phalanx mpi agent: cannot listen on {bind or '*'}:{port}: {exc}",
              file=sys.stderr)
        return 1

    def stop(signum: int, frame: FrameType | None) -> None:
        launch.kill_sessions()
        os._exit(0)  # the pod's group is being stopped: its commands go with it

    signal.signal(signal.SIGTERM, stop)
    print(f"phalanx mpi agent: waiting for the launcher on {bind or '*'}:{port}", flush=True)
    relay.serve_forever(listener, launch)
    return 0


if __name__ == "__main__":
    sys.exit(main())
