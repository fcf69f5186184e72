"""The fence inside a job pod: run the rank's command, stop it when the plane's Lease lapses.

A compute plane driven by a ``phalanx worker`` renews a ``coordination.k8s.io/v1``
Lease in its runs namespace. Every job pod runs its command under this wrapper,
which reads that Lease through the pod's own ServiceAccount and kills its child
(the whole process group: torchrun's workers too) once the Lease has not been
renewed for ``leaseDurationSeconds``, even if the worker was killed with
``kill -9`` and even if this node cannot reach the API server any more.

Why a wrapper in each pod rather than the node doctor: the wrapper needs no
agent to be installed or healthy on the node, no right to delete pods, and it
fails closed: what it cannot read counts as not renewed, so a node cut off from
the API server stops its ranks too, within the same bound.

Time is measured on this side only: the wrapper notes (on its own monotonic
clock) when it last saw ``renewTime`` change, so clock skew between the worker's
node and this one does not matter.

This file uses the standard library only: the plane copies it into the pod with
an init container, and any image with ``python3`` runs it.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import signal
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from datetime import datetime

# The exit status of a rank the fence stopped (EX_TEMPFAIL), and the termination message
# it leaves: together they tell the plane the failure was not the job's own.
FENCED_EXIT = 75
FENCED_MESSAGE = "phalanx-fence: the compute plane's lease lapsed"
FENCED_REASON = "Fenced"
TERMINATION_LOG = "/dev/termination-log"  # the kubelet's default terminationMessagePath
SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
LEASE_ENV = "PHALANX_FENCE_LEASE"  # NAMESPACE/NAME
POLL_ENV = "PHALANX_FENCE_POLL"  # seconds between reads (default 10)
GRACE_ENV = "PHALANX_FENCE_GRACE"  # seconds from SIGTERM to SIGKILL (default 10)
READ_TIMEOUT_MAX = 5.0
POLL_JITTER = 1.2  # a read comes at most this many polls after the one before
API_ENV = "PHALANX_FENCE_API"  # overrides the in-cluster API server address
# Until the Lease has been read once, how long the fence waits for a first reading.
DEFAULT_FIRST_READ = 60.0


def _epoch(text: str) -> float:
    """A MicroTime's epoch seconds (a copy of ``lease.parse_micro_time``: stdlib only here)."""
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


@dataclass(slots=True)
class LeaseClock:
    """What the fence knows of the Lease: when it lapses, and when it last changed.

    Lapsed when either says so: the wall clock passed ``renewTime +
    leaseDurationSeconds`` (the worker's meaning of the Lease), or this process has
    not seen ``renewTime`` change for ``leaseDurationSeconds`` on its own monotonic
    clock (which holds even if this node's wall clock lags the worker's, or the Lease
    cannot be read at all).
    """

    first_read: float
    duration: float | None = None
    renew_time: str | None = None
    expires_at: float | None = None
    seen_at: float = field(default_factory=time.monotonic)
    gone: bool = False  # the Lease was deleted: the plane was removed

    def observe(self, lease: dict[str, object] | None, now: float) -> None:
        if lease is None:
            self.gone = True
            return
        spec = lease.get("spec")
        if not isinstance(spec, dict):
            return
        renew = spec.get("renewTime") or spec.get("acquireTime")
        duration = spec.get("leaseDurationSeconds")
        if isinstance(duration, int | float) and duration > 0:
            self.duration = float(duration)
        if isinstance(renew, str) and renew != self.renew_time:
            self.renew_time = renew
            self.seen_at = now
        if isinstance(renew, str) and self.duration is not None:
            with contextlib.suppress(ValueError):
                self.expires_at = _epoch(renew) + self.duration

    def lapsed(self, now: float, wall: float) -> bool:
        limit = self.duration if self.duration is not None else self.first_read
        if self.gone or now - self.seen_at > limit:
            return True
        return self.expires_at is not None and wall > self.expires_at


class LeaseReader:
    """GET one Lease with the pod's ServiceAccount token; None when it does not exist."""

    def __init__(self, api: str, namespace: str, name: str, token_file: str | None,
                 ca_file: str | None, timeout: float) -> None:
        self.url = (f"{api.rstrip('/')}/apis/coordination.k8s.io/v1/namespaces/"
                    f"{namespace}/leases/{name}")
        self.token_file = token_file
        self.timeout = timeout
        self.context: ssl.SSLContext | None = None
        if api.startswith("https://"):
            self.context = ssl.create_default_context(
                cafile=ca_file if ca_file and os.path.exists(ca_file) else None)

    def read(self) -> dict[str, object] | None:
        request = urllib.request.Request(self.url, headers={"Accept": "application/json"})
        if self.token_file and os.path.exists(self.token_file):
            # Re-read every time: the kubelet rotates projected tokens.
            with open(self.token_file) as f:
                request.add_header("Authorization", f"Bearer {f.read().strip()}")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout,
                                        context=self.context) as response:
                body: dict[str, object] = json.loads(response.read())
                return body
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                return None
            raise


