"""OpenMPI's rsh agent in a Phalanx MPI launcher: ``mpi_rsh HOST WORD...``.

OpenMPI starts its daemon on each host of the hostfile by running its rsh agent
(``OMPI_MCA_plm_rsh_agent``) as it would ssh: the host, then the words of a shell
command. This agent looks the host (a worker pod's name) up in
``PHALANX_MPI_HOSTS``, asks that worker's agent to run the command with
``/bin/sh -c`` inside the worker pod, relays standard input, output and error,
and exits with the command's exit code, as ssh does.
"""

from __future__ import annotations

import os
import socket
import sys

from phalanx import relay
from phalanx.kinds.mpi import HOSTS_ENV, SECRET_ENV

CONNECT_SECONDS = 30.0


def agents(spec: str) -> dict[str, tuple[str, int]]:
    """``name=host:port,...`` as a mapping (the host may be an IPv6 address)."""
    found = {}
    for item in filter(None, spec.split(",")):
        name, _, address = item.partition("=")
        host, _, port = address.rpartition(":")
        found[name] = (host.strip("[]"), int(port))
    return found


def main(argv: list[str]) -> int:
    # ssh-style options before the host are accepted and ignored (OpenMPI may pass -x).
    words = list(argv)
    while words and words[0].startswith("-"):
        words.pop(0)
    if len(words) < 2:
        print("usage: mpi_rsh HOST COMMAND...", file=sys.stderr)
        return 255
    host, command = words[0], " ".join(words[1:])
    where = agents(os.environ.get(HOSTS_ENV, "")).get(host)
    if where is None:
        print(f"phalanx mpi rsh: {host!r} is not a worker of this job", file=sys.stderr)
        return 255
    try:
        sock = socket.create_connection(where, timeout=CONNECT_SECONDS)
        sock.settimeout(None)
    except OSError as exc:
        print(f"phalanx mpi rsh: cannot reach {host} at {where[0]}:{where[1]}: {exc}",
              file=sys.stderr)
        return 255
    with sock:
        record = relay.run_client(sock, ["/bin/sh", "-c", command], stdin=0, stdout=1,
                                  stderr=2, secret=os.environ.get(SECRET_ENV, ""))
    if record.get("error"):
        print(f"phalanx mpi rsh: {host}: {record['error']}", file=sys.stderr)
    return relay.exit_code(record)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
