"""An MPI launcher pod's process: ``python -m phalanx.kinds.mpi_launch -- COMMAND...``.

Waits until every worker's agent answers (``PHALANX_MPI_HOSTS``), writes the
hostfile (each worker pod's name with its slots, ``PHALANX_MPI_SLOTS``), writes the
rsh agent OpenMPI runs to start its daemons in the workers (``mpi_rsh.py``), and
runs COMMAND with OpenMPI pointed at both:

- ``OMPI_MCA_plm_rsh_agent`` and ``OMPI_MCA_orte_default_hostfile`` (OpenMPI 4),
  ``PRTE_MCA_plm_ssh_agent`` and ``PRTE_MCA_prte_default_hostfile`` (OpenMPI 5's
  PRRTE); no tree spawn, so only the launcher starts daemons;
- ``OMPI_ALLOW_RUN_AS_ROOT``/``..._CONFIRM`` when the pod runs as root, as in
  containers, where mpirun otherwise refuses;
- ``PHALANX_MPI_HOSTFILE``, for a command that passes ``--hostfile`` itself.

The pod set's own env is the pod's, so any of these can be overridden there.
Exits with COMMAND's exit code; SIGTERM and SIGINT are passed on to it. Before
exiting it stops the workers' agents (SIGTERM, through each agent), so the job
ends with every pod done and each agent cleans up after itself.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from types import FrameType

from phalanx import relay
from phalanx.kinds.mpi import HOSTS_ENV, SECRET_ENV, SLOTS_ENV
from phalanx.kinds.mpi_rsh import agents

WAIT_ENV = "PHALANX_MPI_WAIT_SECONDS"
DEFAULT_WAIT_SECONDS = 300.0
HOSTFILE_ENV = "PHALANX_MPI_HOSTFILE"


def run_quietly(address: tuple[str, int], secret: str, argv: list[str]) -> int | None:
    """Run ``argv`` through the agent at ``address``; its exit code, None when unreachable."""
    try:
        with socket.create_connection(address, timeout=5.0) as sock:
            sock.settimeout(10.0)
            null = os.open(os.devnull, os.O_WRONLY)
            try:
                record = relay.run_client(sock, argv, stdin=None, stdout=null,
                                          stderr=null, secret=secret)
            finally:
                os.close(null)
    except (OSError, relay.RelayError, ValueError):
        return None
    return relay.exit_code(record)


def answers(address: tuple[str, int], secret: str) -> bool:
    """Whether the agent at ``address`` runs a command for us (``true``) right now."""
    return run_quietly(address, secret, ["true"]) == 0


def stop_workers(hosts: dict[str, tuple[str, int]], secret: str) -> None:
    """Ask each worker's agent to end (the shell it runs is its child: $PPID is the agent)."""
    for address in hosts.values():
        run_quietly(address, secret, ["/bin/sh", "-c", "kill -TERM $PPID"])


def wait_for_workers(hosts: dict[str, tuple[str, int]], secret: str, timeout: float) -> list[str]:
    """Wait until every worker's agent answers; the ones that never did."""
    deadline = time.monotonic() + timeout
    waiting = dict(hosts)
    pause = 0.05
    while waiting:
        for name, address in list(waiting.items()):
            if answers(address, secret):
                del waiting[name]
        if not waiting or time.monotonic() >= deadline:
            break
        time.sleep(pause)
        pause = min(pause * 2, 1.0)
    return sorted(waiting)


def hostfile_text(slots: str) -> str:
    """``name=n,...`` as OpenMPI's hostfile, one ``name slots=n`` line per worker."""
    lines = []
    for item in filter(None, slots.split(",")):
        name, _, count = item.partition("=")
        lines.append(f"{name} slots={count}\n")
    return "".join(lines)


def openmpi_environment(hostfile: str, rsh: str) -> dict[str, str]:
    env = {
        "OMPI_MCA_plm_rsh_agent": rsh,
        "OMPI_MCA_orte_default_hostfile": hostfile,
        "OMPI_MCA_plm_rsh_no_tree_spawn": "1",
        "PRTE_MCA_plm_ssh_agent": rsh,
        "PRTE_MCA_prte_default_hostfile": hostfile,
        "PRTE_MCA_plm_ssh_no_tree_spawn": "1",
        HOSTFILE_ENV: hostfile,
    }
    if os.geteuid() == 0:
        env.update({"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"})
    return env


def main(argv: list[str]) -> int:
    command = argv[1:] if argv[:1] == ["--"] else argv
    if not command:
        print("usage: python -m phalanx.kinds.mpi_launch -- COMMAND...", file=sys.stderr)
        return 2
    hosts = agents(os.environ.get(HOSTS_ENV, ""))
    secret = os.environ.get(SECRET_ENV, "")
    timeout = float(os.environ.get(WAIT_ENV, DEFAULT_WAIT_SECONDS))
    print(f"phalanx mpi launcher: waiting for {len(hosts)} worker(s)", flush=True)
    missing = wait_for_workers(hosts, secret, timeout)
    if missing:
        print(f"phalanx mpi launcher: worker(s) {', '.join(missing)} did not answer within "
              f"{timeout:g}s", file=sys.stderr)
        return 1
    try:
        return run(command, hosts)
    finally:
        stop_workers(hosts, secret)


def run(command: list[str], hosts: dict[str, tuple[str, int]]) -> int:
    """Run ``command`` with OpenMPI pointed at the workers; its exit code."""
    work = tempfile.mkdtemp(prefix="phalanx-mpi-")
    try:
        hostfile = os.path.join(work, "hostfile")
        with open(hostfile, "w", encoding="utf-8") as f:
            f.write(hostfile_text(os.environ.get(SLOTS_ENV, "")))
        rsh = os.path.join(work, "rsh")
        with open(rsh, "w", encoding="utf-8") as f:
            f.write(f"#!/bin/sh\nexec '{sys.executable}' -m phalanx.kinds.mpi_rsh \"$@\"\n")
        os.chmod(rsh, 0o700)
        env = dict(os.environ)
        for name, value in openmpi_environment(hostfile, rsh).items():
            env.setdefault(name, value)  # the pod set's own env (already ours) has the last word
        print(f"phalanx mpi launcher: every worker is up; running {' '.join(command)}",
              flush=True)
        try:
            child = subprocess.Popen(command, env=env)
        except OSError as exc:
            print(f"phalanx mpi launcher: cannot start {command[0]!r}: {exc.strerror}",
                  file=sys.stderr)
            return 127 if isinstance(exc, FileNotFoundError) else 126

        def forward(signum: int, frame: FrameType | None) -> None:
            child.send_signal(signum)

        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, forward)
        code = child.wait()
        return code if code >= 0 else 128 - code
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
