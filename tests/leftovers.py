"""Clean-up shared by fixtures that start control planes.

Pods deliberately outlive their control plane (a restarted one re-adopts them),
so a test that stops its control plane mid-run must kill what it left behind.
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
from pathlib import Path

import psutil

STARTUP_SECONDS = 180.0
"""How long a test waits for a control plane it started to answer. Only a cap: the wait
ends as soon as it answers. On a 2-core machine running the suite in several processes a
start (which imports the Kubernetes client and migrates a fresh store) has taken over 30 s."""

STOP_SECONDS = 30.0
"""How long a stopped process gets to exit on its own before it is killed."""


def stop_process(proc: subprocess.Popen[bytes], sig: int = signal.SIGTERM) -> int:
    """Send ``sig`` to ``proc`` and wait for it to exit; SIGKILL it if it has not within
    STOP_SECONDS, so that a slow shutdown never leaves it running after its test.
    Returns its exit status."""
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            return proc.wait(timeout=STOP_SECONDS)
        except subprocess.TimeoutExpired:
            proc.kill()
    return proc.wait()


def kill_pods_under(home: Path) -> int:
    """SIGKILL every pod supervisor started for ``home`` and its process tree; return how many."""
    marker = str(home)
    killed = 0
    for proc in psutil.process_iter(["cmdline"]):
        cmdline = proc.info.get("cmdline") or []
        if not any(marker in part for part in cmdline):
            continue
        with contextlib.suppress(psutil.Error):
            for child in proc.children(recursive=True):
                with contextlib.suppress(psutil.Error):
                    child.kill()
            proc.kill()
            killed += 1
    return killed
