"""Clean-up shared by fixtures that start control planes.

Pods deliberately outlive their control plane (a restarted one re-adopts them),
so a test that stops its control plane mid-run must kill what it left behind.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import psutil


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