def was_fenced(exit_code: int | None, message: object) -> bool:
    """Whether a container's end was the fence's doing (its status and its message)."""
    return exit_code == FENCED_EXIT and isinstance(message, str) and \
        message.startswith(FENCED_MESSAGE)


def _leave_message(path: str) -> None:
    try:
        with open(path, "w") as log:
            log.write(FENCED_MESSAGE + "\n")
    except OSError as exc:  # no termination log here: the exit status still says it
        _say(f"cannot write {path}: {exc}")


def _say(message: str) -> None:
    print(f"phalanx fence: {message}", file=sys.stderr, flush=True)


def _stop(child: subprocess.Popen[bytes], grace: float) -> None:
    """SIGTERM the child's process group, SIGKILL what is left after ``grace``."""
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(child.pid, sig)
        except ProcessLookupError:
            return
        try:
            child.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def _exit_status(code: int) -> int:
    return 128 - code if code < 0 else code


def run(command: list[str], reader: LeaseReader, *, poll: float, grace: float,
        first_read: float, termination_log: str = TERMINATION_LOG) -> int:
    """Run ``command`` until it ends (its status) or the Lease lapses (``FENCED_EXIT``)."""
    child = subprocess.Popen(command, start_new_session=True)

    def forward(signum: int, _frame: object) -> None:
        # The kubelet's SIGTERM (pod deletion) goes to the whole rank.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, signum)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    clock = LeaseClock(first_read=first_read)
    while True:
        try:
            clock.observe(reader.read(), time.monotonic())
        except (OSError, ValueError) as exc:  # unreachable, refused, bad JSON: not renewed
            _say(f"cannot read the lease: {exc}")
        if clock.lapsed(time.monotonic(), time.time()):
            why = "was deleted" if clock.gone else (
                f"was not renewed for {clock.duration or first_read:g}s")
            _say(f"the compute plane's lease {why}; stopping the rank")
            _stop(child, grace)
            _leave_message(termination_log)
            return FENCED_EXIT
        try:
            # Jittered, so the ranks of a gang started together do not read in step.
            return _exit_status(child.wait(timeout=poll * random.uniform(0.8, POLL_JITTER)))
        except subprocess.TimeoutExpired:
            continue


def read_timeout(poll: float) -> float:
    return max(1.0, min(poll, READ_TIMEOUT_MAX))


def _in_cluster_api() -> str | None:
    host, port = os.environ.get("KUBERNETES_SERVICE_HOST"), os.environ.get(
        "KUBERNETES_SERVICE_PORT", "443")
    if not host:
        return None
    return f"https://[{host}]:{port}" if ":" in host else f"https://{host}:{port}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="fence", description="Run a command; stop it when the plane's Lease lapses.")
    parser.add_argument("--lease", default=os.environ.get(LEASE_ENV),
                        help=f"NAMESPACE/NAME of the Lease (default: ${LEASE_ENV})")
    parser.add_argument("--api", default=os.environ.get(API_ENV) or _in_cluster_api(),
                        help="API server URL (default: in-cluster)")
    parser.add_argument("--token-file", default=f"{SERVICE_ACCOUNT_DIR}/token")
    parser.add_argument("--ca-file", default=f"{SERVICE_ACCOUNT_DIR}/ca.crt")
    # Every rank reads the Lease: 1000 ranks at 10 s (what the worker sets for a fence of
    # 100 s or more) are 100 small GETs a second, and the fence still acts well within the
    # margin between --fence-after and --worker-lost-after.
    parser.add_argument("--poll", type=float, default=float(os.environ.get(POLL_ENV) or 10.0),
                        help=f"Seconds between reads (default: ${POLL_ENV}, else 10)")
    parser.add_argument("--grace", type=float,
                        default=float(os.environ.get(GRACE_ENV) or 10.0),
                        help="Seconds between SIGTERM and SIGKILL when fenced")
    parser.add_argument("--first-read", type=float, default=DEFAULT_FIRST_READ,
                        help="Seconds to wait for a first reading of the Lease")
    parser.add_argument("--termination-log", default=TERMINATION_LOG,
                        help="Where to leave the fenced message for the plane")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the command to run after --")
    if not args.lease or "/" not in args.lease:
        parser.error(f"--lease NAMESPACE/NAME is required (or ${LEASE_ENV})")
    if not args.api:
        parser.error(f"no API server: not in a cluster, and neither --api nor ${API_ENV}")
    namespace, name = args.lease.split("/", 1)
    reader = LeaseReader(args.api, namespace, name, args.token_file, args.ca_file,
                         timeout=read_timeout(args.poll))
    return run(command, reader, poll=args.poll, grace=args.grace, first_read=args.first_read,
               termination_log=args.termination_log)


if __name__ == "__main__":
    sys.exit(main())
