"""Helpers for the compute-plane tests: small jobs of Python one-liners and polling."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from phalanx.compute.base import PodState
from phalanx.compute.local import LocalPlane
from phalanx.scheduler.types import Admission, PodSetAssignment
from phalanx.spec.resources import JobSpec

NODE = "testnode"


def py_job(name: str, code: str, replicas: int = 1, **pod_set: Any) -> JobSpec:
    """A one-pod-set job whose pods run ``code`` with this Python."""
    return JobSpec.model_validate({
        "name": name,
        "podSets": [{"name": "w", "replicas": replicas,
                     "command": [sys.executable, "-c", code], **pod_set}],
    })


def admit(job: JobSpec, counts: dict[str, int] | None = None, node: str = NODE) -> Admission:
    """Admit every pod set onto ``node``, ``counts`` pods each (default: all replicas)."""
    counts = counts or {}
    return Admission(
        job=job.name, cluster_queue="default",
        pod_sets=tuple(
            PodSetAssignment(p.name, counts.get(p.name, p.replicas), {},
                             (node,) * counts.get(p.name, p.replicas))
            for p in job.pod_sets
        ),
    )


def wait_pods(
    plane: LocalPlane, done: Callable[[list[PodState]], bool], timeout: float = 15.0,
    job: str | None = None,
) -> list[PodState]:
    """Poll observe() until ``done`` holds for the pods (of ``job``, if given)."""
    deadline = time.monotonic() + timeout
    while True:
        pods = [p for p in plane.observe() if job is None or p.ref.job == job]
        if done(pods):
            return sorted(pods, key=lambda p: (p.ref.job, p.ref.attempt, p.ref.rank))
        if time.monotonic() > deadline:
            raise AssertionError(f"pods did not get there in {timeout}s: {pods}")
        time.sleep(0.05)


def all_done(pods: list[PodState]) -> bool:
    return bool(pods) and all(p.phase.done for p in pods)


def wait_file(path: Path, timeout: float = 15.0) -> str:
    """The content of ``path`` once it has some (written by a pod)."""
    deadline = time.monotonic() + timeout
    while not (path.exists() and path.read_text().strip()):
        assert time.monotonic() < deadline, f"{path} was never written"
        time.sleep(0.02)
    return path.read_text()


def wait_gone(pids: list[int], timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while any(alive(pid) for pid in pids):
        assert time.monotonic() < deadline, f"still running: {[p for p in pids if alive(p)]}"
        time.sleep(0.02)


def alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


@pytest.fixture
def plane(home: Path) -> Iterator[LocalPlane]:
    local = LocalPlane(home, node_name=NODE)
    try:
        yield local
    finally:
        stop_everything(home)
        local.close()


def stop_everything(home: Path) -> None:
    """Leave no process behind, whatever the test did (a fresh plane sees every pod)."""
    cleaner = LocalPlane(home, node_name=NODE, gpus=[])
    running = {(p.ref.job, p.ref.attempt) for p in cleaner.observe() if not p.phase.done}
    for job, attempt in running:
        cleaner.terminate(job, attempt, grace_seconds=0)
    if running:
        wait_pods(cleaner, lambda pods: all(p.phase.done for p in pods))
    cleaner.close()
